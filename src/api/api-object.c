/* Kind table, names, field error lists and Status objects. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api-kinds.h"
#include "basic/macro.h"


/* Names here; each kind's shape is its table in api-kind-<kind>.c. */
const api_kind api_kinds[] = {
    {.kind = "Sandbox",
     .list_kind = "SandboxList",
     .plural = "sandboxes",
     .singular = "sandbox",
     .group = API_GROUP_CORE,
     .api_version = API_GROUP_CORE "/" API_VERSION,
     .short_names = {"sandbox", NULL},
     .aliases = {"sbx", NULL, NULL},
     .has_status = true,
     .spec = api_sandbox_spec,
     .status = api_sandbox_status,
     .columns = api_sandbox_columns},
    {.kind = "SandboxTemplate",
     .list_kind = "SandboxTemplateList",
     .plural = "sandboxtemplates",
     .singular = "sandboxtemplate",
     .group = API_GROUP_EXT,
     .api_version = API_GROUP_EXT "/" API_VERSION,
     .short_names = {"sandboxtemplate", NULL},
     .aliases = {"template", "templates", NULL},
     .spec = api_template_spec,
     .columns = api_template_columns},
    {.kind = "SandboxWarmPool",
     .list_kind = "SandboxWarmPoolList",
     .plural = "sandboxwarmpools",
     .singular = "sandboxwarmpool",
     .group = API_GROUP_EXT,
     .api_version = API_GROUP_EXT "/" API_VERSION,
     .short_names = {"swp", NULL},
     .aliases = {"warmpool", "warmpools", NULL},
     .has_status = true,
     .has_scale = true,
     .spec = api_warmpool_spec,
     .status = api_warmpool_status,
     .columns = api_warmpool_columns},
    {.kind = "SandboxClaim",
     .list_kind = "SandboxClaimList",
     .plural = "sandboxclaims",
     .singular = "sandboxclaim",
     .group = API_GROUP_EXT,
     .api_version = API_GROUP_EXT "/" API_VERSION,
     .short_names = {"sandboxclaim", NULL},
     .aliases = {"claim", "claims", NULL},
     .has_status = true,
     .spec = api_claim_spec,
     .status = api_claim_status,
     .columns = api_claim_columns},
    /* Our extension (docs/snapshots.md): upstream has no such kind. */
    {.kind = "SandboxSnapshot",
     .list_kind = "SandboxSnapshotList",
     .plural = "sandboxsnapshots",
     .singular = "sandboxsnapshot",
     .group = API_GROUP_EXT,
     .api_version = API_GROUP_EXT "/" API_VERSION,
     .short_names = {"ssnap", NULL},
     .aliases = {"snapshot", "snapshots", NULL},
     .has_status = true,
     .spec = api_snapshot_spec,
     .status = api_snapshot_status,
     .columns = api_snapshot_columns},
};
const size_t api_n_kinds = ELEMENTSOF(api_kinds);

const api_kind *api_kind_by_plural(const char *group, const char *plural)
{
    for (size_t i = 0; i < api_n_kinds; i++)
        if (strcmp(api_kinds[i].group, group) == 0 && strcmp(api_kinds[i].plural, plural) == 0)
            return &api_kinds[i];
    if (strcmp(group, API_GROUP_EVENTS) == 0 && strcmp(plural, api_event_kind.plural) == 0)
        return &api_event_kind;
    return NULL;
}

const api_kind *api_kind_by_name(const char *name)
{
    for (size_t i = 0; i < api_n_kinds; i++) {
        const api_kind *k = &api_kinds[i];
        if (strcasecmp(k->kind, name) == 0 || strcmp(k->plural, name) == 0 ||
            strcmp(k->singular, name) == 0)
            return k;
        for (size_t j = 0; j < ELEMENTSOF(k->short_names) && k->short_names[j]; j++)
            if (strcmp(k->short_names[j], name) == 0)
                return k;
        for (size_t j = 0; j < ELEMENTSOF(k->aliases) && k->aliases[j]; j++)
            if (strcmp(k->aliases[j], name) == 0)
                return k;
    }
    const api_kind *e = &api_event_kind;
    if (strcasecmp(e->kind, name) == 0 || strcmp(e->plural, name) == 0 ||
        strcmp(e->singular, name) == 0 || strcmp(e->short_names[0], name) == 0)
        return e;
    return NULL;
}

