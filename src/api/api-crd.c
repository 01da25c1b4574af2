/* A kind's CustomResourceDefinition, produced from its table (api-field.h): the structural
 * openAPIV3Schema, subresources and printer columns that deploy/crds holds (asb-gen-crds writes
 * them, scripts/gen-crds.py expands the Kubernetes types they embed). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api.h"
#include "api/api-field.h"
#include "basic/macro.h"

/* json_object_set_new / json_array_append_new chained through r, the first failure so far: once
 * r < 0 (or v is NULL, an allocation that failed) nothing is added and v is freed. This keeps the
 * builders below one line per key with a single check at the end. */
static int set(json_t *o, const char *key, json_t *v, int r)
{
    if (r < 0) {
        json_decref(v);
        return r;
    }
    return v && json_object_set_new(o, key, v) == 0 ? 0 : -ENOMEM;
}

static int append(json_t *a, json_t *v, int r)
{
    if (r < 0) {
        json_decref(v);
        return r;
    }
    return v && json_array_append_new(a, v) == 0 ? 0 : -ENOMEM;
}

static const char *type_name(api_field_type t)
{
    switch (t) {
    case API_TYPE_STRING:
        return "string";
    case API_TYPE_INTEGER:
        return "integer";
    case API_TYPE_BOOLEAN:
        return "boolean";
    case API_TYPE_ARRAY:
        return "array";
    default:
        return "object";
    }
}

/* x-kubernetes-validations of an object: one transition rule per immutable field. Returns NULL
 * (with *r untouched) when there is none. */
static json_t *immutability_rules(const api_field *props, int *r)
{
    json_t *rules = NULL;
    for (const api_field *p = props; p->name && *r == 0; p++) {
        if (!p->immutable)
            continue;
        if (!rules && !(rules = json_array())) {
            *r = -ENOMEM;
            break;
        }
        _cleanup_free_ char *rule = NULL, *message = NULL, *field_path = NULL;
        /* Transition rules only run when both values exist: compare presence too. */
        if (asprintf(&rule,
                     "has(self.%1$s) == has(oldSelf.%1$s) && (!has(self.%1$s) || self.%1$s == "
                     "oldSelf.%1$s)",
                     p->name) < 0 ||
            asprintf(&message, "%s is immutable", p->name) < 0 ||
            asprintf(&field_path, ".%s", p->name) < 0) {
            *r = -ENOMEM;
            break;
        }
        *r = append(rules,
                    json_pack("{s:s,s:s,s:s,s:s}", "rule", rule, "message", message, "fieldPath",
                              field_path, "reason", "FieldValueInvalid"),
                    *r);
    }
    if (*r < 0) {
        json_decref(rules);
        return NULL;
    }
    return rules;
}

static json_t *schema_of(const api_field *f, bool k8s_refs);

static int add_properties(json_t *s, const api_field *props, bool k8s_refs)
{
    json_t *properties = json_object(), *required = json_array();
    int r = properties && required ? 0 : -ENOMEM;
    for (const api_field *p = props; p->name && r == 0; p++) {
        r = set(properties, p->name, schema_of(p, k8s_refs), r);
        if (p->required)
            r = append(required, json_string(p->name), r);
    }
    r = set(s, "properties", properties, r);
    if (json_array_size(required) > 0)
        r = set(s, "required", required, r);
    else
        json_decref(required);
    json_t *rules = immutability_rules(props, &r);
    if (rules)
        r = set(s, "x-kubernetes-validations", rules, r);
    return r;
}

/* The openAPIV3Schema node of one field. New reference or NULL on ENOMEM. */
static json_t *schema_of(const api_field *f, bool k8s_refs)
{
    json_t *s = json_object();
    int r = s ? 0 : -ENOMEM;
    r = set(s, "type", json_string(type_name(f->type)), r);
    if (f->format)
        r = set(s, "format", json_string(f->format), r);
    if (f->type == API_TYPE_FREE) {
        r = set(s, "x-kubernetes-preserve-unknown-fields", json_true(), r);
        if (k8s_refs && f->k8s_type)
            r = set(s, "x-asb-k8s-type", json_string(f->k8s_type), r);
    }
    if (f->description)
        r = set(s, "description", json_string(f->description), r);
    if (f->enum_values) {
        json_t *e = json_array();
        r = e ? r : -ENOMEM;
        for (size_t i = 0; e && f->enum_values[i]; i++)
            r = append(e, json_string(f->enum_values[i]), r);
        r = set(s, "enum", e, r);
    }
    if (f->default_json)
        r = set(s, "default", json_loads(f->default_json, JSON_DECODE_ANY, NULL), r);
    if (f->has_minimum)
        r = set(s, "minimum", json_integer(f->minimum), r);
    if (f->has_maximum)
        r = set(s, "maximum", json_integer(f->maximum), r);
    if (f->min_length)
        r = set(s, "minLength", json_integer(f->min_length), r);
    if (f->max_length)
        r = set(s, "maxLength", json_integer(f->max_length), r);
    if (f->pattern)
        r = set(s, "pattern", json_string(f->pattern), r);
    if (f->type == API_TYPE_OBJECT && f->props && r == 0)
        r = add_properties(s, f->props, k8s_refs);
    if (f->type == API_TYPE_ARRAY)
        r = set(s, "items", schema_of(f->items, k8s_refs), r);
    if (f->type == API_TYPE_STRING_MAP)
        r = set(s, "additionalProperties", json_pack("{s:s}", "type", "string"), r);
    if (f->list_type)
        r = set(s, "x-kubernetes-list-type", json_string(f->list_type), r);
    if (f->list_map_key)
        r = set(s, "x-kubernetes-list-map-keys", json_pack("[s]", f->list_map_key), r);
    if (r < 0) {
        json_decref(s);
        return NULL;
    }
    return s;
}

