/* Manifests: YAML (libyaml events, YAML 1.2 core schema) or a JSON stream -> JSON objects, and
 * JSON -> YAML for display. Input is untrusted (fuzz/fuzz-yaml-manifest.c): nesting depth and
 * alias expansion are bounded, duplicate keys and non-scalar keys are errors. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-yaml.h"

#define MAX_DEPTH 256
#define MAX_ALIAS_NODES 100000 /* nodes copied by alias expansion, all documents together */

typedef struct loader {
    yaml_parser_t parser;
    json_t *anchors;     /* name -> value */
    size_t alias_budget; /* nodes still allowed through aliases */
    int failed;          /* error already recorded */
} loader;

static int load_fail(loader *l, const yaml_mark_t *mark, const char *what)
{
    if (!l->failed)
        asbi_error_set(ASB_EMANIFEST, 0, NULL, "yaml: line %zu column %zu: %s", mark->line + 1,
                       mark->column + 1, what);
    l->failed = 1;
    return -EBADMSG;
}

static int next_event(loader *l, yaml_event_t *ev)
{
    if (yaml_parser_parse(&l->parser, ev))
        return 0;
    if (!l->failed) {
        const yaml_mark_t *m = l->parser.problem ? &l->parser.problem_mark : &l->parser.mark;
        if (l->parser.error == YAML_MEMORY_ERROR)
            asbi_error_set(ASB_ENOMEM, 0, NULL, "yaml: out of memory");
        else
            asbi_error_set(ASB_EMANIFEST, 0, NULL, "yaml: line %zu column %zu: %s%s%s", m->line + 1,
                           m->column + 1, l->parser.problem ? l->parser.problem : "syntax error",
                           l->parser.context ? " " : "",
                           l->parser.context ? l->parser.context : "");
    }
    l->failed = 1;
    return l->parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EBADMSG;
}

static bool all_in(const char *s, size_t n, const char *set)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr(set, s[i]))
            return false;
    return true;
}

/* YAML 1.2 core schema resolution of a plain scalar. Returns a new reference; *nonfinite is set
 * for .inf/.nan, which JSON cannot carry. */
static json_t *resolve_plain(const char *s, size_t n, bool *nonfinite)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    static const char *const trues[] = {"true", "True", "TRUE"};
    static const char *const falses[] = {"false", "False", "FALSE"};
    *nonfinite = false;
    if (memchr(s, '\0', n))
        return json_stringn(s, n);
    for (size_t i = 0; i < 5; i++)
        if (strcmp(s, nulls[i]) == 0)
            return json_null();
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(s, trues[i]) == 0)
            return json_true();
        if (strcmp(s, falses[i]) == 0)
            return json_false();
    }
    const char *d = s;
    size_t dn = n;
    if (dn > 0 && (*d == '-' || *d == '+'))
        d++, dn--;
    if (all_in(d, dn, "0123456789")) {
        errno = 0;
        long long v = strtoll(s, NULL, 10);
        if (errno == 0)
            return json_integer(v);
        return json_real(strtod(s, NULL));
    }
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o') &&
        all_in(s + 2, n - 2, s[1] == 'x' ? "0123456789abcdefABCDEF" : "01234567")) {
        errno = 0;
        unsigned long long v = strtoull(s + 2, NULL, s[1] == 'x' ? 16 : 8);
        if (errno == 0 && v <= (unsigned long long)INT64_MAX)
            return json_integer((json_int_t)v);
        return json_stringn(s, n);
    }
    if (strcmp(d, ".inf") == 0 || strcmp(d, ".Inf") == 0 || strcmp(d, ".INF") == 0 ||
        strcmp(s, ".nan") == 0 || strcmp(s, ".NaN") == 0 || strcmp(s, ".NAN") == 0) {
        *nonfinite = true;
        return NULL;
    }
    /* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
    size_t i = 0, digits = 0;
    while (i < dn && d[i] >= '0' && d[i] <= '9')
        i++, digits++;
    if (i < dn && d[i] == '.') {
        i++;
        while (i < dn && d[i] >= '0' && d[i] <= '9')
            i++, digits++;
    }
    if (digits > 0 && i < dn && (d[i] == 'e' || d[i] == 'E')) {
        size_t j = i + 1;
        if (j < dn && (d[j] == '-' || d[j] == '+'))
            j++;
        if (j < dn && all_in(d + j, dn - j, "0123456789"))
            i = dn;
    }
    if (digits > 0 && i == dn) {
        double v = strtod(s, NULL);
        if (isfinite(v))
            return json_real(v);
        *nonfinite = true;
        return NULL;
    }
    return json_stringn(s, n);
}

static json_t *load_scalar(loader *l, const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    json_t *v;
    if (memchr(s, '\0', n)) {
        /* Kubernetes objects never hold NUL, and most JSON consumers refuse \u0000. */
        load_fail(l, &ev->start_mark, "NUL character in a scalar");
        return NULL;
    }
    if (tag && strcmp(tag, "tag:yaml.org,2002:str") == 0)
        plain = false;
    else if (tag && strcmp(tag, "!") == 0)
        plain = false;
    else if (tag && strncmp(tag, "tag:yaml.org,2002:", 18) == 0)
        plain = true; /* !!int, !!bool, ...: resolve the text whatever its style */
    if (!plain) {
        v = json_stringn(s, n);
    } else {
        bool nonfinite;
        v = resolve_plain(s, n, &nonfinite);
        if (!v && nonfinite) {
            load_fail(l, &ev->start_mark, "infinity and NaN cannot be represented in JSON");
            return NULL;
        }
    }
    if (!v) {
        /* json_stringn refuses invalid UTF-8; libyaml only hands out valid UTF-8, so ENOMEM. */
        if (!l->failed)
            asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        l->failed = 1;
    }
    return v;
}

