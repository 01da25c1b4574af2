/* What this machine has for sandboxes (memory, CPUs, the state directory's filesystem), and the
 * resources a container asks for beyond it: admission warns (local-apiserver-resource.c), and a
 * Sandbox whose requests do not fit is not started (Ready=False, Unschedulable), as a scheduler
 * leaves a Pod that fits no node Pending. docs/local-sandboxes.md "Resource limits". */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api-pod.h"

typedef struct local_capacity {
    int64_t memory;     /* bytes of RAM */
    int64_t cpu_millis; /* CPUs this process may run on, in millicores */
    int64_t ephemeral;  /* bytes of the state directory's filesystem */
} local_capacity;

/* Reads the machine's capacity; the filesystem is the one holding state_dir. 0 or -errno. */
int local_capacity_read(const char *state_dir, local_capacity *ret);

/* One quantity of a container's resources beyond the machine. */
typedef struct local_capacity_excess {
    const char *section;  /* "limits" or "requests" */
    const char *resource; /* "memory", "cpu" or "ephemeral-storage" */
    char value[64];       /* as the spec wrote it */
    char have[32];        /* the machine's, formatted as a quantity ("23Gi", "2") */
} local_capacity_excess;

/* The quantities of a container's `list` (its limits or requests, named by section) beyond
 * cap, at most one per resource, in ret; returns how many. */
size_t local_capacity_excess_of(const local_capacity *cap, const api_resource_list *list,
                                const char *section, local_capacity_excess ret[API_RESOURCE_COUNT]);

/* Admission warnings for a pod (at path, e.g. "spec.podTemplate.spec"): one text per container
 * quantity beyond cap, appended to *warnings (created when NULL). 0 or -ENOMEM. */
int local_capacity_warnings(const local_capacity *cap, const api_pod *pod, const char *path,
                            json_t **warnings);
