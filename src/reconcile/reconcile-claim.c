/* SandboxClaim reconcile (§2.8): expiry, binding, warm adoption, cold creation, status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-objects.h"
#include "api/api.h"
#include "basic/macro.h"
#include "reconcile/reconcile-internal.h"
#include "shared/claim-reasons.h"

#define CLAIM_EXPIRED_MARK_USEC 1000LL
#define NOT_FOUND_REQUEUE_USEC (60LL * 1000000)
#define PENDING_NETWORK_REQUEUE_USEC (500LL * 1000)

typedef struct claim_ctx {
    const reconcile_claim_in *in;
    reconcile_claim_out *out;
    const char *name, *ns, *uid;
    json_int_t generation;
    json_t *status; /* being built: copy of the stored status */
} claim_ctx;

bool reconcile_claim_reason_terminal(const char *reason)
{
    return claim_reason_terminal(reason);
}

void reconcile_claim_out_done(reconcile_claim_out *out)
{
    json_decref(out->sandbox);
    json_decref(out->sandbox_patch);
    json_decref(out->claim_patch);
    json_decref(out->status);
    free(out->message);
    *out = (reconcile_claim_out){0};
}

static const json_t *find_sandbox(const claim_ctx *c, const char *name)
{
    size_t i;
    json_t *sb;
    if (!name)
        return NULL;
    json_array_foreach (c->in->sandboxes, i, sb) {
        const char *n = api_meta_string(sb, "name"), *ns = api_meta_string(sb, "namespace");
        if (n && ns && strcmp(n, name) == 0 && strcmp(ns, c->ns) == 0)
            return sb;
    }
    return NULL;
}

/* Adds key=value (NULL: removal) to the claim's annotation patch. */
static void claim_annotate(claim_ctx *c, const char *key, const char *value)
{
    if (!c->out->claim_patch)
        c->out->claim_patch = json_object();
    json_t *md = rc_object(c->out->claim_patch, "metadata");
    json_t *ann = rc_object(md, "annotations");
    if (ann)
        json_object_set_new(ann, key, value ? json_string(value) : json_null());
}

static void set_requeue(claim_ctx *c, int64_t after)
{
    if (after > 0 && (!c->out->requeue || after < c->out->requeue))
        c->out->requeue = after;
}

/* Replaces the Ready condition (and with `finished`, the mirrored Finished condition). */
static void set_conditions(claim_ctx *c, json_t *ready, const json_t *finished, bool keep_finished)
{
    json_t *conds = json_array();
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(c->status, "conditions"), i, x) {
        const char *t = json_string_value(json_object_get(x, "type"));
        if (!t || strcmp(t, "Ready") == 0)
            continue;
        if (strcmp(t, "Finished") == 0 && !keep_finished)
            continue;
        json_array_append(conds, x);
    }
    if (finished && !keep_finished)
        json_array_append(conds, (json_t *)finished);
    json_array_append_new(conds, ready);
    json_object_set_new(c->status, "conditions", conds);
}

static void set_ready(claim_ctx *c, const char *status, const char *reason, const char *message)
{
    set_conditions(c,
                   reconcile_make_condition(c->in->claim, "Ready", status, reason, message,
                                            c->generation, c->in->now),
                   NULL, true);
}

static void set_error(claim_ctx *c, const char *reason, const char *message)
{
    set_ready(c, "False", reason, message);
    free(c->out->message);
    c->out->message = message ? strdup(message) : NULL;
}

/* Ready=False with f's reason and message ("out of memory" when it has none); clears f. */
static void set_failure(claim_ctx *c, reconcile_failure *f)
{
    _cleanup_free_ char *msg = reconcile_failure_message(f);
    set_error(c, f->reason, msg ? msg : "out of memory");
    reconcile_failure_clear(f);
}

static void set_sandbox_ref(claim_ctx *c, const json_t *sb)
{
    if (!sb) {
        json_object_del(c->status, "sandbox");
        return;
    }
    json_t *ref = json_pack("{s:s}", "name", api_meta_string(sb, "name"));
    const char *uid = api_meta_string(sb, "uid");
    if (uid)
        json_object_set_new(ref, "uid", json_string(uid));
    json_t *ips = json_object_get(json_object_get(sb, "status"), "podIPs");
    if (json_array_size(ips) > 0)
        json_object_set(ref, "podIPs", ips);
    json_object_set_new(c->status, "sandbox", ref);
}

