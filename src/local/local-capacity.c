/* The machine's capacity and what goes beyond it. See local-capacity.h. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/local-bundle.h"
#include "local/local-capacity.h"
#include "local/local-limits.h"

int local_capacity_read(const char *state_dir, local_capacity *ret)
{
    struct sysinfo si;
    if (sysinfo(&si) < 0)
        return -errno;
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                              : sysconf(_SC_NPROCESSORS_ONLN);
    struct statvfs fs;
    if (statvfs(state_dir, &fs) < 0)
        return -errno;
    *ret = (local_capacity){
        .memory = (int64_t)si.totalram * (int64_t)si.mem_unit,
        .cpu_millis = (int64_t)(cpus > 0 ? cpus : 1) * 1000,
        .ephemeral = (int64_t)fs.f_blocks * (int64_t)fs.f_frsize,
    };
    return 0;
}

size_t local_capacity_excess_of(const local_capacity *cap, const json_t *ctr, const char *section,
                                local_capacity_excess ret[3])
{
    const struct {
        const char *name;
        bool millis;
        int64_t have;
    } res[] = {
        {"memory", false, cap->memory},
        {"cpu", true, cap->cpu_millis},
        {"ephemeral-storage", false, cap->ephemeral},
    };
    const json_t *values = json_object_get(json_object_get(ctr, "resources"), section);
    size_t n = 0;
    for (size_t i = 0; i < ELEMENTSOF(res); i++) {
        const json_t *v = json_object_get(values, res[i].name);
        char buf[64];
        const char *s = json_string_value(v);
        if (json_is_integer(v)) {
            snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            s = buf;
        }
        int64_t want;
        if (!s || res[i].have <= 0 || local_parse_quantity(s, res[i].millis, &want) < 0 ||
            want <= res[i].have)
            continue;
        ret[n] = (local_capacity_excess){.section = section, .resource = res[i].name};
        snprintf(ret[n].value, sizeof(ret[n].value), "%s", s);
        local_limits_format(res[i].have, res[i].millis, ret[n].have, sizeof(ret[n].have));
        n++;
    }
    return n;
}

static int warn(json_t **warnings, const char *path, const local_capacity_excess *x)
{
    if (!*warnings && !(*warnings = json_array()))
        return -ENOMEM;
    _cleanup_free_ char *text = NULL;
    if (asprintf(&text, "%s.resources.%s.%s: %s is more than this machine has (%s)%s", path,
                 x->section, x->resource, x->value, x->have,
                 strcmp(x->section, "requests") == 0
                     ? ": the sandbox will not be started (Unschedulable)"
                     : "") < 0)
        return -ENOMEM;
    return json_array_append_new(*warnings, json_string(text)) == 0 ? 0 : -ENOMEM;
}

int local_capacity_warnings(const local_capacity *cap, const json_t *pod, const char *path,
                            json_t **warnings)
{
    static const char *const lists[] = {"containers", "initContainers"};
    static const char *const sections[] = {"requests", "limits"};
    for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
        size_t i;
        const json_t *c;
        json_array_foreach (json_object_get(pod, lists[l]), i, c) {
            char cpath[256];
            snprintf(cpath, sizeof(cpath), "%s.%s[%zu]", path, lists[l], i);
            for (size_t s = 0; s < ELEMENTSOF(sections); s++) {
                local_capacity_excess x[3];
                size_t n = local_capacity_excess_of(cap, c, sections[s], x);
                for (size_t j = 0; j < n; j++) {
                    int r = warn(warnings, cpath, &x[j]);
                    if (r < 0)
                        return r;
                }
            }
        }
    }
    return 0;
}
