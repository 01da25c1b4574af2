/* Validation of a whole object: metadata rules, then its kind's table (api-field.h) walked field
 * by field (structural types, required fields, enums, bounds, date-times, immutability), with the
 * core-type checks (api-validate-core.c) hooked in where a field names one. Messages follow k8s
 * field.Error; errors come in table order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api-field.h"
#include "api/api-k8s.h"
#include "api/api-spec.h"
#include "basic/macro.h"

static const json_t *get(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

static void check_field(api_errors *e, const api_field *f, const char *path, const json_t *v);

static void check_props(api_errors *e, const api_field *props, const char *path, const json_t *obj)
{
    for (const api_field *p = props; p->name; p++) {
        _cleanup_free_ char *sub = NULL;
        if (asprintf(&sub, "%s%s%s", path, *path ? "." : "", p->name) < 0) {
            e->oom = true;
            return;
        }
        const json_t *v = get(obj, p->name);
        if (v)
            check_field(e, p, sub, v);
        else if (p->required)
            api_errors_add(e, API_FIELD_REQUIRED, sub, NULL, NULL);
    }
}

static void check_integer(api_errors *e, const api_field *f, const char *path, const json_t *v)
{
    if (!api_want_type(e, path, v, JSON_INTEGER))
        return;
    json_int_t n = json_integer_value(v);
    if (f->has_minimum && n < f->minimum)
        api_errors_add(e, API_FIELD_INVALID, path, v,
                       "%s in body should be greater than or equal to %lld", path, f->minimum);
    else if (f->has_maximum && n > f->maximum)
        api_errors_add(e, API_FIELD_INVALID, path, v,
                       "%s in body should be less than or equal to %lld", path, f->maximum);
}

static void check_string(api_errors *e, const api_field *f, const char *path, const json_t *v)
{
    if (f->enum_values)
        api_check_enum(e, path, v, f->enum_values);
    else if (f->format && strcmp(f->format, "date-time") == 0)
        api_check_date_time(e, path, v);
    else if (f->required && f->min_length > 0)
        api_check_required_string(e, path, v);
    else
        api_want_type(e, path, v, JSON_STRING);
    if (!json_is_string(v) || (f->required && f->min_length > 0 && json_string_length(v) == 0))
        return;
    if (f->max_length && json_string_length(v) > f->max_length)
        api_errors_add(e, API_FIELD_TOO_LONG, path, v, "may not be more than %u bytes",
                       f->max_length);
    else if (f->pattern)
        api_check_pattern(e, path, v, f->pattern);
}

/* A present value's structure: the generic checks of its table entry (the CRD's keywords), or of
 * the schema of the Kubernetes type it holds. */
static void check_structure(api_errors *e, const api_field *f, const char *path, const json_t *v)
{
    switch (f->type) {
    case API_TYPE_STRING:
        check_string(e, f, path, v);
        break;
    case API_TYPE_INTEGER:
        check_integer(e, f, path, v);
        break;
    case API_TYPE_BOOLEAN:
        api_want_type(e, path, v, JSON_TRUE);
        break;
    case API_TYPE_OBJECT:
        if (api_want_type(e, path, v, JSON_OBJECT))
            check_props(e, f->props, path, v);
        break;
    case API_TYPE_ARRAY:
        if (api_want_type(e, path, v, JSON_ARRAY)) {
            size_t i;
            json_t *item;
            json_array_foreach (v, i, item) {
                _cleanup_free_ char *sub = NULL;
                if (asprintf(&sub, "%s[%zu]", path, i) < 0) {
                    e->oom = true;
                    return;
                }
                check_field(e, f->items, sub, item);
            }
        }
        break;
    case API_TYPE_STRING_MAP:
        api_check_string_map(e, path, v, f->label_values);
        break;
    case API_TYPE_FREE:
        if (f->k8s_type)
            api_k8s_validate(e, f->k8s_type, path, v);
        else
            api_want_type(e, path, v, JSON_OBJECT);
        break;
    }
}

/* A present value: its structure, then the field's own rules (which check the types they read,
 * so that every failing field is named at once; a fault both find is recorded once). */
static void check_field(api_errors *e, const api_field *f, const char *path, const json_t *v)
{
    check_structure(e, f, path, v);
    if (f->check && !e->oom)
        f->check(e, path, v);
}