/* The claim's status while bound to sb (sb as it is, or as it will be after adoption). */
static void status_from_sandbox(claim_ctx *c, const json_t *sb)
{
    set_sandbox_ref(c, sb);
    const json_t *fin = reconcile_condition(sb, "Finished");
    const json_t *ready = reconcile_condition(sb, "Ready");
    const char *reason = json_string_value(json_object_get(ready, "reason"));
    json_t *cond;
    if (reason && strcmp(reason, "SandboxExpired") == 0)
        cond = reconcile_make_condition(
            c->in->claim, "Ready", "False", "SandboxExpired",
            "Underlying Sandbox resource has expired independently of the Claim.", c->generation,
            c->in->now);
    else if (ready) {
        cond = json_deep_copy(ready);
        json_object_set_new(cond, "observedGeneration", json_integer(c->generation));
    } else
        cond = reconcile_make_condition(c->in->claim, "Ready", "False", "SandboxNotReady",
                                        "Sandbox is not ready", c->generation, c->in->now);
    /* Finished is mirrored verbatim, removed when the sandbox has none. */
    json_t *conds = json_array();
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(c->status, "conditions"), i, x) {
        const char *t = json_string_value(json_object_get(x, "type"));
        if (t && strcmp(t, "Ready") != 0 && strcmp(t, "Finished") != 0)
            json_array_append(conds, x);
    }
    if (fin)
        json_array_append(conds, (json_t *)fin);
    json_array_append_new(conds, cond);
    json_object_set_new(c->status, "conditions", conds);
}

/* Merge patch turning map cur into want (removed keys -> null); NULL when equal. */
static json_t *map_patch(const json_t *cur, const json_t *want)
{
    json_t *p = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)cur, k, v) {
        if (!json_object_get(want, k))
            json_object_set_new(p, k, json_null());
    }
    json_object_foreach ((json_t *)want, k, v) {
        json_t *o = json_object_get(cur, k);
        if (!o || !json_equal(o, v))
            json_object_set(p, k, v);
    }
    if (json_object_size(p) == 0) {
        json_decref(p);
        return NULL;
    }
    return p;
}

/* Adds spec.podTemplate.metadata changes (→ pod metadata for this claim) to patch. 0, or
 * -EINVAL with the claim's status set (metadata override conflict). */
/* Ready=False/ReconcilerError "Error seen: ..." for a pod metadata conflict (err without a
 * message: out of memory); clears err. */
static void set_metadata_error(claim_ctx *c, api_error *err)
{
    reconcile_failure f = {.reason = "ReconcilerError", .seen = true, .error = *err};
    if (!f.error.message)
        reconcile_fail(&f, f.reason, true, -ENOMEM, "out of memory");
    set_failure(c, &f);
    *err = (api_error)API_ERROR_INIT;
}

static int pod_metadata_patch(claim_ctx *c, const json_t *sb, json_t *patch)
{
    if (!c->in->template)
        return 0;
    api_error err = API_ERROR_INIT;
    json_t *want = NULL;
    if (rc_claim_pod_metadata(c->in->template, c->in->claim, &want, &err) < 0) {
        set_metadata_error(c, &err);
        return -EINVAL;
    }
    const json_t *cur = json_object_get(api_pod_template_of(sb), "metadata");
    json_t *lp = map_patch(json_object_get(cur, "labels"), json_object_get(want, "labels"));
    json_t *wa = json_object_get(want, "annotations");
    json_t *empty = json_object();
    json_t *ap = map_patch(json_object_get(cur, "annotations"), wa ? wa : empty);
    json_decref(empty);
    if (lp || ap) {
        json_t *md = rc_object(rc_object(rc_object(patch, "spec"), API_POD_TEMPLATE), "metadata");
        if (lp)
            json_object_set_new(md, "labels", lp);
        if (ap)
            json_object_set_new(md, "annotations", ap);
    }
    json_decref(want);
    return 0;
}

static bool networked(const claim_ctx *c, const json_t *sb)
{
    if (c->in->networked)
        return c->in->networked(sb, c->in->userdata);
    return json_array_size(json_object_get(json_object_get(sb, "status"), "podIPs")) > 0;
}