static json_t *root_schema(const api_kind *k, bool k8s_refs)
{
    json_t *s = json_pack("{s:s,s:{s:{s:s},s:{s:s},s:{s:s}},s:[s]}", "type", "object", "properties",
                          "apiVersion", "type", "string", "kind", "type", "string", "metadata",
                          "type", "object", "required", "spec");
    if (!s)
        return NULL;
    json_t *props = json_object_get(s, "properties");
    int r = set(props, "spec", schema_of(k->spec, k8s_refs), 0);
    if (k->status)
        r = set(props, "status", schema_of(k->status, k8s_refs), r);
    if (r < 0) {
        json_decref(s);
        return NULL;
    }
    return s;
}

static json_t *printer_columns(const api_kind *k)
{
    json_t *cols = json_array();
    int r = cols ? 0 : -ENOMEM;
    for (const api_column *c = k->columns; c->name && r == 0; c++) {
        if (!c->crd)
            continue;
        json_t *col =
            json_pack("{s:s,s:s,s:s}", "name", c->name, "type", c->type, "jsonPath", c->json_path);
        if (col && c->wide)
            r = set(col, "priority", json_integer(1), r);
        r = append(cols, col, r);
    }
    if (r < 0) {
        json_decref(cols);
        return NULL;
    }
    return cols;
}

static json_t *subresources(const api_kind *k)
{
    json_t *sub = json_object();
    int r = sub ? 0 : -ENOMEM;
    if (k->has_status)
        r = set(sub, "status", json_object(), r);
    if (k->has_scale)
        r = set(sub, "scale",
                json_pack("{s:s,s:s,s:s}", "specReplicasPath", ".spec.replicas",
                          "statusReplicasPath", ".status.replicas", "labelSelectorPath",
                          ".status.selector"),
                r);
    if (r < 0) {
        json_decref(sub);
        return NULL;
    }
    return sub;
}

json_t *api_crd(const api_kind *k, bool k8s_refs)
{
    _cleanup_free_ char *name = NULL;
    if (asprintf(&name, "%s.%s", k->plural, k->group) < 0)
        return NULL;
    json_t *short_names = json_array();
    int r = short_names ? 0 : -ENOMEM;
    for (size_t i = 0; i < ELEMENTSOF(k->short_names) && k->short_names[i]; i++)
        r = append(short_names, json_string(k->short_names[i]), r);
    json_t *version = json_pack("{s:s,s:b,s:b,s:{s:o*},s:o*}", "name", API_VERSION, "served", 1,
                                "storage", 1, "schema", "openAPIV3Schema", root_schema(k, k8s_refs),
                                "additionalPrinterColumns", printer_columns(k));
    json_t *sub = subresources(k);
    if (!sub)
        r = -ENOMEM;
    else if (version && json_object_size(sub) > 0)
        r = set(version, "subresources", json_incref(sub), r);
    json_decref(sub);
    if (r < 0 || !version ||
        !json_object_get(json_object_get(version, "schema"), "openAPIV3Schema") ||
        !json_object_get(version, "additionalPrinterColumns")) {
        json_decref(short_names);
        json_decref(version);
        return NULL;
    }
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:o},s:[o]}}",
                     "apiVersion", "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition",
                     "metadata", "name", name, "labels", "app.kubernetes.io/name", "agent-sandbox",
                     "spec", "group", k->group, "scope", "Namespaced", "names", "kind", k->kind,
                     "listKind", k->list_kind, "plural", k->plural, "singular", k->singular,
                     "shortNames", short_names, "versions", version);
}