static size_t count_nodes(const json_t *v, size_t limit)
{
    size_t n = 1;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach ((json_t *)v, k, c) {
            n += count_nodes(c, limit);
            if (n > limit)
                return n;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v) && n <= limit; i++)
            n += count_nodes(json_array_get(v, i), limit);
    }
    return n;
}

static json_t *load_node(loader *l, yaml_event_t *ev, int depth);

static json_t *load_collection(loader *l, yaml_event_t *start, int depth)
{
    bool is_map = start->type == YAML_MAPPING_START_EVENT;
    json_t *c = is_map ? json_object() : json_array();
    if (!c) {
        asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        l->failed = 1;
        return NULL;
    }
    if (depth > MAX_DEPTH) {
        load_fail(l, &start->start_mark, "nesting too deep");
        goto fail;
    }
    for (;;) {
        yaml_event_t ev;
        if (next_event(l, &ev) < 0)
            goto fail;
        if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return c;
        }
        if (!is_map) {
            json_t *item = load_node(l, &ev, depth + 1);
            yaml_event_delete(&ev);
            if (!item || json_array_append_new(c, item) < 0)
                goto fail;
            continue;
        }
        /* Mapping: a scalar key (or an alias of a string), then the value. */
        char *key = NULL;
        yaml_mark_t key_mark = ev.start_mark;
        json_t *k = NULL;
        if (ev.type == YAML_SCALAR_EVENT &&
            memchr(ev.data.scalar.value, '\0', ev.data.scalar.length)) {
            yaml_event_delete(&ev);
            load_fail(l, &key_mark, "NUL character in a mapping key");
            goto fail;
        }
        if (ev.type == YAML_SCALAR_EVENT) {
            key = strndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
        } else if (ev.type == YAML_ALIAS_EVENT) {
            k = json_object_get(l->anchors, (const char *)ev.data.alias.anchor);
            if (json_is_string(k))
                key = strdup(json_string_value(k));
        }
        bool scalar_key = ev.type == YAML_SCALAR_EVENT || json_is_string(k);
        if (ev.type == YAML_SCALAR_EVENT && ev.data.scalar.anchor) {
            json_t *ks = json_stringn((const char *)ev.data.scalar.value, ev.data.scalar.length);
            if (ks)
                json_object_set_new(l->anchors, (const char *)ev.data.scalar.anchor, ks);
        }
        yaml_event_delete(&ev);
        if (!scalar_key) {
            free(key);
            load_fail(l, &key_mark, "mapping keys must be strings");
            goto fail;
        }
        if (!key) {
            asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
            l->failed = 1;
            goto fail;
        }
        if (next_event(l, &ev) < 0) {
            free(key);
            goto fail;
        }
        json_t *val = load_node(l, &ev, depth + 1);
        yaml_event_delete(&ev);
        if (!val) {
            free(key);
            goto fail;
        }
        if (json_object_get(c, key)) {
            json_decref(val);
            char msg[160];
            snprintf(msg, sizeof(msg), "mapping key \"%.100s\" already defined", key);
            free(key);
            load_fail(l, &key_mark, msg);
            goto fail;
        }
        int r = json_object_set_new(c, key, val);
        free(key);
        if (r < 0) {
            load_fail(l, &key_mark, "invalid mapping key");
            goto fail;
        }
    }
