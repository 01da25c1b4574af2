/* Resource limits of a local sandbox, LimitRange-style: a container's resources.limits, and
 * for each of memory, cpu and ephemeral-storage it does not set, the default `asb serve` was
 * started with (--default-memory, --default-cpu, --default-ephemeral-storage; env
 * ASB_DEFAULT_MEMORY, ASB_DEFAULT_CPU, ASB_DEFAULT_EPHEMERAL_STORAGE). Pure functions: no
 * files, no logging. See docs/local-sandboxes.md "Resource limits". */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api-pod.h"

#define LOCAL_LIMITS_DEFAULT_MEMORY "1Gi"
#define LOCAL_LIMITS_DEFAULT_CPU "2"
#define LOCAL_LIMITS_DEFAULT_EPHEMERAL_STORAGE "10Gi"

typedef struct local_limits {
    int64_t memory;     /* bytes, 0 = none */
    int64_t cpu_millis; /* millicores, 0 = none */
    int64_t ephemeral;  /* bytes of ephemeral storage, 0 = none */
    /* Which of them came from the defaults (set by local_limits_effective only). */
    bool memory_defaulted, cpu_defaulted, ephemeral_defaulted;
} local_limits;

/* Parses the three defaults (NULL = the built-in LOCAL_LIMITS_DEFAULT_*; "0" or "none" = no
 * default for that resource). -EINVAL with *ret_error (owned) naming the flag and the value. */
int local_limits_parse_defaults(const char *memory, const char *cpu, const char *ephemeral,
                                local_limits *ret, char **ret_error);

/* The effective limits of a container (typed, may be NULL): each of its limits of memory, cpu
 * and ephemeral-storage when set, else the default (and then "defaulted"). */
void local_limits_effective(const local_limits *defaults, const api_container *c,
                            local_limits *ret);

/* The limits local_limits_to_json wrote (a Sandbox's status.resources), read back: what a
 * running container was given, for a restarted asb serve. 0, -ENOENT (none) or -EINVAL. */
int local_limits_from_json(const json_t *resources, local_limits *ret);

/* The limits as a new JSON object for the Sandbox status:
 * {"limits": {"memory": "1Gi", "cpu": "2", "ephemeral-storage": "10Gi"},
 *  "defaulted": ["memory", ...]} (absent resources are left out). NULL on ENOMEM. */
json_t *local_limits_to_json(const local_limits *l);

/* Formats a quantity the way Kubernetes prints canonical ones: "1Gi", "512Mi", "1500m", "2",
 * or plain bytes. millis: cpu. Writes at most n bytes of out. */
void local_limits_format(int64_t v, bool millis, char *out, size_t n);
