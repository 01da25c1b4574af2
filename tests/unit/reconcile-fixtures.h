/* Object builders shared by the test-reconcile-*.c unit tests (header-only, static). */
#pragma once

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "reconcile/reconcile.h"

#define SEC 1000000LL
#define T0 (1800000000LL * SEC) /* 2027-01-15T08:00:00Z */

static inline void fx_time(int64_t t, char out[40])
{
    reconcile_format_time(t, 0, out);
}

static inline json_t *fx_template(const char *name)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:{s:{s:[{s:s, s:s}]}}}}", "apiVersion",
                     "extensions.agents.x-k8s.io/v1beta1", "kind", "SandboxTemplate", "metadata",
                     "name", name, "namespace", "default", "uid", "tpl-uid", "spec", "podTemplate",
                     "spec", "containers", "name", "main", "image", "host");
}

static inline json_t *fx_pool(const char *name, int replicas, const char *strategy)
{
    json_t *p = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:i}, s:{s:{s:s}}}", "apiVersion",
                          "extensions.agents.x-k8s.io/v1beta1", "kind", "SandboxWarmPool",
                          "metadata", "name", name, "namespace", "default", "uid", "pool-uid",
                          "generation", 3, "spec", "sandboxTemplateRef", "name", "tpl");
    if (replicas >= 0)
        json_object_set_new(json_object_get(p, "spec"), "replicas", json_integer(replicas));
    if (strategy)
        json_object_set_new(json_object_get(p, "spec"), "updateStrategy",
                            json_pack("{s:s}", "type", strategy));
    return p;
}

/* A member as the pool would have made it, created at `created`, Ready or not. */
static inline json_t *fx_member(const json_t *pool, const json_t *tpl, const char *name,
                                int64_t created, bool ready)
{
    json_t *sb = reconcile_pool_new_sandbox(pool, tpl, false);
    json_t *md = json_object_get(sb, "metadata");
    char ts[40];
    fx_time(created, ts);
    json_object_set_new(md, "name", json_string(name));
    json_object_set_new(md, "uid", json_string(name));
    json_object_set_new(md, "resourceVersion", json_string("7"));
    json_object_set_new(md, "creationTimestamp", json_string(ts));
    json_object_set_new(sb, "status",
                        json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}]}", "conditions", "type", "Ready",
                                  "status", ready ? "True" : "False", "reason",
                                  ready ? "DependenciesReady" : "DependenciesNotReady", "message",
                                  ready ? "Pod is Ready" : "Pod is Running but not Ready",
                                  "lastTransitionTime", ts));
    return sb;
}

static inline json_t *fx_claim(const char *name, const char *pool, int64_t created)
{
    char ts[40];
    fx_time(created, ts);
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:i, s:s}, s:{s:{s:s}}}", "apiVersion",
                     "extensions.agents.x-k8s.io/v1beta1", "kind", "SandboxClaim", "metadata",
                     "name", name, "namespace", "default", "uid", "claim-uid", "generation", 1,
                     "creationTimestamp", ts, "spec", "warmPoolRef", "name", pool);
}

static inline bool fx_ready_network(const json_t *sb, void *ud)
{
    (void)ud;
    return reconcile_sandbox_ready(sb);
}

static inline const char *fx_label(const json_t *o, const char *k)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(o, "metadata"), "labels"), k));
}

static inline const char *fx_ready_reason(const json_t *status)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "type")), "Ready") == 0)
            return json_string_value(json_object_get(c, "reason"));
    }
    return NULL;
}
