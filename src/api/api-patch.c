/* JSON merge patch (RFC 7386) and JSON patch (RFC 6902) on jansson values. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/macro.h"

/* target's members in their order (those the patch replaces merged, those it sets to null left
 * out), then the patch's new members: the order the RFC's in-place algorithm gives. Members the
 * patch does not touch are shared (share) or deep copies; the patch's values are always copied,
 * and each object on a patched path is a new one. */
static json_t *merge(const json_t *target, const json_t *patch, bool share)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *result = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)(json_is_object(target) ? target : NULL), k, v) {
        json_t *p = json_object_get(patch, k);
        if (json_is_null(p))
            continue;
        json_t *m = p ? merge(v, p, share) : share ? json_incref(v) : json_deep_copy(v);
        if (!result || !m || json_object_set_new(result, k, m) < 0)
            goto fail;
    }
    json_object_foreach ((json_t *)patch, k, v) {
        if (json_is_null(v) || (json_is_object(target) && json_object_get(target, k)))
            continue;
        json_t *m = merge(NULL, v, share);
        if (!result || !m || json_object_set_new(result, k, m) < 0)
            goto fail;
    }
    return result;
fail:
    json_decref(result);
    return NULL;
}

json_t *api_merge_patch(const json_t *target, const json_t *patch)
{
    return merge(target, patch, false);
}

json_t *api_merge_patch_shared(const json_t *target, const json_t *patch)
{
    return merge(target, patch, true);
}

json_t *api_own_member(json_t *parent, const char *key)
{
    json_t *v = json_object_get(parent, key);
    if (!v || v->refcount <= 1)
        return v;
    json_t *copy = json_copy(v);
    return copy && json_object_set_new(parent, key, copy) == 0 ? copy : NULL;
}

json_t *api_own_element(json_t *array, size_t i)
{
    json_t *v = json_array_get(array, i);
    if (!v || v->refcount <= 1)
        return v;
    json_t *copy = json_copy(v);
    return copy && json_array_set_new(array, i, copy) == 0 ? copy : NULL;
}

/* ---- RFC 6902 ---- */

/* Decodes one reference token (~1 -> /, ~0 -> ~) of length n. Owned or NULL. */
static char *token_dup(const char *s, size_t n, api_error *err)
{
    char *t = malloc(n + 1), *w = t;
    if (!t) {
        api_error_set_reason(err, KUBE_REASON_INVALID, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '~') {
            if (i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
                *w++ = s[i + 1] == '0' ? '~' : '/';
                i++;
                continue;
            }
            free(t);
            api_error_set_reason(err, KUBE_REASON_INVALID, "invalid JSON pointer escape");
            return NULL;
        }
        *w++ = s[i];
    }
    *w = '\0';
    return t;
}

/* Array index token: digits without leading zeros, or "-" (end) when allow_end. */
static int array_index(const char *tok, size_t size, bool allow_end, size_t *ret)
{
    if (allow_end && strcmp(tok, "-") == 0) {
        *ret = size;
        return 0;
    }
    if (!tok[0] || (tok[0] == '0' && tok[1]) || strlen(tok) > 9)
        return -EINVAL;
    for (const char *c = tok; *c; c++)
        if (*c < '0' || *c > '9')
            return -EINVAL;
    size_t i = (size_t)strtoul(tok, NULL, 10);
    if (i > size || (!allow_end && i == size))
        return -EINVAL;
    *ret = i;
    return 0;
}

/* Resolves ptr to (parent container, last token). Root pointer "" gives parent NULL. */
static int resolve_parent(json_t *doc, const char *ptr, json_t **ret_parent, char **ret_tok,
                          api_error *err)
{
    if (ptr[0] == '\0') {
        *ret_parent = NULL;
        *ret_tok = NULL;
        return 0;
    }
    if (ptr[0] != '/') {
        api_error_set_reason(err, KUBE_REASON_INVALID, "JSON pointer must start with '/'");
        return -EINVAL;
    }
    json_t *cur = doc;
    const char *p = ptr + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char *tok = token_dup(p, n, err);
        if (!tok)
            return -EINVAL;
        if (!slash) {
            *ret_parent = cur;
            *ret_tok = tok;
            return 0;
        }
        json_t *next = NULL;
        size_t idx;
        if (json_is_object(cur))
            next = json_object_get(cur, tok);
        else if (json_is_array(cur) && array_index(tok, json_array_size(cur), false, &idx) == 0)
            next = json_array_get(cur, idx);
        free(tok);
        if (!next) {
            api_error_set_reason(err, KUBE_REASON_INVALID, "path not found");
            return -ENOENT;
        }
        cur = next;
        p = slash + 1;
    }
}

static json_t *pointer_get(json_t *doc, const char *ptr, api_error *err)
{
    json_t *parent;
    _cleanup_free_ char *tok = NULL;
    if (resolve_parent(doc, ptr, &parent, &tok, err) < 0)
        return NULL;
    if (!parent)
        return doc;
    size_t idx;
    json_t *v = NULL;
    if (json_is_object(parent))
        v = json_object_get(parent, tok);
    else if (json_is_array(parent) && array_index(tok, json_array_size(parent), false, &idx) == 0)
        v = json_array_get(parent, idx);
    if (!v)
        api_error_set_reason(err, KUBE_REASON_INVALID, "path not found");
    return v;
}

