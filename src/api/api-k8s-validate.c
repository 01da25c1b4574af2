/* Validation of a value of an embedded Kubernetes type against its structural schema
 * (api-k8s-schema.c), as kube-apiserver validates a custom resource with our CRDs: every failing
 * field, worded as apiextensions-apiserver words it. */
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-k8s.h"
#include "api/api-spec.h"
#include "basic/buf.h"
#include "basic/macro.h"

/* Compiled patterns, keyed by the (static, or schema's never freed) pattern string. The schemas
 * and the kind tables hold a few; a pattern that does not compile is not checked. */
#define PATTERNS_MAX 16
static struct pattern {
    const char *source;
    regex_t re;
    bool ok;
} patterns[PATTERNS_MAX];
static size_t n_patterns;
static pthread_mutex_t patterns_lock = PTHREAD_MUTEX_INITIALIZER;

static const regex_t *compiled(const char *source)
{
    const regex_t *re = NULL;
    pthread_mutex_lock(&patterns_lock);
    size_t i;
    for (i = 0; i < n_patterns && patterns[i].source != source; i++)
        ;
    if (i == n_patterns && n_patterns < PATTERNS_MAX) {
        patterns[i].source = source;
        patterns[i].ok = regcomp(&patterns[i].re, source, REG_EXTENDED | REG_NOSUB) == 0;
        n_patterns++;
    }
    if (i < n_patterns && patterns[i].ok)
        re = &patterns[i].re;
    pthread_mutex_unlock(&patterns_lock);
    return re;
}

void api_check_pattern(api_errors *e, const char *path, const json_t *v, const char *pattern)
{
    const regex_t *re = compiled(pattern);
    if (re && json_is_string(v) && regexec(re, json_string_value(v), 0, NULL, 0) != 0)
        api_errors_add(e, API_FIELD_INVALID, path, v, "%s in body should match '%s'", path,
                       pattern);
}

static bool is_type(const char *type, const json_t *v)
{
    if (strcmp(type, "object") == 0)
        return json_is_object(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "integer") == 0) /* 1.0 is an integer to Go's JSON decoding too */
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    return true;
}

static void check_enum(api_errors *e, const char *path, const json_t *v, const json_t *values)
{
    size_t i;
    const json_t *x;
    json_array_foreach (values, i, x)
        if (json_equal((json_t *)x, (json_t *)v))
            return;
    _cleanup_buf_ buf list = BUF_INIT;
    json_array_foreach (values, i, x) {
        _cleanup_free_ char *s = json_dumps(x, JSON_ENCODE_ANY);
        if (buf_appendf(&list, "%s%s", i ? ", " : "", s ? s : "") < 0) {
            e->oom = true;
            return;
        }
    }
    api_errors_add(e, API_FIELD_UNSUPPORTED, path, v, "supported values: %s",
                   list.data ? list.data : "");
}

static void check_string(api_errors *e, const json_t *schema, const char *path, const json_t *v)
{
    const json_t *values = json_object_get(schema, "enum");
    if (values) {
        check_enum(e, path, v, values);
        return;
    }
    const char *pattern = json_string_value(json_object_get(schema, "pattern"));
    if (pattern)
        api_check_pattern(e, path, v, pattern);
    const char *format = json_string_value(json_object_get(schema, "format"));
    if (format && strcmp(format, "date-time") == 0)
        api_check_date_time(e, path, v);
}

static void validate(api_errors *e, const json_t *schema, api_path *path, const json_t *v);

static void check_object(api_errors *e, const json_t *schema, api_path *path, const json_t *v)
{
    size_t i;
    const json_t *req;
    json_array_foreach (json_object_get(schema, "required"), i, req) {
        const char *name = json_string_value(req);
        if (name && !json_object_get(v, name)) {
            size_t was = api_path_push(path, name);
            api_errors_add(e, API_FIELD_REQUIRED, path->s, NULL, NULL);
            api_path_pop(path, was);
        }
    }
    const json_t *props = json_object_get(schema, "properties");
    const json_t *additional = json_object_get(schema, "additionalProperties");
    const char *key;
    const json_t *child;
    json_object_foreach ((json_t *)v, key, child) {
        const json_t *cs = props ? json_object_get(props, key) : NULL;
        if (!cs && json_is_object(additional))
            cs = additional;
        if (!cs)
            continue; /* pruned (api_k8s_prune) before validation */
        size_t was = api_path_push(path, key);
        validate(e, cs, path, child);
        api_path_pop(path, was);
    }
}

static void validate(api_errors *e, const json_t *schema, api_path *p, const json_t *v)
{
    const char *path = p->s;
    schema = api_k8s_resolve(schema);
    if (!schema || e->oom)
        return;
    if (json_is_true(json_object_get(schema, "x-kubernetes-int-or-string"))) {
        if (json_is_string(v))
            check_string(e, schema, path, v);
        else if (!json_is_integer(v))
            api_type_error(e, path, v, "integer,string");
        return;
    }
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (!type)
        return;
    if (!is_type(type, v)) {
        api_type_error(e, path, v, type);
        return;
    }
    if (json_is_string(v)) {
        check_string(e, schema, path, v);
    } else if (json_is_object(v)) {
        check_object(e, schema, p, v);
    } else if (json_is_array(v)) {
        const json_t *items = json_object_get(schema, "items");
        size_t i;
        const json_t *item;
        json_array_foreach (v, i, item) {
            if (!items)
                break;
            size_t was = api_path_push_index(p, i);
            validate(e, items, p, item);
            api_path_pop(p, was);
        }
    }
}

void api_k8s_validate(api_errors *e, const char *type, const char *path, const json_t *v)
{
    const json_t *schema = api_k8s_type_schema(type);
    api_path p;
    api_path_init(&p, path);
    if (schema)
        validate(e, schema, &p, v);
}
