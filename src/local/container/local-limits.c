/* Effective resource limits of a local sandbox. See local-limits.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "local/container/local-bundle.h"
#include "local/container/local-limits.h"

static int parse_default(const char *flag, const char *env, const char *v, const char *builtin,
                         bool millis, int64_t *ret, char **ret_error)
{
    if (!v)
        v = builtin;
    if (strcmp(v, "none") == 0) {
        *ret = 0;
        return 0;
    }
    if (api_quantity_parse(v, millis ? API_RESOURCE_CPU : API_RESOURCE_MEMORY, ret) == 0)
        return 0;
    if (asprintf(ret_error,
                 "--%s (env %s): \"%s\" is not a Kubernetes quantity (e.g. %s; 0 or none: no "
                 "default)",
                 flag, env, v, builtin) < 0)
        *ret_error = NULL;
    return -EINVAL;
}

int local_limits_parse_defaults(const char *memory, const char *cpu, const char *ephemeral,
                                local_limits *ret, char **ret_error)
{
    local_limits l = {0};
    *ret_error = NULL;
    int k;
    if ((k = parse_default("default-memory", "ASB_DEFAULT_MEMORY", memory,
                           LOCAL_LIMITS_DEFAULT_MEMORY, false, &l.memory, ret_error)) < 0 ||
        (k = parse_default("default-cpu", "ASB_DEFAULT_CPU", cpu, LOCAL_LIMITS_DEFAULT_CPU, true,
                           &l.cpu_millis, ret_error)) < 0 ||
        (k = parse_default("default-ephemeral-storage", "ASB_DEFAULT_EPHEMERAL_STORAGE", ephemeral,
                           LOCAL_LIMITS_DEFAULT_EPHEMERAL_STORAGE, false, &l.ephemeral,
                           ret_error)) < 0)
        return k;
    *ret = l;
    return 0;
}

/* The limits from one value and one "defaulted" flag per resource (api_resource order). */
static local_limits limits_of(const int64_t v[API_RESOURCE_COUNT],
                              const bool defaulted[API_RESOURCE_COUNT])
{
    return (local_limits){
        .memory = v[API_RESOURCE_MEMORY],
        .cpu_millis = v[API_RESOURCE_CPU],
        .ephemeral = v[API_RESOURCE_EPHEMERAL_STORAGE],
        .memory_defaulted = defaulted[API_RESOURCE_MEMORY],
        .cpu_defaulted = defaulted[API_RESOURCE_CPU],
        .ephemeral_defaulted = defaulted[API_RESOURCE_EPHEMERAL_STORAGE],
    };
}

void local_limits_effective(const local_limits *d, const api_container *c, local_limits *ret)
{
    const api_quantity *q = c ? c->limits.q : NULL;
    const int64_t defaults[API_RESOURCE_COUNT] = {d->memory, d->cpu_millis, d->ephemeral};
    int64_t v[API_RESOURCE_COUNT];
    bool defaulted[API_RESOURCE_COUNT];
    for (api_resource r = 0; r < API_RESOURCE_COUNT; r++) {
        bool given = q && q[r].set;
        v[r] = given ? q[r].value : defaults[r];
        defaulted[r] = !given && defaults[r] > 0;
    }
    *ret = limits_of(v, defaulted);
}

int local_limits_from_json(const json_t *resources, local_limits *ret)
{
    const json_t *limits = json_object_get(resources, "limits");
    if (!json_is_object(limits))
        return -ENOENT;
    int64_t v[API_RESOURCE_COUNT] = {0};
    bool defaulted[API_RESOURCE_COUNT] = {false};
    for (api_resource r = 0; r < API_RESOURCE_COUNT; r++) {
        const char *q = json_string_value(json_object_get(limits, api_resource_name(r)));
        if (q && api_quantity_parse(q, r, &v[r]) < 0)
            return -EINVAL;
        size_t i;
        const json_t *name;
        json_array_foreach (json_object_get(resources, "defaulted"), i, name)
            defaulted[r] |=
                json_is_string(name) && strcmp(json_string_value(name), api_resource_name(r)) == 0;
    }
    *ret = limits_of(v, defaulted);
    return 0;
}

void local_limits_format(int64_t v, bool millis, char *out, size_t n)
{
    if (millis) {
        if (v % 1000 == 0)
            snprintf(out, n, "%" PRId64, v / 1000);
        else
            snprintf(out, n, "%" PRId64 "m", v);
        return;
    }
    static const struct {
        const char *suffix;
        int64_t mult;
    } units[] = {{"Ti", INT64_C(1) << 40},
                 {"Gi", INT64_C(1) << 30},
                 {"Mi", INT64_C(1) << 20},
                 {"Ki", INT64_C(1) << 10}};
    for (size_t i = 0; i < ELEMENTSOF(units); i++)
        if (v >= units[i].mult && v % units[i].mult == 0) {
            snprintf(out, n, "%" PRId64 "%s", v / units[i].mult, units[i].suffix);
            return;
        }
    snprintf(out, n, "%" PRId64, v);
}

json_t *local_limits_to_json(const local_limits *l)
{
    const struct {
        const char *name;
        int64_t v;
        bool millis, defaulted;
    } rows[] = {
        {"memory", l->memory, false, l->memory_defaulted},
        {"cpu", l->cpu_millis, true, l->cpu_defaulted},
        {"ephemeral-storage", l->ephemeral, false, l->ephemeral_defaulted},
    };
    json_t *limits = json_object(), *defaulted = json_array(), *out = json_object();
    if (!limits || !defaulted || !out)
        goto fail;
    for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
        if (rows[i].v <= 0)
            continue;
        char q[32];
        local_limits_format(rows[i].v, rows[i].millis, q, sizeof(q));
        if (json_object_set_new(limits, rows[i].name, json_string(q)) < 0 ||
            (rows[i].defaulted && json_array_append_new(defaulted, json_string(rows[i].name)) < 0))
            goto fail;
    }
    if (json_object_set_new(out, "limits", limits) < 0) {
        limits = NULL;
        goto fail;
    }
    if (json_object_set_new(out, "defaulted", defaulted) < 0)
        defaulted = NULL;
    else
        return out;
    limits = NULL;
fail:
    json_decref(limits);
    json_decref(defaulted);
    json_decref(out);
    return NULL;
}