/* A pool member this claim may adopt (§2.8 4f, candidate checks). */
static bool adoptable(const claim_ctx *c, const json_t *sb)
{
    if (!c->in->pool || !reconcile_pool_member(c->in->pool, sb) || reconcile_deleting(sb) ||
        !rc_label(sb, RECONCILE_LABEL_TEMPLATE_REF_HASH) ||
        !reconcile_controlled_by(sb, c->in->pool))
        return false;
    const char *st = json_string_value(json_object_get(
        json_object_get(json_object_get(c->in->pool, "spec"), "updateStrategy"), "type"));
    if (st && strcmp(st, "Recreate") == 0 && c->in->template &&
        reconcile_sandbox_stale(sb, c->in->template))
        return false;
    return true;
}

/* The whole adoption: sandbox patch, claim annotation, status as adopted. */
static int adopt(claim_ctx *c, const json_t *sb)
{
    const char *sname = api_meta_string(sb, "name");
    json_t *patch = json_pack(
        "{s:{s:{s:n, s:n, s:n, s:s, s:s}, s:[o], s:{s:s}}}", "metadata", "labels",
        RECONCILE_LABEL_WARM_POOL, RECONCILE_LABEL_POD_TEMPLATE_HASH, RECONCILE_LABEL_TEMPLATE_HASH,
        RECONCILE_LABEL_LAUNCH_TYPE, "warm", RECONCILE_LABEL_CLAIM_UID, c->uid, "ownerReferences",
        reconcile_owner_ref(c->in->claim), "annotations", RECONCILE_ANN_POD_NAME, sname);
    if (!patch)
        return -ENOMEM;
    json_t *md = json_object_get(patch, "metadata");
    const char *cb = rc_label(c->in->claim, RECONCILE_LABEL_CREATED_BY);
    json_object_set_new(json_object_get(md, "labels"), RECONCILE_LABEL_CREATED_BY,
                        cb ? json_string(cb) : json_null());
    const char *trace = rc_annotation(c->in->claim, RECONCILE_ANN_TRACE);
    if (trace)
        json_object_set_new(json_object_get(md, "annotations"), RECONCILE_ANN_TRACE,
                            json_string(trace));
    if (pod_metadata_patch(c, sb, patch) < 0) {
        json_decref(patch);
        return 0; /* status says why */
    }
    c->out->action = RECONCILE_CLAIM_ADOPT;
    c->out->target = sb;
    c->out->sandbox_patch = patch;
    c->out->event_reason = "SandboxAdopted";
    free(c->out->message);
    if (asprintf(&c->out->message, "Adopted warm pool Sandbox \"%s\"", sname) < 0)
        c->out->message = NULL;
    claim_annotate(c, RECONCILE_ANN_SANDBOX_NAME, sname);
    status_from_sandbox(c, sb);
    return 0;
}

/* §2.8 4f: oldest Ready networked member first, else the oldest networked one; NULL when there
 * is none (*pending: some members wait for network). */
static const json_t *warm_pick(const claim_ctx *c, bool *pending)
{
    const json_t *best = NULL, *fallback = NULL;
    size_t i;
    json_t *sb;
    *pending = false;
    json_array_foreach (c->in->sandboxes, i, sb) {
        if (!adoptable(c, sb))
            continue;
        if (!networked(c, sb)) {
            *pending = true;
            continue;
        }
        if (reconcile_sandbox_ready(sb)) {
            if (!best || rc_cmp_age(sb, best) < 0)
                best = sb;
        } else if (!fallback || rc_cmp_age(sb, fallback) < 0)
            fallback = sb;
    }
    return best ? best : fallback;
}

/* Returns 1 when adopted, 0 when there is nothing to adopt (*pending as warm_pick). */
static int try_warm(claim_ctx *c, bool *pending)
{
    const json_t *pick = warm_pick(c, pending);
    if (!pick)
        return 0;
    int r = adopt(c, pick);
    return r < 0 ? r : 1;
}

const json_t *reconcile_claim_warm_pick(const reconcile_claim_in *in)
{
    claim_ctx c = {.in = in};
    bool pending;
    return warm_pick(&c, &pending);
}

