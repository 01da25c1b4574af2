/* SandboxWarmPool replenishment (§2.7). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-objects.h"
#include "api/api.h"
#include "reconcile/reconcile-internal.h"

bool reconcile_pool_member(const json_t *pool, const json_t *sandbox)
{
    char h[9];
    reconcile_name_hash(api_meta_string(pool, "name"), h);
    const char *l = rc_label(sandbox, RECONCILE_LABEL_WARM_POOL);
    const char *pns = api_meta_string(pool, "namespace"),
               *sns = api_meta_string(sandbox, "namespace");
    return l && strcmp(l, h) == 0 && pns && sns && strcmp(pns, sns) == 0;
}

static int set_str(json_t *o, const char *k, const char *v)
{
    return o && json_object_set_new(o, k, json_string(v)) == 0 ? 0 : -ENOMEM;
}

json_t *reconcile_pool_new_sandbox(const json_t *pool, const json_t *template,
                                   bool no_eviction_annotation)
{
    const char *pname = api_meta_string(pool, "name"), *ns = api_meta_string(pool, "namespace");
    const char *tname = api_meta_string(template, "name");
    char ph[9], th[9], bh[9], pth[9], gen[300];
    reconcile_name_hash(pname, ph);
    reconcile_name_hash(tname, th);
    reconcile_pod_template_hash(template, pth);
    snprintf(gen, sizeof(gen), "%s-", pname ? pname : "pool");
    /* The blueprint is the new spec: hashed as built (reconcile_blueprint_hash), one copy. */
    json_t *spec = reconcile_template_blueprint(template);
    rc_hash_json(spec, bh);
    json_t *sb = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:[o], s:{s:s, s:s, s:s, s:s, s:s, s:s}, "
        "s:{s:s}}, s:o}",
        "apiVersion", API_GROUP_CORE "/" API_VERSION, "kind", "Sandbox", "metadata", "generateName",
        gen, "namespace", ns ? ns : "default", "ownerReferences", reconcile_owner_ref(pool),
        "labels", RECONCILE_LABEL_WARM_POOL, ph, RECONCILE_LABEL_TEMPLATE_REF_HASH, th,
        RECONCILE_LABEL_LAUNCH_TYPE, "warm", RECONCILE_LABEL_POD_TEMPLATE_HASH, pth,
        RECONCILE_LABEL_TEMPLATE_HASH, bh, RECONCILE_LABEL_CREATED_BY, "controller", "annotations",
        RECONCILE_ANN_TEMPLATE_REF, tname ? tname : "", "spec", spec);
    if (!sb)
        return NULL;
    json_t *pt = rc_object(json_object_get(sb, "spec"), API_POD_TEMPLATE);
    json_t *pmd = rc_object(pt, "metadata");
    json_t *pl = rc_object(pmd, "labels");
    json_t *pspec = rc_object(pt, "spec");
    if (set_str(pl, RECONCILE_LABEL_WARM_POOL, ph) < 0 ||
        set_str(pl, RECONCILE_LABEL_TEMPLATE_REF_HASH, th) < 0 ||
        set_str(pl, RECONCILE_LABEL_POD_TEMPLATE_HASH, pth) < 0 ||
        set_str(pl, RECONCILE_LABEL_TEMPLATE_HASH, bh) < 0 || !pspec) {
        json_decref(sb);
        return NULL;
    }
    if (!no_eviction_annotation) {
        json_t *pa = rc_object(pmd, "annotations");
        if (!pa || (!json_object_get(pa, RECONCILE_ANN_SAFE_TO_EVICT) &&
                    set_str(pa, RECONCILE_ANN_SAFE_TO_EVICT, "true") < 0)) {
            json_decref(sb);
            return NULL;
        }
    }
    reconcile_apply_secure_defaults(template, pspec);
    return sb;
}

void reconcile_pool_out_done(reconcile_pool_out *out)
{
    json_decref(out->create);
    json_decref(out->remove);
    json_decref(out->patches);
    json_decref(out->status);
    *out = (reconcile_pool_out){0};
}

static bool unschedulable(const json_t *sb)
{
    const json_t *c = reconcile_condition(sb, "PodScheduled");
    const char *s = json_string_value(json_object_get(c, "status"));
    const char *r = json_string_value(json_object_get(c, "reason"));
    return s && r && strcmp(s, "False") == 0 && strcmp(r, "Unschedulable") == 0;
}