bool api_group_known(const char *group)
{
    return strcmp(group, API_GROUP_CORE) == 0 || strcmp(group, API_GROUP_EXT) == 0;
}

/* ---- names ---- */

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static const char dns1123_label_msg[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
static const char dns1123_subdomain_msg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

static bool label_ok(const char *s, size_t n)
{
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

bool api_is_dns1123_label(const char *s, const char **ret_detail)
{
    size_t n = strlen(s);
    if (n > 63) {
        *ret_detail = "must be no more than 63 characters";
        return false;
    }
    if (!label_ok(s, n)) {
        *ret_detail = dns1123_label_msg;
        return false;
    }
    return true;
}

bool api_is_dns1123_subdomain(const char *s, const char **ret_detail)
{
    size_t n = strlen(s);
    if (n > 253) {
        *ret_detail = "must be no more than 253 characters";
        return false;
    }
    const char *p = s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (!label_ok(p, len)) {
            *ret_detail = dns1123_subdomain_msg;
            return false;
        }
        if (!dot)
            return true;
        p = dot + 1;
    }
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most 63 characters, non-empty. */
static bool name_part_ok(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

bool api_is_qualified_name(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash)
        return name_part_ok(s, strlen(s));
    if (strchr(slash + 1, '/'))
        return false;
    _cleanup_free_ char *prefix = strndup(s, (size_t)(slash - s));
    const char *detail;
    if (!prefix || !api_is_dns1123_subdomain(prefix, &detail))
        return false;
    return name_part_ok(slash + 1, strlen(slash + 1));
}

bool api_is_label_value(const char *s)
{
    size_t n = strlen(s);
    return n == 0 || name_part_ok(s, n);
}

char *api_generate_name(const char *prefix, const unsigned char random[5])
{
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    size_t n = strnlen(prefix, 58);
    char *s = malloc(n + 6);
    if (!s)
        return NULL;
    memcpy(s, prefix, n);
    for (size_t i = 0; i < 5; i++)
        s[n + i] = alphabet[random[i] % (sizeof(alphabet) - 1)];
    s[n + 5] = '\0';
    return s;
}

const char *api_meta_string(const json_t *obj, const char *field)
{
    json_t *v = json_object_get(json_object_get(obj, "metadata"), field);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

uint64_t api_meta_rv(const json_t *obj)
{
    const char *rv = api_meta_string(obj, "resourceVersion");
    return rv ? strtoull(rv, NULL, 10) : 0;
}

/* ---- field errors ---- */

static const char *const error_type_text[] = {
    [API_FIELD_REQUIRED] = "Required value",
    [API_FIELD_INVALID] = "Invalid value",
    [API_FIELD_UNSUPPORTED] = "Unsupported value",
    [API_FIELD_DUPLICATE] = "Duplicate value",
    [API_FIELD_TOO_LONG] = "Too long",
    [API_FIELD_FORBIDDEN] = "Forbidden",
    [API_FIELD_TYPE] = "Invalid value",
    [API_FIELD_NOT_FOUND] = "Not found",
};
static const char *const error_type_reason[] = {
    [API_FIELD_REQUIRED] = "FieldValueRequired",
    [API_FIELD_INVALID] = "FieldValueInvalid",
    [API_FIELD_UNSUPPORTED] = "FieldValueNotSupported",
    [API_FIELD_DUPLICATE] = "FieldValueDuplicate",
    [API_FIELD_TOO_LONG] = "FieldValueTooLong",
    [API_FIELD_FORBIDDEN] = "FieldValueForbidden",
    [API_FIELD_TYPE] = "FieldValueTypeInvalid",
    [API_FIELD_NOT_FOUND] = "FieldValueNotFound",
};

/* Go's %#v-like rendering used by field.Error: strings quoted, other values as JSON. */
static char *render_value(const json_t *v)
{
    if (!v)
        return NULL;
    if (json_is_string(v)) {
        json_t *tmp = json_string(json_string_value(v));
        char *s = tmp ? json_dumps(tmp, JSON_ENCODE_ANY) : NULL;
        json_decref(tmp);
        return s;
    }
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

void api_errors_add(api_errors *errs, api_error_type type, const char *field, const json_t *value,
                    const char *detail_fmt, ...)
{
    _cleanup_free_ char *detail = NULL, *rendered = NULL;
    if (detail_fmt) {
        va_list ap;
        va_start(ap, detail_fmt);
        if (vasprintf(&detail, detail_fmt, ap) < 0)
            detail = NULL;
        va_end(ap);
    }
    rendered = render_value(value);
    char *msg = NULL;
    int r;
    if (type == API_FIELD_REQUIRED || type == API_FIELD_FORBIDDEN || type == API_FIELD_TOO_LONG)
        r = asprintf(&msg, "%s: %s%s%s", field, error_type_text[type], detail ? ": " : "",
                     detail ? detail : "");
    else
        r = asprintf(&msg, "%s: %s: %s%s%s", field, error_type_text[type],
                     rendered ? rendered : "null", detail ? ": " : "", detail ? detail : "");
    if (r < 0) {
        errs->oom = true;
        return;
    }
    /* The schema and a field's own rules may find the same fault: say it once. */
    for (size_t i = 0; i < errs->n; i++)
        if (strcmp(errs->v[i].message, msg) == 0) {
            free(msg);
            return;
        }
    struct api_field_error *nv = realloc(errs->v, (errs->n + 1) * sizeof(*nv));
    char *f = strdup(field);
    if (!nv || !f) {
        if (nv)
            errs->v = nv;
        free(f);
        free(msg);
        errs->oom = true;
        return;
    }
    errs->v = nv;
    errs->v[errs->n++] = (struct api_field_error){type, f, msg};
}

bool api_errors_has_field(const api_errors *errs, const char *field)
{
    for (size_t i = 0; i < errs->n; i++)
        if (strcmp(errs->v[i].field, field) == 0)
            return true;
    return false;
}

void api_errors_ratchet(api_errors *errs, const json_t *obj, const json_t *old)
{
    size_t kept = 0;
    for (size_t i = 0; i < errs->n; i++) {
        struct api_field_error *fe = &errs->v[i];
        char path[1024];
        const json_t *a = NULL, *b = NULL;
        if (old && (size_t)snprintf(path, sizeof(path), ".%s", fe->field) < sizeof(path)) {
            a = api_json_path(obj, path);
            b = api_json_path(old, path);
        }
        if (a && b && json_equal((json_t *)a, (json_t *)b)) {
            free(fe->field);
            free(fe->message);
            continue;
        }
        errs->v[kept++] = *fe;
    }
    errs->n = kept;
}

void api_errors_clear(api_errors *errs)
{
    for (size_t i = 0; i < errs->n; i++) {
        free(errs->v[i].field);
        free(errs->v[i].message);
    }
    free(errs->v);
    *errs = (api_errors){0};
}

char *api_errors_format(const api_errors *errs, const api_kind *k, const char *name)
{
    size_t len = 64 + strlen(k->kind) + strlen(k->group) + (name ? strlen(name) : 0);
    for (size_t i = 0; i < errs->n; i++)
        len += strlen(errs->v[i].message) + 2;
    char *s = malloc(len);
    if (!s)
        return NULL;
    int off = snprintf(s, len, "%s.%s \"%s\" is invalid: %s", k->kind, k->group, name ? name : "",
                       errs->n > 1 ? "[" : "");
    for (size_t i = 0; i < errs->n; i++)
        off += snprintf(s + off, len - (size_t)off, "%s%s", i ? ", " : "", errs->v[i].message);
    if (errs->n > 1)
        snprintf(s + off, len - (size_t)off, "]");
    return s;
}

json_t *api_errors_causes(const api_errors *errs)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < errs->n; i++) {
        const char *m = errs->v[i].message;
        size_t fl = strlen(errs->v[i].field);
        if (strncmp(m, errs->v[i].field, fl) == 0 && strncmp(m + fl, ": ", 2) == 0)
            m += fl + 2;
        json_array_append_new(a, json_pack("{s:s,s:s,s:s}", "reason",
                                           error_type_reason[errs->v[i].type], "message", m,
                                           "field", errs->v[i].field));
    }
    return a;
}

json_t *api_status_failure(unsigned code, const char *reason, const char *message,
                           const api_kind *k, const char *name)
{
    json_t *st = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                           "metadata", "status", "Failure", "message", message ? message : "",
                           "reason", reason, "code", (json_int_t)code);
    if (st && (k || name)) {
        json_t *d = json_object();
        if (name)
            json_object_set_new(d, "name", json_string(name));
        if (k) {
            json_object_set_new(d, "group", json_string(k->group));
            json_object_set_new(d, "kind", json_string(k->plural));
        }
        json_object_set_new(st, "details", d);
    }
    return st;
}