static int cold_create(claim_ctx *c)
{
    const json_t *t = c->in->template;
    const json_t *spec = json_object_get(c->in->claim, "spec");
    json_t *sbspec = reconcile_template_blueprint(t);
    if (!sbspec)
        return -ENOMEM;
    api_error err = API_ERROR_INIT;
    json_t *vcts = NULL;
    if (reconcile_merge_vcts(t, json_object_get(spec, "volumeClaimTemplates"), &vcts, &err) < 0) {
        set_error(c, "VolumeClaimTemplatesError", err.message ?: "out of memory");
        api_error_clear(&err);
        json_decref(sbspec);
        return 0;
    }
    if (json_array_size(vcts) > 0)
        json_object_set_new(sbspec, "volumeClaimTemplates", vcts);
    else {
        json_object_del(sbspec, "volumeClaimTemplates");
        json_decref(vcts);
    }
    json_t *pt = rc_object(sbspec, API_POD_TEMPLATE);
    json_t *pspec = rc_object(pt, "spec");
    reconcile_failure f = RECONCILE_FAILURE_INIT;
    if (reconcile_inject_env(t, json_object_get(spec, "env"), pspec, &f) < 0) {
        set_failure(c, &f);
        json_decref(sbspec);
        return 0;
    }
    reconcile_apply_secure_defaults(t, pspec);
    json_t *pmd = NULL;
    if (rc_claim_pod_metadata(t, c->in->claim, &pmd, &err) < 0) {
        set_metadata_error(c, &err);
        json_decref(sbspec);
        return 0;
    }
    json_object_set_new(pt, "metadata", pmd);
    char th[9];
    reconcile_name_hash(api_meta_string(t, "name"), th);
    json_t *sb =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:[o], s:{s:s, s:s, s:s}, s:{s:s}}, s:o}", "apiVersion",
                  API_GROUP_CORE "/" API_VERSION, "kind", "Sandbox", "metadata", "name", c->name,
                  "namespace", c->ns, "ownerReferences", reconcile_owner_ref(c->in->claim),
                  "labels", RECONCILE_LABEL_CLAIM_UID, c->uid, RECONCILE_LABEL_LAUNCH_TYPE, "cold",
                  RECONCILE_LABEL_TEMPLATE_REF_HASH, th, "annotations", RECONCILE_ANN_TEMPLATE_REF,
                  api_meta_string(t, "name"), "spec", sbspec);
    if (!sb)
        return -ENOMEM;
    json_t *md = json_object_get(sb, "metadata");
    const char *cb = rc_label(c->in->claim, RECONCILE_LABEL_CREATED_BY);
    if (cb)
        json_object_set_new(json_object_get(md, "labels"), RECONCILE_LABEL_CREATED_BY,
                            json_string(cb));
    const char *trace = rc_annotation(c->in->claim, RECONCILE_ANN_TRACE);
    if (trace)
        json_object_set_new(json_object_get(md, "annotations"), RECONCILE_ANN_TRACE,
                            json_string(trace));
    c->out->action = RECONCILE_CLAIM_CREATE;
    c->out->sandbox = sb;
    c->out->event_reason = "SandboxProvisioned";
    free(c->out->message);
    if (asprintf(&c->out->message, "Created Sandbox \"%s\"", c->name) < 0)
        c->out->message = NULL;
    status_from_sandbox(c, sb);
    return 0;
}

/* §2.8 3. Returns 1 when expiry decided the pass, 0 when it did not, -ENOMEM. */
static int claim_expiry(claim_ctx *c)
{
    _cleanup_(api_claim_spec_freep) api_claim_spec *spec = NULL;
    if (api_claim_spec_parse(c->in->claim, &spec) < 0)
        return -ENOMEM;
    int64_t expire = INT64_MAX, t;
    if (reconcile_parse_time(spec->shutdown_time, &t) == 0)
        expire = t;
    const json_t *fin = reconcile_condition(c->in->claim, "Finished");
    const char *fs = json_string_value(json_object_get(fin, "status"));
    if (spec->has_ttl && fs && strcmp(fs, "True") == 0 &&
        reconcile_parse_time(json_string_value(json_object_get(fin, "lastTransitionTime")), &t) ==
            0) {
        int64_t e = t + spec->ttl_seconds_after_finished * 1000000LL;
        if (e < expire)
            expire = e;
    }
    if (expire == INT64_MAX)
        return 0;
    if (expire > c->in->now) {
        set_requeue(c, expire - c->in->now);
        return 0;
    }
    const char *reason =
        json_string_value(json_object_get(reconcile_condition(c->in->claim, "Ready"), "reason"));
    if (!reason || strcmp(reason, "ClaimExpired") != 0) {
        set_ready(c, "False", "ClaimExpired", "Claim expired. Sandbox cleanup initiated.");
        c->out->event_reason = "ClaimExpired";
        c->out->message = strdup("Claim expired. Sandbox cleanup initiated.");
        c->out->requeue = CLAIM_EXPIRED_MARK_USEC;
        return 1;
    }
    const char *policy = spec->shutdown_policy;
    const char *sname =
        json_string_value(json_object_get(json_object_get(c->status, "sandbox"), "name"));
    const json_t *sb = find_sandbox(c, sname ? sname : c->name);
    c->out->target = sb;
    if (policy && strcmp(policy, "Delete") == 0) {
        c->out->action = RECONCILE_CLAIM_DELETE;
        return 1;
    }
    if (policy && strcmp(policy, "DeleteForeground") == 0) {
        c->out->action = RECONCILE_CLAIM_DELETE_FOREGROUND;
        return 1;
    }
    if (sb && reconcile_controlled_by(sb, c->in->claim)) {
        c->out->action = RECONCILE_CLAIM_DELETE_SANDBOX;
        return 1; /* status.sandbox is cleared on the pass that sees it gone */
    }
    c->out->target = NULL;
    if (sb)
        set_ready(c, "False", "ClaimExpired",
                  "Claim expired. Sandbox is not controlled by the claim; deletion skipped.");
    set_sandbox_ref(c, NULL);
    return 1;
}

