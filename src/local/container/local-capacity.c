/* The machine's capacity and what goes beyond it. See local-capacity.h. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/container/local-capacity.h"
#include "local/container/local-limits.h"

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

size_t local_capacity_excess_of(const local_capacity *cap, const api_resource_list *list,
                                const char *section, local_capacity_excess ret[API_RESOURCE_COUNT])
{
    const int64_t have[API_RESOURCE_COUNT] = {cap->memory, cap->cpu_millis, cap->ephemeral};
    size_t n = 0;
    for (api_resource r = 0; r < API_RESOURCE_COUNT; r++) {
        const api_quantity *q = &list->q[r];
        if (!q->set || have[r] <= 0 || q->value <= have[r])
            continue;
        ret[n] = (local_capacity_excess){.section = section, .resource = api_resource_name(r)};
        snprintf(ret[n].value, sizeof(ret[n].value), "%s", q->text);
        local_limits_format(have[r], r == API_RESOURCE_CPU, ret[n].have, sizeof(ret[n].have));
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

static int container_warnings(const local_capacity *cap, const api_container *c, const char *path,
                              json_t **warnings)
{
    const struct {
        const char *section;
        const api_resource_list *list;
    } lists[] = {{"requests", &c->requests}, {"limits", &c->limits}};
    for (size_t s = 0; s < ELEMENTSOF(lists); s++) {
        local_capacity_excess x[API_RESOURCE_COUNT];
        size_t n = local_capacity_excess_of(cap, lists[s].list, lists[s].section, x);
        for (size_t j = 0; j < n; j++) {
            int r = warn(warnings, path, &x[j]);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

int local_capacity_warnings(const local_capacity *cap, const api_pod *pod, const char *path,
                            json_t **warnings)
{
    const struct {
        const char *name;
        const api_container *c;
        size_t n;
    } lists[] = {{"containers", pod->containers, pod->n_containers},
                 {"initContainers", pod->init_containers, pod->n_init_containers}};
    for (size_t l = 0; l < ELEMENTSOF(lists); l++)
        for (size_t i = 0; i < lists[l].n; i++) {
            char cpath[256];
            snprintf(cpath, sizeof(cpath), "%s.%s[%zu]", path, lists[l].name, i);
            int r = container_warnings(cap, &lists[l].c[i], cpath, warnings);
            if (r < 0)
                return r;
        }
    return 0;
}