fail:
    json_decref(c);
    return NULL;
}

/* Builds the value that starts with *ev (a node event, which the caller deletes). */
static json_t *load_node(loader *l, yaml_event_t *ev, int depth)
{
    json_t *v = NULL;
    const yaml_char_t *anchor = NULL;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        v = load_scalar(l, ev);
        anchor = ev->data.scalar.anchor;
        break;
    case YAML_SEQUENCE_START_EVENT:
        v = load_collection(l, ev, depth);
        anchor = ev->data.sequence_start.anchor;
        break;
    case YAML_MAPPING_START_EVENT:
        v = load_collection(l, ev, depth);
        anchor = ev->data.mapping_start.anchor;
        break;
    case YAML_ALIAS_EVENT: {
        json_t *a = json_object_get(l->anchors, (const char *)ev->data.alias.anchor);
        if (!a) {
            load_fail(l, &ev->start_mark, "unknown anchor");
            return NULL;
        }
        size_t n = count_nodes(a, l->alias_budget);
        if (n > l->alias_budget) {
            load_fail(l, &ev->start_mark, "too many nodes through aliases");
            return NULL;
        }
        l->alias_budget -= n;
        v = json_deep_copy(a);
        if (!v) {
            asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
            l->failed = 1;
        }
        return v;
    }
    default:
        load_fail(l, &ev->start_mark, "unexpected event");
        return NULL;
    }
    if (v && anchor) {
        /* A copy, so the document's value can be changed without touching later aliases. */
        json_t *copy = json_deep_copy(v);
        if (!copy || json_object_set_new(l->anchors, (const char *)anchor, copy) < 0) {
            json_decref(v);
            asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
            l->failed = 1;
            return NULL;
        }
    }
    return v;
}

/* Appends a document's objects to out (a List's items, or the object). Returns 0 or -1. */
static int add_document(json_t *out, json_t *doc, size_t index)
{
    if (json_is_null(doc))
        return 0;
    if (!json_is_object(doc))
        return asbi_error_set(ASB_EMANIFEST, 0, NULL,
                              "document %zu: expected an object (a mapping), got %s", index + 1,
                              json_is_array(doc)    ? "a list"
                              : json_is_string(doc) ? "a string"
                                                    : "a scalar"),
               -1;
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    json_t *items = json_object_get(doc, "items");
    size_t kl = kind ? strlen(kind) : 0;
    if (kl >= 4 && strcmp(kind + kl - 4, "List") == 0 && json_is_array(items)) {
        for (size_t i = 0; i < json_array_size(items); i++) {
            json_t *it = json_array_get(items, i);
            if (!json_is_object(it))
                return asbi_error_set(ASB_EMANIFEST, 0, NULL,
                                      "document %zu: items[%zu] is not an object", index + 1, i),
                       -1;
            if (json_array_append(out, it) < 0)
                return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory"), -1;
        }
        return 0;
    }
    if (json_array_append(out, doc) < 0)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory"), -1;
    return 0;
}

static json_t *load_json_stream(const char *data, size_t len, bool *not_json)
{
    json_t *out = json_array();
    size_t off = 0, index = 0;
    *not_json = false;
    if (!out)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory"), NULL;
    for (;;) {
        while (off < len && strchr(" \t\r\n", data[off]))
            off++;
        if (off >= len || data[off] == '\0')
            return out;
        json_error_t err;
        json_t *doc =
            json_loadb(data + off, len - off, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &err);
        if (!doc) {
            *not_json = true;
            asbi_error_set(ASB_EMANIFEST, 0, NULL, "json: line %d column %d: %s", err.line,
                           err.column, err.text);
            json_decref(out);
            return NULL;
        }
        int r = add_document(out, doc, index++);
        json_decref(doc);
        if (r < 0) {
            json_decref(out);
            return NULL;
        }
        if (err.position <= 0)
            return out;
        off += (size_t)err.position;
    }
}