/* Scale-down order: not-Ready first, then newest first. */
static int cmp_victim(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    bool rx = reconcile_sandbox_ready(x), ry = reconcile_sandbox_ready(y);
    if (rx != ry)
        return rx ? 1 : -1;
    return rc_cmp_age(y, x);
}

static int add_patch(json_t *patches, const json_t *member, json_t *patch)
{
    if (!patch)
        return -ENOMEM;
    return json_array_append_new(patches,
                                 json_pack("{s:O, s:o}", "object", member, "patch", patch)) < 0
               ? -ENOMEM
               : 0;
}

/* Member classification: adds removals/patches, returns 1 when the member is active. */
static int classify(const reconcile_pool_in *in, const reconcile_template_hashes *th,
                    const json_t *sb, reconcile_pool_out *out, size_t *terminating, bool recreate,
                    int64_t grace)
{
    if (reconcile_deleting(sb)) {
        (*terminating)++;
        return 0;
    }
    const json_t *ctrl = reconcile_controller_ref(sb);
    if (ctrl && !reconcile_controlled_by(sb, in->pool))
        return 0; /* another controller's (e.g. a claim's) */
    bool orphan = !ctrl;
    bool stale = false;
    if (in->template) {
        const char *ref = rc_label(sb, RECONCILE_LABEL_TEMPLATE_REF_HASH);
        stale = orphan ? (!ref || strcmp(ref, th->ref) != 0 ||
                          !rc_semantically_equal(sb, in->template))
                       : reconcile_sandbox_stale_hashed(sb, in->template, th);
    }
    if (stale && (orphan || recreate)) {
        (*terminating)++;
        return json_array_append(out->remove, (json_t *)sb) < 0 ? -ENOMEM : 0;
    }
    const char *lt = rc_label(sb, RECONCILE_LABEL_LAUNCH_TYPE);
    if (orphan) {
        json_t *p =
            json_pack("{s:{s:[o], s:{s:s}}}", "metadata", "ownerReferences",
                      reconcile_owner_ref(in->pool), "labels", RECONCILE_LABEL_LAUNCH_TYPE, "warm");
        if (add_patch(out->patches, sb, p) < 0)
            return -ENOMEM;
    } else if (!lt || strcmp(lt, "warm") != 0) {
        json_t *p =
            json_pack("{s:{s:{s:s}}}", "metadata", "labels", RECONCILE_LABEL_LAUNCH_TYPE, "warm");
        if (add_patch(out->patches, sb, p) < 0)
            return -ENOMEM;
    }
    if (!reconcile_sandbox_ready(sb) && !unschedulable(sb)) {
        int64_t age = in->now - rc_creation_time(sb);
        if (age >= grace) {
            (*terminating)++;
            return json_array_append(out->remove, (json_t *)sb) < 0 ? -ENOMEM : 0;
        }
        int64_t due = grace - age + 2 * 1000000LL;
        if (!out->requeue || due < out->requeue)
            out->requeue = due;
    }
    return 1;
}

/* The pool's Ready condition: why it is not full, in words a person can act on. New reference,
 * NULL on ENOMEM. */
static json_t *pool_ready_condition(const reconcile_pool_in *in, const api_warmpool_spec *spec,
                                    size_t ready, size_t desired)
{
    const json_t *md = json_object_get(in->pool, "metadata");
    json_int_t gen = json_integer_value(json_object_get(md, "generation"));
    const char *tname = spec->template_ref;
    char msg[512];
    if (!in->template) {
        snprintf(msg, sizeof(msg),
                 "SandboxTemplate \"%s\" not found in namespace \"%s\": the pool creates no "
                 "sandboxes until it exists",
                 tname ? tname : "", json_string_value(json_object_get(md, "namespace")) ?: "");
        return reconcile_make_condition(in->pool, "Ready", "False", "TemplateNotFound", msg, gen,
                                        in->now);
    }
    snprintf(msg, sizeof(msg), "%zu of %zu sandboxes Ready", ready, desired);
    return reconcile_make_condition(in->pool, "Ready", ready >= desired ? "True" : "False",
                                    ready >= desired ? "PoolReady" : "PoolFilling", msg, gen,
                                    in->now);
}