/* The CRD's transition rules: an immutable field may not be added, removed or changed. */
static void check_immutable(api_errors *e, const api_field *spec_field, const json_t *spec,
                            const json_t *old)
{
    if (!json_is_object(spec) || !old)
        return;
    for (const api_field *p = spec_field->props; p->name; p++) {
        if (!p->immutable)
            continue;
        const json_t *a = get(old, p->name), *b = get(spec, p->name);
        if ((a == NULL) != (b == NULL) || (a && !json_equal((json_t *)a, (json_t *)b))) {
            _cleanup_free_ char *path = NULL;
            if (asprintf(&path, "spec.%s", p->name) < 0) {
                e->oom = true;
                return;
            }
            api_errors_add(e, API_FIELD_INVALID, path, b, "%s is immutable", p->name);
        }
    }
}

static void check_metadata(const api_kind *k, const json_t *obj, api_errors *e)
{
    const json_t *md = get(obj, "metadata");
    if (!md) {
        api_errors_add(e, API_FIELD_REQUIRED, "metadata.name", NULL, NULL);
        return;
    }
    if (!api_want_type(e, "metadata", md, JSON_OBJECT))
        return;
    const json_t *name = get(md, "name");
    const char *detail;
    if (!name || (json_is_string(name) && json_string_length(name) == 0))
        api_errors_add(e, API_FIELD_REQUIRED, "metadata.name", NULL,
                       "name or generateName is required");
    else if (api_want_type(e, "metadata.name", name, JSON_STRING) &&
             !api_is_dns1123_subdomain(json_string_value(name), &detail))
        api_errors_add(e, API_FIELD_INVALID, "metadata.name", name, "%s", detail);
    const json_t *ns = get(md, "namespace");
    if (ns && api_want_type(e, "metadata.namespace", ns, JSON_STRING) &&
        !api_is_dns1123_label(json_string_value(ns), &detail))
        api_errors_add(e, API_FIELD_INVALID, "metadata.namespace", ns, "%s", detail);
    if (get(md, "generateName"))
        api_want_type(e, "metadata.generateName", get(md, "generateName"), JSON_STRING);
    if (get(md, "labels"))
        api_check_string_map(e, "metadata.labels", get(md, "labels"), true);
    if (get(md, "annotations"))
        api_check_string_map(e, "metadata.annotations", get(md, "annotations"), false);
    if (get(md, "finalizers"))
        api_check_string_array(e, "metadata.finalizers", get(md, "finalizers"));
    if (get(md, "ownerReferences"))
        api_want_type(e, "metadata.ownerReferences", get(md, "ownerReferences"), JSON_ARRAY);
    (void)k;
}

/* The reason of obj's status condition `type`, or NULL. */
static const char *condition_reason(const json_t *obj, const char *type)
{
    const json_t *c;
    size_t i;
    json_array_foreach (get(get(obj, "status"), "conditions"), i, c) {
        const char *t = json_string_value(get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return json_string_value(get(c, "reason"));
    }
    return NULL;
}

/* An expired claim's sandbox is gone (or going): a new shutdownTime would not bring it back but
 * silently adopt another sandbox, files and all lost. Say so instead. */
static void check_expired_claim(const api_kind *k, const json_t *obj, const json_t *old,
                                api_errors *e)
{
    const char *reason = old ? condition_reason(old, "Ready") : NULL;
    if (strcmp(k->kind, "SandboxClaim") != 0 || !reason || strcmp(reason, "ClaimExpired") != 0)
        return;
    const json_t *was = get(get(old, "spec"), "lifecycle"), *now = get(get(obj, "spec"), "lifecycle");
    if (json_equal(was, now) || (!was && !now))
        return;
    api_errors_add(e, API_FIELD_FORBIDDEN, "spec.lifecycle", NULL,
                   "the claim has expired (Ready=False, ClaimExpired) and its sandbox is gone "
                   "with its files: extending it cannot bring them back; create a new claim");
}

void api_validate(const api_kind *k, const json_t *obj, const json_t *old, api_errors *e)
{
    if (!json_is_object(obj)) {
        api_errors_add(e, API_FIELD_TYPE, "<root>", NULL, "must be an object");
        return;
    }
    if (api_json_deeper_than(obj, API_MAX_DEPTH)) {
        api_errors_add(e, API_FIELD_FORBIDDEN, "<root>", NULL,
                       "objects and arrays nested deeper than %d levels", API_MAX_DEPTH);
        return;
    }
    check_metadata(k, obj, e);
    const json_t *spec = get(obj, "spec");
    if (!spec)
        api_errors_add(e, API_FIELD_REQUIRED, "spec", NULL, NULL);
    else
        check_field(e, k->spec, "spec", spec);
    check_immutable(e, k->spec, spec, old ? get(old, "spec") : NULL);
    check_expired_claim(k, obj, old, e);
    if (strcmp(k->kind, "Sandbox") == 0)
        api_check_sandbox_mounts(e, spec);
    const json_t *st = get(obj, "status");
    if (st && !json_is_null(st))
        api_want_type(e, "status", st, JSON_OBJECT);
}
