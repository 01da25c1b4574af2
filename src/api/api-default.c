/* CRD defaults from the kind tables (api-field.h), applied as kube-apiserver's structural
 * defaulting does: a field's default is set when the field is absent and its parent object is
 * present, then the fields below it (a defaulted {} gets its own fields' defaults). */
#include "api/api.h"
#include "api/api-field.h"

static void default_value(const api_field *f, json_t *v);

static void default_props(const api_field *props, json_t *obj)
{
    for (const api_field *p = props; p->name; p++) {
        json_t *v = json_object_get(obj, p->name);
        if (!v && p->default_json) {
            /* Our own JSON text: only allocation can fail, and then the default is left out. */
            json_t *d = json_loads(p->default_json, JSON_DECODE_ANY, NULL);
            if (!d || json_object_set_new(obj, p->name, d) < 0)
                continue;
            v = d;
        }
        if (v)
            default_value(p, v);
    }
}

static void default_value(const api_field *f, json_t *v)
{
    if (f->type == API_TYPE_OBJECT && f->props && json_is_object(v))
        default_props(f->props, v);
    else if (f->type == API_TYPE_ARRAY && f->items && json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach (v, i, item)
            default_value(f->items, item);
    }
}

void api_default(const api_kind *k, json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    if (json_is_object(spec))
        default_value(k->spec, spec);
}