/* Sets status.conditions' Ready entry to cond (stolen), keeping the other conditions. */
static int set_condition(json_t *status, json_t *cond)
{
    json_t *conds = json_array();
    const json_t *c;
    size_t i;
    if (!cond || !conds) {
        json_decref(cond);
        json_decref(conds);
        return -ENOMEM;
    }
    json_array_foreach (json_object_get(status, "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if ((!t || strcmp(t, "Ready") != 0) && json_array_append(conds, (json_t *)c) < 0)
            goto oom;
    }
    if (json_array_append_new(conds, cond) < 0) {
        cond = NULL;
        goto oom;
    }
    return json_object_set_new(status, "conditions", conds) < 0 ? -ENOMEM : 0;
oom:
    json_decref(cond);
    json_decref(conds);
    return -ENOMEM;
}

int reconcile_pool(const reconcile_pool_in *in, reconcile_pool_out *out)
{
    *out = (reconcile_pool_out){0};
    api_warmpool_spec *spec = NULL; /* freed on both exits */
    const char *name = api_meta_string(in->pool, "name");
    if (!name || !api_meta_string(in->pool, "uid"))
        return -EINVAL;
    out->create = json_array();
    out->remove = json_array();
    out->patches = json_array();
    if (!out->create || !out->remove || !out->patches)
        goto oom;
    if (api_warmpool_spec_parse(in->pool, &spec) < 0)
        goto oom;
    size_t desired = spec->replicas > 0 ? (size_t)spec->replicas : 0;
    bool recreate = spec->update_strategy && strcmp(spec->update_strategy, "Recreate") == 0;
    int64_t grace = in->grace > 0 ? in->grace : RECONCILE_DEFAULT_GRACE_USEC;
    size_t max_batch = in->max_batch ? in->max_batch : RECONCILE_DEFAULT_MAX_BATCH;

    reconcile_template_hashes th = {{0}, {0}};
    if (in->template)
        reconcile_template_hashes_of(in->template, &th);
    size_t n = json_array_size(in->sandboxes), n_active = 0, terminating = 0, ready = 0;
    const json_t **active = calloc(n ? n : 1, sizeof(*active));
    if (!active)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        const json_t *sb = json_array_get(in->sandboxes, i);
        if (!reconcile_pool_member(in->pool, sb))
            continue;
        int k = classify(in, &th, sb, out, &terminating, recreate, grace);
        if (k < 0) {
            free(active);
            goto oom;
        }
        if (k > 0) {
            active[n_active++] = sb;
            ready += reconcile_sandbox_ready(sb);
        }
    }
    if (!in->expectations_pending) {
        if (in->template && n_active + terminating < desired) {
            size_t want = in->hold_creates ? 0 : desired - n_active - terminating;
            if (want > max_batch)
                want = max_batch;
            for (size_t i = 0; i < want; i++) {
                json_t *sb =
                    reconcile_pool_new_sandbox(in->pool, in->template, in->no_eviction_annotation);
                if (!sb || json_array_append_new(out->create, sb) < 0) {
                    free(active);
                    goto oom;
                }
            }
        } else if (n_active > desired) {
            qsort(active, n_active, sizeof(*active), cmp_victim);
            size_t drop = n_active - desired;
            if (drop > max_batch)
                drop = max_batch;
            for (size_t i = 0; i < drop; i++)
                if (json_array_append(out->remove, (json_t *)active[i]) < 0) {
                    free(active);
                    goto oom;
                }
        }
    }
    free(active);
    char ph[9], sel[80];
    reconcile_name_hash(name, ph);
    snprintf(sel, sizeof(sel), RECONCILE_LABEL_WARM_POOL "=%s", ph);
    const json_t *old = json_object_get(in->pool, "status");
    out->status = json_is_object(old) ? json_deep_copy(old) : json_object();
    if (!out->status ||
        json_object_set_new(out->status, "replicas", json_integer((json_int_t)n_active)) < 0 ||
        json_object_set_new(out->status, "readyReplicas", json_integer((json_int_t)ready)) < 0 ||
        json_object_set_new(out->status, "selector", json_string(sel)) < 0 ||
        json_object_set_new(out->status, "observedGeneration",
                            json_integer(json_integer_value(json_object_get(
                                json_object_get(in->pool, "metadata"), "generation")))) < 0 ||
        set_condition(out->status, pool_ready_condition(in, spec, ready, desired)) < 0)
        goto oom;
    out->status_changed = !old || !json_equal(out->status, (json_t *)old);
    api_warmpool_spec_free(spec);
    return 0;
oom:
    api_warmpool_spec_free(spec);
    reconcile_pool_out_done(out);
    return -ENOMEM;
}