/* §2.8 4b-d: a sandbox already bound to the claim. Returns it, or NULL; *ret_err when a
 * sandbox named like the claim belongs to someone else. */
static const json_t *find_bound(claim_ctx *c, bool *ret_warm, bool *ret_err)
{
    *ret_warm = false;
    *ret_err = false;
    const char *sname =
        json_string_value(json_object_get(json_object_get(c->status, "sandbox"), "name"));
    const json_t *sb = find_sandbox(c, sname);
    if (sb && reconcile_controlled_by(sb, c->in->claim)) {
        *ret_warm = strcmp(sname, c->name) != 0;
        return sb;
    }
    const char *aname = rc_annotation(c->in->claim, RECONCILE_ANN_SANDBOX_NAME);
    if (aname) {
        sb = find_sandbox(c, aname);
        if (sb && reconcile_controlled_by(sb, c->in->claim)) {
            *ret_warm = true;
            return sb;
        }
        if (!(sb && adoptable(c, sb)))
            claim_annotate(c, RECONCILE_ANN_SANDBOX_NAME, NULL); /* stale reference */
    }
    sb = find_sandbox(c, c->name);
    if (sb) {
        if (reconcile_controlled_by(sb, c->in->claim))
            return sb;
        reconcile_failure f = RECONCILE_FAILURE_INIT;
        reconcile_fail(&f, "ReconcilerError", true, -EEXIST,
                       "sandbox \"%s\" is not controlled by claim \"%s\"; refusing to use it",
                       c->name, c->name);
        set_failure(c, &f);
        *ret_err = true;
    }
    return NULL;
}

static int bound(claim_ctx *c, const json_t *sb, bool warm)
{
    json_t *patch = json_object();
    const char *lt = rc_label(sb, RECONCILE_LABEL_LAUNCH_TYPE);
    const char *want_lt = warm ? "warm" : "cold";
    if (!lt || strcmp(lt, want_lt) != 0)
        json_object_set_new(rc_object(rc_object(patch, "metadata"), "labels"),
                            RECONCILE_LABEL_LAUNCH_TYPE, json_string(want_lt));
    if (pod_metadata_patch(c, sb, patch) < 0) {
        json_decref(patch);
        return 0;
    }
    if (json_object_size(patch) > 0) {
        c->out->action = RECONCILE_CLAIM_PATCH_SANDBOX;
        c->out->target = sb;
        c->out->sandbox_patch = patch;
    } else
        json_decref(patch);
    status_from_sandbox(c, sb);
    return 0;
}