/* Removes the value at ptr and returns it (owned), or NULL. */
static json_t *pointer_remove(json_t *doc, const char *ptr, api_error *err)
{
    json_t *parent;
    _cleanup_free_ char *tok = NULL;
    if (resolve_parent(doc, ptr, &parent, &tok, err) < 0)
        return NULL;
    if (!parent) {
        api_error_set_reason(err, KUBE_REASON_INVALID, "cannot remove the root");
        return NULL;
    }
    size_t idx;
    json_t *v = NULL;
    if (json_is_object(parent)) {
        v = json_incref(json_object_get(parent, tok));
        if (v)
            json_object_del(parent, tok);
    } else if (json_is_array(parent) &&
               array_index(tok, json_array_size(parent), false, &idx) == 0) {
        v = json_incref(json_array_get(parent, idx));
        json_array_remove(parent, idx);
    }
    if (!v)
        api_error_set_reason(err, KUBE_REASON_INVALID, "path not found");
    return v;
}

/* Adds value (reference stolen) at ptr; replace=true requires an existing target.
 * May replace *doc when ptr is the root. */
static int pointer_add(json_t **doc, const char *ptr, json_t *value, bool replace, api_error *err)
{
    json_t *parent;
    _cleanup_free_ char *tok = NULL;
    if (resolve_parent(*doc, ptr, &parent, &tok, err) < 0) {
        json_decref(value);
        return -EINVAL;
    }
    if (!parent) {
        json_decref(*doc);
        *doc = value;
        return 0;
    }
    size_t idx;
    if (json_is_object(parent)) {
        if (replace && !json_object_get(parent, tok)) {
            json_decref(value);
            api_error_set_reason(err, KUBE_REASON_INVALID, "path not found");
            return -ENOENT;
        }
        return json_object_set_new(parent, tok, value) < 0 ? -ENOMEM : 0;
    }
    if (json_is_array(parent) && array_index(tok, json_array_size(parent), !replace, &idx) == 0) {
        if (replace)
            return json_array_set_new(parent, idx, value) < 0 ? -ENOMEM : 0;
        return json_array_insert_new(parent, idx, value) < 0 ? -ENOMEM : 0;
    }
    json_decref(value);
    api_error_set_reason(err, KUBE_REASON_INVALID, "path not found");
    return -ENOENT;
}

static int apply_op(json_t **doc, const json_t *op, api_error *err)
{
    const char *name = json_string_value(json_object_get(op, "op"));
    const char *path = json_string_value(json_object_get(op, "path"));
    const char *from = json_string_value(json_object_get(op, "from"));
    json_t *value = json_object_get(op, "value");
    if (!name || !path) {
        api_error_set_reason(err, KUBE_REASON_INVALID,
                             "each operation needs string \"op\" and \"path\"");
        return -EINVAL;
    }
    if (strcmp(name, "add") == 0 || strcmp(name, "replace") == 0) {
        if (!value) {
            api_error_set_reason(err, KUBE_REASON_INVALID, "missing \"value\"");
            return -EINVAL;
        }
        json_t *copy = json_deep_copy(value);
        if (!copy)
            return -ENOMEM;
        return pointer_add(doc, path, copy, name[0] == 'r', err);
    }
    if (strcmp(name, "remove") == 0) {
        json_t *v = pointer_remove(*doc, path, err);
        json_decref(v);
        return v ? 0 : -ENOENT;
    }
    if (strcmp(name, "test") == 0) {
        json_t *v = pointer_get(*doc, path, err);
        if (!v || !value || !json_equal(v, value)) {
            api_error_set_reason(err, KUBE_REASON_INVALID, "test operation failed");
            return -EINVAL;
        }
        return 0;
    }
    if (strcmp(name, "move") == 0 || strcmp(name, "copy") == 0) {
        if (!from) {
            api_error_set_reason(err, KUBE_REASON_INVALID, "missing \"from\"");
            return -EINVAL;
        }
        json_t *v;
        if (name[0] == 'm') {
            size_t fl = strlen(from);
            if (strncmp(path, from, fl) == 0 && path[fl] == '/') {
                api_error_set_reason(err, KUBE_REASON_INVALID, "cannot move a value into itself");
                return -EINVAL;
            }
            v = pointer_remove(*doc, from, err);
        } else {
            json_t *src = pointer_get(*doc, from, err);
            v = src ? json_deep_copy(src) : NULL;
        }
        if (!v)
            return -ENOENT;
        return pointer_add(doc, path, v, false, err);
    }
    api_error_set_reason(err, KUBE_REASON_INVALID, "unknown operation");
    return -EINVAL;
}

/* The words of a refused patch; the reason is Invalid whatever the cause, as it always was. */
static int refuse(api_error *err, const char *why)
{
    api_error_set_reason(err, KUBE_REASON_INVALID, "%s", why);
    return -EINVAL;
}

int api_json_patch(const json_t *target, const json_t *patch, json_t **ret, api_error *err)
{
    if (!json_is_array(patch))
        return refuse(err, "a JSON patch must be an array of operations");
    json_t *doc = json_deep_copy(target);
    if (!doc)
        return refuse(err, "out of memory");
    size_t i;
    json_t *op;
    json_array_foreach (patch, i, op) {
        _cleanup_(api_error_clear) api_error why = API_ERROR_INIT;
        if (!json_is_object(op) || apply_op(&doc, op, &why) < 0) {
            json_decref(doc);
            return refuse(err, why.message ? why.message : "invalid operation");
        }
    }
    *ret = doc;
    return 0;
}