static json_t *load_yaml_stream(const char *data, size_t len)
{
    if (asbi_yaml_load() != ASB_OK)
        return NULL;
    loader l = {.alias_budget = MAX_ALIAS_NODES};
    json_t *out = json_array();
    l.anchors = json_object();
    if (!out || !l.anchors || !yaml_parser_initialize(&l.parser)) {
        json_decref(out);
        json_decref(l.anchors);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory"), NULL;
    }
    yaml_parser_set_input_string(&l.parser, (const unsigned char *)data, len);
    size_t index = 0;
    for (;;) {
        yaml_event_t ev;
        if (next_event(&l, &ev) < 0)
            goto fail;
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        if (t == YAML_DOCUMENT_START_EVENT) {
            yaml_event_delete(&ev);
            json_object_clear(l.anchors); /* anchors do not cross documents */
            continue;
        }
        json_t *doc = load_node(&l, &ev, 0);
        yaml_event_delete(&ev);
        if (!doc)
            goto fail;
        int r = add_document(out, doc, index++);
        json_decref(doc);
        if (r < 0)
            goto fail;
    }
    yaml_parser_delete(&l.parser);
    json_decref(l.anchors);
    return out;
fail:
    yaml_parser_delete(&l.parser);
    json_decref(l.anchors);
    json_decref(out);
    return NULL;
}

json_t *asbi_manifest_load(const char *data, size_t len)
{
    size_t i = 0;
    while (i < len && strchr(" \t\r\n", data[i]) && data[i])
        i++;
    if (i < len && (data[i] == '{' || data[i] == '[')) {
        bool not_json;
        json_t *r = load_json_stream(data, len, &not_json);
        if (r || !not_json)
            return r;
        /* Not JSON: maybe YAML flow style. Keep the JSON error if YAML fails too. */
        const asb_error *e = asb_error_last();
        char *json_msg = e ? strdup(e->message) : NULL;
        r = load_yaml_stream(data, len);
        if (!r && json_msg)
            asbi_error_set(ASB_EMANIFEST, 0, NULL, "%s", json_msg);
        free(json_msg);
        return r;
    }
    return load_yaml_stream(data, len);
}

ASB_PUBLIC int asb_manifest_parse(char **out, const char *data, size_t len)
{
    if (!out || (!data && len))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_manifest_parse: NULL argument");
    json_t *arr = asbi_manifest_load(data ? data : "", len);
    if (!arr)
        return asb_error_last() ? asb_error_last()->code : ASB_ERROR;
    char *s = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    if (!s)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    *out = s;
    return ASB_OK;
}

/* ---- JSON -> YAML ---- */

/* libyaml's output handler: appends to a buf (0 tells the emitter the write failed, which only
 * an allocation can). */
static int yaml_write_buf(void *data, unsigned char *bytes, size_t size)
{
    return buf_append(data, bytes, size) == 0;
}

/* Strings that a YAML reader (1.2 core, or 1.1 like go-yaml v2) would take for another type. */
static bool needs_quotes(const char *s, size_t n)
{
    static const char *const yaml11[] = {"y",  "Y",  "yes", "Yes", "YES", "n",   "N",   "no",
                                         "No", "NO", "on",  "On",  "ON",  "off", "Off", "OFF"};
    bool nonfinite;
    json_t *v = resolve_plain(s, n, &nonfinite);
    bool str = json_is_string(v);
    json_decref(v);
    if (!str)
        return true;
    for (size_t i = 0; i < sizeof(yaml11) / sizeof(yaml11[0]); i++)
        if (strcmp(s, yaml11[i]) == 0)
            return true;
    /* YAML 1.1 timestamps (2006-01-02...), which go-yaml also quotes. */
    return n >= 8 && all_in(s, 4, "0123456789") && s[4] == '-' && s[5] >= '0' && s[5] <= '9';
}

static int emit_scalar(yaml_emitter_t *e, const char *s, size_t n, yaml_scalar_style_t style)
{
    yaml_event_t ev;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, 1, 1, style))
        return -EIO; /* the emitter's error says why */
    return yaml_emitter_emit(e, &ev) ? 0 : -EIO;
}

