/* Effective resource limits of a local sandbox. See local-limits.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "local/local-bundle.h"
#include "local/local-limits.h"

static int parse_default(const char *flag, const char *env, const char *v, const char *builtin,
                         bool millis, int64_t *ret, char **ret_error)
{
    if (!v)
        v = builtin;
    if (strcmp(v, "none") == 0) {
        *ret = 0;
        return 0;
    }
    if (local_parse_quantity(v, millis, ret) == 0)
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

/* One limit: the container's when set (a string or a number, as YAML gives it), else def. */
static int limit_of(const json_t *limits, const char *name, bool millis, int64_t def, int64_t *ret,
                    bool *ret_defaulted, char **ret_error)
{
    json_t *v = json_object_get(limits, name);
    *ret = def;
    *ret_defaulted = def > 0;
    if (!v)
        return 0;
    char buf[64];
    const char *s = json_string_value(v);
    if (json_is_number(v)) {
        snprintf(buf, sizeof(buf), "%.17g", json_number_value(v));
        s = buf;
    }
    *ret_defaulted = false;
    if (local_parse_quantity(s, millis, ret) < 0) {
        if (asprintf(ret_error, "resources.limits.%s: cannot parse quantity", name) < 0)
            *ret_error = NULL;
        return -EINVAL;
    }
    return 0;
}

int local_limits_effective(const local_limits *d, const json_t *ctr, local_limits *ret,
                           char **ret_error)
{
    const json_t *limits = json_object_get(json_object_get(ctr, "resources"), "limits");
    local_limits l = {0};
    *ret_error = NULL;
    int k;
    if ((k = limit_of(limits, "memory", false, d->memory, &l.memory, &l.memory_defaulted,
                      ret_error)) < 0 ||
        (k = limit_of(limits, "cpu", true, d->cpu_millis, &l.cpu_millis, &l.cpu_defaulted,
                      ret_error)) < 0 ||
        (k = limit_of(limits, "ephemeral-storage", false, d->ephemeral, &l.ephemeral,
                      &l.ephemeral_defaulted, ret_error)) < 0)
        return k;
    *ret = l;
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