static int claim_active(claim_ctx *c)
{
    const json_t *spec = json_object_get(c->in->claim, "spec");
    api_error err = API_ERROR_INIT;
    if (reconcile_validate_pod_metadata(json_object_get(spec, "additionalPodMetadata"),
                                        c->in->allowed_label_domains, &err) < 0) {
        set_error(c, "InvalidMetadata", err.message ?: "out of memory");
        api_error_clear(&err);
        return 0;
    }
    bool warm, conflict;
    const json_t *sb = find_bound(c, &warm, &conflict);
    if (conflict)
        return 0;
    if (sb)
        return bound(c, sb, warm);
    const char *aname = rc_annotation(c->in->claim, RECONCILE_ANN_SANDBOX_NAME);
    const json_t *half = aname ? find_sandbox(c, aname) : NULL;
    if (half && adoptable(c, half)) /* finish an adoption that was interrupted */
        return adopt(c, half);
    _cleanup_(api_claim_spec_freep) api_claim_spec *cs = NULL;
    if (api_claim_spec_parse(c->in->claim, &cs) < 0)
        return -ENOMEM;
    char msg[600];
    if (!c->in->pool) {
        snprintf(msg, sizeof(msg), "SandboxWarmPool \"%s\" not found", cs->warm_pool_ref ?: "");
        set_error(c, "WarmPoolNotFound", msg);
        set_requeue(c, NOT_FOUND_REQUEUE_USEC);
        return 0;
    }
    bool cold = json_array_size(cs->env) > 0 || json_array_size(cs->volume_claim_templates) > 0;
    /* As upstream, warm adoption comes before the template lookup: a Ready member is served
     * even when its template has been deleted. Only additionalPodMetadata needs the template
     * (merged into the pod metadata), so such a claim waits for it. */
    bool needs_template = json_object_size(cs->labels) > 0 || json_object_size(cs->annotations) > 0;
    if (!cold && (c->in->template || !needs_template)) {
        bool pending;
        int r = try_warm(c, &pending);
        if (r != 0)
            return r < 0 ? r : 0;
        int64_t age = c->in->now - rc_creation_time(c->in->claim);
        if (pending && age < RECONCILE_COLD_GRACE_USEC) {
            int64_t left = RECONCILE_COLD_GRACE_USEC - age;
            set_requeue(c,
                        left < PENDING_NETWORK_REQUEUE_USEC ? left : PENDING_NETWORK_REQUEUE_USEC);
            return 1; /* no status write */
        }
    }
    if (!c->in->template) {
        snprintf(msg, sizeof(msg), "SandboxTemplate \"%s\" not found",
                 api_template_ref(c->in->pool) ?: "");
        set_error(c, "TemplateNotFound", msg);
        set_requeue(c, NOT_FOUND_REQUEUE_USEC);
        return 0;
    }
    return cold_create(c);
}

int reconcile_claim(const reconcile_claim_in *in, reconcile_claim_out *out)
{
    *out = (reconcile_claim_out){0};
    claim_ctx c = {.in = in, .out = out};
    c.name = api_meta_string(in->claim, "name");
    c.uid = api_meta_string(in->claim, "uid");
    c.ns = api_meta_string(in->claim, "namespace");
    if (!c.name || !c.uid)
        return -EINVAL;
    if (!c.ns)
        c.ns = "default";
    c.generation =
        json_integer_value(json_object_get(json_object_get(in->claim, "metadata"), "generation"));
    const json_t *old = json_object_get(in->claim, "status");
    c.status = json_is_object(old) ? json_deep_copy(old) : json_object();
    if (!c.status)
        return -ENOMEM;
    if (!rc_annotation(in->claim, RECONCILE_ANN_FIRST_OBSERVED)) {
        char ts[40];
        reconcile_format_time(in->now, 9, ts);
        claim_annotate(&c, RECONCILE_ANN_FIRST_OBSERVED, ts);
    }
    int r = 0;
    if (reconcile_deleting(in->claim))
        ; /* deletion in progress: leave it to garbage collection */
    else if ((r = claim_expiry(&c)) == 0)
        r = claim_active(&c);
    else if (r > 0)
        r = 0; /* expiry decided the pass */
    if (r < 0) {
        json_decref(c.status);
        reconcile_claim_out_done(out);
        return r;
    }
    if (r == 1) { /* waiting for a member's network, without a status write */
        json_decref(c.status);
        return 0;
    }
    out->status = c.status;
    out->status_changed = !old || !json_equal(c.status, (json_t *)old);
    /* First Ready: the annotation metrics and `asb get` latency use. */
    json_t *rc = NULL;
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(c.status, "conditions"), i, x) {
        const char *t = json_string_value(json_object_get(x, "type"));
        if (t && strcmp(t, "Ready") == 0)
            rc = x;
    }
    const char *rs = json_string_value(json_object_get(rc, "status"));
    if (rs && strcmp(rs, "True") == 0 && !rc_annotation(in->claim, RECONCILE_ANN_FIRST_READY)) {
        char ts[40];
        reconcile_format_time(in->now, 9, ts);
        claim_annotate(&c, RECONCILE_ANN_FIRST_READY, ts);
    }
    return 0;
}