static int emit_string(yaml_emitter_t *e, const char *s, size_t n)
{
    yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;
    if (needs_quotes(s, n))
        style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    else if (memchr(s, '\n', n))
        style = YAML_LITERAL_SCALAR_STYLE;
    return emit_scalar(e, s, n, style);
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int emit_value(yaml_emitter_t *e, const json_t *v)
{
    yaml_event_t ev;
    char num[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        size_t n = json_object_size(v), i = 0;
        const char **keys = calloc(n ? n : 1, sizeof(*keys));
        if (!keys)
            return -ENOMEM;
        const char *k;
        json_t *c;
        json_object_foreach ((json_t *)v, k, c)
            keys[i++] = k;
        qsort(keys, n, sizeof(*keys), cmp_keys);
        int r = yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) &&
                        yaml_emitter_emit(e, &ev)
                    ? 0
                    : -EIO;
        for (i = 0; i < n && r == 0; i++) {
            r = emit_string(e, keys[i], strlen(keys[i]));
            if (r == 0)
                r = emit_value(e, json_object_get(v, keys[i]));
        }
        free(keys);
        if (r < 0 || !yaml_mapping_end_event_initialize(&ev) || !yaml_emitter_emit(e, &ev))
            return -EIO;
        return 0;
    }
    case JSON_ARRAY:
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(e, &ev))
            return -EIO;
        for (size_t i = 0; i < json_array_size(v); i++)
            if (emit_value(e, json_array_get(v, i)) < 0)
                return -EIO;
        if (!yaml_sequence_end_event_initialize(&ev) || !yaml_emitter_emit(e, &ev))
            return -EIO;
        return 0;
    case JSON_STRING:
        return emit_string(e, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return emit_scalar(e, num, strlen(num), YAML_PLAIN_SCALAR_STYLE);
    case JSON_REAL: {
        char *s = json_dumps(v, JSON_ENCODE_ANY);
        if (!s)
            return -ENOMEM;
        int r = emit_scalar(e, s, strlen(s), YAML_PLAIN_SCALAR_STYLE);
        free(s);
        return r;
    }
    case JSON_TRUE:
        return emit_scalar(e, "true", 4, YAML_PLAIN_SCALAR_STYLE);
    case JSON_FALSE:
        return emit_scalar(e, "false", 5, YAML_PLAIN_SCALAR_STYLE);
    default:
        return emit_scalar(e, "null", 4, YAML_PLAIN_SCALAR_STYLE);
    }
}

char *asbi_yaml_dump(const json_t *v)
{
    yaml_emitter_t e;
    yaml_event_t ev;
    _cleanup_buf_ buf b = BUF_INIT;
    if (asbi_yaml_load() != ASB_OK)
        return NULL;
    if (!yaml_emitter_initialize(&e))
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory"), NULL;
    yaml_emitter_set_output(&e, yaml_write_buf, &b);
    yaml_emitter_set_unicode(&e, 1);
    yaml_emitter_set_width(&e, -1);
    yaml_emitter_set_indent(&e, 2);
    int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
             yaml_emitter_emit(&e, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
             yaml_emitter_emit(&e, &ev) && emit_value(&e, v) == 0 &&
             yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&e, &ev) &&
             yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&e, &ev) &&
             yaml_emitter_flush(&e);
    bool emitter_error = !ok && e.error != YAML_MEMORY_ERROR && e.error != YAML_WRITER_ERROR;
    const char *problem = e.problem;
    char *out = NULL;
    if (!ok) {
        if (emitter_error)
            asbi_error_set(ASB_EINVAL, 0, NULL, "yaml: %s", problem ? problem : "emitter error");
        else
            asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    } else if (!(out = buf_steal(&b, NULL))) {
        asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    yaml_emitter_delete(&e);
    return out;
}

ASB_PUBLIC int asb_manifest_to_yaml(char **out, const char *json)
{
    if (!out || !json)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_manifest_to_yaml: NULL argument");
    json_error_t err;
    json_t *v = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!v)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "json: line %d column %d: %s", err.line,
                              err.column, err.text);
    char *s = asbi_yaml_dump(v);
    json_decref(v);
    if (!s)
        return asb_error_last()->code;
    *out = s;
    return ASB_OK;
}
