/* The template / warm pool / claim controller of `asb serve` (see local-controller.h). Each pass
 * is level-triggered: it lists every object and runs the reconcile core; the store is
 * synchronous, so a pass always sees its own earlier writes (no expectations bookkeeping). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "local/reconcile/local-claim-activity.h"
#include "local/controller/local-controller.h"
#include "local/store/local-events.h"
#include "local/metrics/local-metrics.h"
#include "local/reconcile/local-finalizer.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

#define RESYNC_INTERVAL (30 * USEC_PER_SEC)
#define CREATE_PENDING_REQUEUE (200 * USEC_PER_MSEC)
#define ADOPT_ATTEMPTS 3
#define FOREGROUND_FINALIZER "foregroundDeletion"
#define EVENT_SOURCE "asb-serve-controller"

struct local_controller {
    local_store *store;
    const api_kind *k_sb, *k_tpl, *k_pool, *k_claim;
    pthread_t thread;
    bool started;
    usec_t grace;
    char **domains; /* NULL-terminated, or NULL */
    /* An informer-style cache fed by the store's events: per kind (templates, pools, claims,
     * sandboxes) "namespace/name" -> the object as last committed. Passes read it instead of
     * listing and parsing every object; writes go to the store and come back as events.
     * Written by the controller thread only; cache_lock orders those writes against the API
     * server threads that read it (local_controller_plan_adoption). */
    json_t *cache[4];
    pthread_mutex_t cache_lock;
    /* Under cache_lock: sandbox uid -> resourceVersion its adoption at a claim's create wrote,
     * until the cache has caught up with it (a burst's next creates must not pick the same
     * member from a cache that still shows it free), or TAKEN_RESERVED while a create's planned
     * adoption of it has not run yet. */
    json_t *taken;
    usec_t refill_held_since; /* CLOCK_MONOTONIC; 0: the pools' refill is not being held */
};

typedef struct pass {
    json_t *templates, *pools, *claims, *sandboxes;
    json_t *adopted; /* claim uid -> true: adopted in this pass's first round */
    usec_t requeue; /* µs from now, 0 = none */
    /* The first adoption's claim and sandbox as stored (for the adoption at a claim's create) */
    json_t *claim_after, *sandbox_after;
} pass;

static void requeue(pass *p, int64_t after)
{
    if (after > 0 && (!p->requeue || (usec_t)after < p->requeue))
        p->requeue = (usec_t)after;
}

static int64_t wall_now(void)
{
    return (int64_t)now_usec(CLOCK_REALTIME);
}

static const json_t *find_obj(const json_t *items, const char *ns, const char *name)
{
    size_t i;
    json_t *o;
    if (!ns || !name)
        return NULL;
    json_array_foreach (items, i, o) {
        const char *n = api_meta_string(o, "name"), *s = api_meta_string(o, "namespace");
        if (n && s && strcmp(n, name) == 0 && strcmp(s, ns) == 0)
            return o;
    }
    return NULL;
}

/* ---- store writes ---- */

typedef struct patch_ctx {
    const char *uid;
    const char *rv;       /* optimistic lock, or NULL */
    const json_t *patch;  /* merge patch, or NULL */
    const json_t *status; /* replaces status, or NULL */
    bool remove;          /* delete the object */
    bool drop_finalizer;  /* remove FOREGROUND_FINALIZER (and delete when none is left) */
    bool mark_foreground; /* add FOREGROUND_FINALIZER and a deletionTimestamp */
    bool carry_conditions; /* a spec change that leaves the running sandbox as it is (adoption:
                            * pod-template metadata only): its conditions stay current */
} patch_ctx;

static bool same_str(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static int patch_fn(const json_t *old, json_t **ret_new, void *payload)
{
    const patch_ctx *p = payload;
    if (!same_str(api_meta_string(old, "uid"), p->uid))
        return -ESTALE;
    if (p->rv && !same_str(api_meta_string(old, "resourceVersion"), p->rv))
        return -EAGAIN;
    if (p->remove) /* finalizers (the local backend's teardown) first: deletionTimestamp */
        return local_delete_or_mark(old, ret_new);
    /* old is the store's (never modified): new shares what the patch leaves alone, and takes
     * its own copy of whatever it changes below that (api_own_member). */
    json_t *new = p->patch ? api_merge_patch_shared(old, p->patch) : json_copy((json_t *)old);
    json_t *md = api_own_member(new, "metadata"); /* the store sets its resourceVersion */
    if (!new || (json_object_get(old, "metadata") && !md)) {
        json_decref(new);
        return -ENOMEM;
    }
    if (p->status)
        json_object_set(new, "status", (json_t *)p->status);
    if (p->mark_foreground) {
        json_t *f = api_own_member(md, "finalizers");
        if (!json_is_array(f)) {
            f = json_array();
            json_object_set_new(md, "finalizers", f);
        }
        json_array_append_new(f, json_string(FOREGROUND_FINALIZER));
        char ts[40];
        reconcile_format_time(wall_now(), 0, ts);
        json_object_set_new(md, "deletionTimestamp", json_string(ts));
        json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(0));
    }
    if (p->drop_finalizer) {
        json_t *f = api_own_member(md, "finalizers");
        for (size_t i = json_array_size(f); i-- > 0;)
            if (same_str(json_string_value(json_array_get(f, i)), FOREGROUND_FINALIZER))
                json_array_remove(f, i);
        if (json_array_size(f) == 0) {
            json_decref(new);
            return STORE_UPDATE_DELETE;
        }
    }
    const json_t *os = json_object_get(old, "spec"), *ns = json_object_get(new, "spec");
    if (os && ns && !json_equal((json_t *)os, (json_t *)ns)) {
        json_int_t gen =
            json_integer_value(json_object_get(json_object_get(old, "metadata"), "generation")) + 1;
        json_object_set_new(md, "generation", json_integer(gen));
        /* The container is not restarted for new pod-template labels, so a Ready sandbox is
         * still Ready at the new generation: say so in the same write, or a client opening
         * the adopted sandbox would wait for the reconciler to restate it. */
        json_t *conds = p->carry_conditions
                            ? api_own_member(api_own_member(new, "status"), "conditions")
                            : NULL;
        for (size_t i = 0; i < json_array_size(conds); i++) {
            json_t *cond = json_array_get(conds, i);
            if (json_object_get(cond, "observedGeneration") && (cond = api_own_element(conds, i)))
                json_object_set_new(cond, "observedGeneration", json_integer(gen));
        }
    }
    if (json_equal(new, (json_t *)old)) {
        json_decref(new);
        return STORE_UPDATE_UNCHANGED;
    }
    *ret_new = new;
    return 0;
}

static int apply(local_controller *c, const api_kind *k, const json_t *obj, patch_ctx *p,
                 json_t **ret)
{
    json_t *out = NULL;
    p->uid = api_meta_string(obj, "uid");
    /* obj is the cache's (never modified): no parse of its row while it is current */
    int r = local_store_update_current(c->store, k, api_meta_string(obj, "namespace"),
                                       api_meta_string(obj, "name"), obj, patch_fn, p, &out);
    if (ret && r == 0)
        *ret = out;
    else
        json_decref(out);
    return r;
}

/* One store transaction for the writes that follow (adoptions, a pool's creates, their Events):
 * one fsync instead of one per write, and their watch events go out together the moment it
 * commits. Without a batch (begin failed) the writes simply commit one by one. */
static bool batch_begin(local_controller *c)
{
    int r = local_store_batch_begin(c->store);
    if (r < 0)
        log_warn("cannot batch store writes; writing one at a time", "error", strerror(-r));
    return r == 0;
}

/* Returns false when the batch rolled back: none of its writes happened. */
static bool batch_end(local_controller *c, bool began, const char *what)
{
    if (!began)
        return true;
    int r = local_store_batch_end(c->store);
    if (r < 0)
        log_warn("store batch rolled back", "writes", what, "error", strerror(-r));
    return r == 0;
}

/* Server-set metadata as the API server does it (uid, creationTimestamp, generation, a name for
 * generateName), then create. */
static int create_object(local_controller *c, const api_kind *k, json_t *obj)
{
    json_t *md = json_object_get(obj, "metadata");
    api_default(k, obj); /* CRD defaults, as the API server applies them on create */
    char uid[37], ts[40];
    int r = uuid_v4(uid);
    if (r < 0)
        return r;
    reconcile_format_time(wall_now(), 0, ts);
    json_object_set_new(md, "uid", json_string(uid));
    json_object_set_new(md, "creationTimestamp", json_string(ts));
    json_object_set_new(md, "generation", json_integer(1));
    const char *gen = json_string_value(json_object_get(md, "generateName"));
    bool generate = gen && !api_meta_string(obj, "name");
    for (unsigned attempt = 0; attempt < 8; attempt++) {
        if (generate) {
            unsigned char rnd[5];
            if ((r = random_bytes(rnd, sizeof(rnd))) < 0)
                return r;
            char *n = api_generate_name(gen, rnd);
            if (!n)
                return -ENOMEM;
            json_object_set_new(md, "name", json_string(n));
            free(n);
        }
        r = local_store_create(c->store, k, obj);
        if (r != -EEXIST || !generate)
            break;
    }
    return r;
}

/* ---- garbage collection (ownerReferences) and foreground deletion ---- */

static bool known_uid(const pass *p, const char *uid)
{
    const json_t *lists[] = {p->pools, p->claims};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *o;
        json_array_foreach (lists[l], i, o) {
            if (same_str(api_meta_string(o, "uid"), uid))
                return true;
        }
    }
    return false;
}

/* A Sandbox all of whose owners (warm pools, claims) are gone is deleted, as kube's garbage
 * collector does with background propagation. */
static bool orphaned(const pass *p, const json_t *sb)
{
    const json_t *refs = json_object_get(json_object_get(sb, "metadata"), "ownerReferences");
    if (json_array_size(refs) == 0)
        return false;
    size_t i;
    json_t *ref;
    json_array_foreach (refs, i, ref) {
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        if (!same_str(kind, "SandboxWarmPool") && !same_str(kind, "SandboxClaim"))
            return false;
        if (known_uid(p, json_string_value(json_object_get(ref, "uid"))))
            return false;
    }
    return true;
}

static bool owned_by_uid(const json_t *obj, const char *uid)
{
    size_t i;
    json_t *ref;
    json_array_foreach (json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i,
                        ref) {
        if (same_str(json_string_value(json_object_get(ref, "uid")), uid))
            return true;
    }
    return false;
}

/* Returns true when it wrote (deleted or marked for its teardown). A sandbox whose teardown is
 * already under way is left alone: every pass during a teardown used to mark it again and record
 * another "Deleted" Event, one store commit per such sandbox per pass. */
static bool delete_sandbox(local_controller *c, const json_t *sb, const char *why)
{
    if (reconcile_deleting(sb))
        return false;
    patch_ctx p = {.remove = true};
    int r = apply(c, c->k_sb, sb, &p, NULL);
    if (r == 0) {
        log_info("deleting sandbox", "sandbox", api_meta_string(sb, "name"), "reason", why);
        local_event_record(c->store, EVENT_SOURCE, sb, LOCAL_EVENT_NORMAL, "Deleted", "Delete",
                           "deleted: %s", why);
    }
    else if (r != -ENOENT && r != -ESTALE)
        log_warn("cannot delete sandbox", "sandbox", api_meta_string(sb, "name"), "error",
                 strerror(-r));
    return r == 0;
}

static bool collect_garbage_batched(local_controller *c, pass *p)
{
    bool changed = false;
    size_t i;
    json_t *sb;
    json_array_foreach (p->sandboxes, i, sb) {
        if (orphaned(p, sb))
            changed |= delete_sandbox(c, sb, "owner deleted");
    }
    /* Foreground deletion: the claim goes once its sandboxes are gone. */
    json_t *claim;
    json_array_foreach (p->claims, i, claim) {
        if (!reconcile_deleting(claim))
            continue;
        bool has_fg = false;
        size_t j;
        json_t *f;
        json_array_foreach (json_object_get(json_object_get(claim, "metadata"), "finalizers"), j, f)
            has_fg |= same_str(json_string_value(f), FOREGROUND_FINALIZER);
        if (!has_fg)
            continue;
        bool children = false;
        json_array_foreach (p->sandboxes, j, sb) {
            if (owned_by_uid(sb, api_meta_string(claim, "uid"))) {
                children = true;
                delete_sandbox(c, sb, "foreground deletion of its claim");
            }
        }
        if (!children) {
            patch_ctx pc = {.drop_finalizer = true};
            int r = apply(c, c->k_claim, claim, &pc, NULL);
            if (r < 0 && r != -ENOENT)
                log_warn("cannot finish the foreground deletion of a claim", "claim",
                         api_meta_string(claim, "name"), "error", strerror(-r));
            else
                log_info("claim deleted after its sandboxes (foreground)", "claim",
                         api_meta_string(claim, "name"));
        }
        changed = true;
    }
    return changed;
}

static bool collect_garbage(local_controller *c, pass *p)
{
    bool began = batch_begin(c);
    bool changed = collect_garbage_batched(c, p);
    batch_end(c, began, "garbage collection");
    return changed;
}

/* ---- templates and pools ---- */

static void reconcile_templates(local_controller *c, pass *p)
{
    size_t i;
    json_t *t;
    json_array_foreach (p->templates, i, t) {
        json_t *patch = reconcile_template_patch(t);
        if (!patch)
            continue;
        patch_ctx pc = {.patch = patch};
        apply(c, c->k_tpl, t, &pc, NULL);
        json_decref(patch);
    }
}

/* A pool that cannot fill says why, once, as an Event (its Ready condition says it for as long
 * as it lasts). */
static void pool_condition_event(local_controller *c, const json_t *pool, const json_t *status)
{
    const json_t *was = reconcile_condition(pool, "Ready");
    json_t *obj = json_pack("{s:O}", "status", (json_t *)status);
    const json_t *now = obj ? reconcile_condition(obj, "Ready") : NULL;
    const char *reason = json_string_value(json_object_get(now, "reason")),
               *old_reason = json_string_value(json_object_get(was, "reason"));
    if (reason && strcmp(reason, "TemplateNotFound") == 0 &&
        (!old_reason || strcmp(old_reason, reason) != 0))
        local_event_record(c->store, EVENT_SOURCE, pool, LOCAL_EVENT_WARNING, reason, "Create",
                           "%s", json_string_value(json_object_get(now, "message")) ?: "");
    json_decref(obj);
}

/* Returns true when it changed Sandboxes. */
/* hold_creates: claims were just served; the pools' status and everything else is written,
 * but no replacement is created yet (run_pass). */
static bool reconcile_pools_batched(local_controller *c, pass *p, bool hold_creates)
{
    bool changed = false;
    size_t i;
    json_t *pool;
    json_array_foreach (p->pools, i, pool) {
        if (reconcile_deleting(pool))
            continue;
        const char *ns = api_meta_string(pool, "namespace");
        const char *tname = json_string_value(json_object_get(
            json_object_get(json_object_get(pool, "spec"), "sandboxTemplateRef"), "name"));
        reconcile_pool_in in = {.pool = pool,
                                .template = find_obj(p->templates, ns, tname),
                                .sandboxes = p->sandboxes,
                                .now = wall_now(),
                                .grace = (int64_t)c->grace,
                                .hold_creates = hold_creates};
        reconcile_pool_out out;
        if (reconcile_pool(&in, &out) < 0)
            continue;
        size_t j;
        json_t *x;
        json_array_foreach (out.patches, j, x) {
            const json_t *m = json_object_get(x, "object");
            patch_ctx pc = {.rv = api_meta_string(m, "resourceVersion"),
                            .patch = json_object_get(x, "patch")};
            apply(c, c->k_sb, m, &pc, NULL);
            changed = true;
        }
        json_array_foreach (out.remove, j, x)
            changed |= delete_sandbox(c, x, "warm pool");
        json_array_foreach (out.create, j, x) {
            int r = create_object(c, c->k_sb, x);
            if (r < 0) {
                log_warn("cannot create warm pool sandbox", "pool", api_meta_string(pool, "name"),
                         "error", strerror(-r));
                local_event_record(c->store, EVENT_SOURCE, pool, LOCAL_EVENT_WARNING,
                                   "FailedCreate", "Create", "cannot create a warm sandbox: %s",
                                   strerror(-r));
                break;
            }
            local_event_record(c->store, EVENT_SOURCE, pool, LOCAL_EVENT_NORMAL,
                               "SuccessfulCreate", "Create", "created warm sandbox %s",
                               api_meta_string(x, "name") ?: "");
            changed = true;
        }
        if (out.status_changed) {
            pool_condition_event(c, pool, out.status);
            patch_ctx pc = {.status = out.status};
            apply(c, c->k_pool, pool, &pc, NULL);
        }
        requeue(p, out.requeue);
        reconcile_pool_out_done(&out);
    }
    return changed;
}

/* Every pool's creates, deletions and status in one transaction: a refill of N members is one
 * fsync, not 2N + 1 (each create and its Event), and a claim that arrives meanwhile waits for
 * one commit instead of all of them. */
static bool reconcile_pools(local_controller *c, pass *p, bool hold_creates)
{
    bool began = batch_begin(c);
    bool changed = reconcile_pools_batched(c, p, hold_creates);
    if (!batch_end(c, began, "warm pools"))
        changed = true; /* p->sandboxes may name creates that never happened: relist */
    return changed;
}

/* ---- claims ---- */

static bool local_networked(const json_t *sb, void *userdata)
{
    (void)userdata;
    /* Locally a sandbox is reachable when sandboxd answers health: that is its Ready. */
    return reconcile_sandbox_ready(sb);
}

/* The core's input for one claim: the same for a pass and for a create's planned adoption. */
static reconcile_claim_in claim_input(const local_controller *c, const json_t *claim,
                                      const json_t *pool, const json_t *tpl,
                                      const json_t *sandboxes)
{
    return (reconcile_claim_in){.claim = claim,
                                .pool = pool,
                                .template = tpl,
                                .sandboxes = sandboxes,
                                .now = wall_now(),
                                .allowed_label_domains = (const char *const *)c->domains,
                                .networked = local_networked};
}

static int relist(local_controller *c, const api_kind *k, json_t **items)
{
    json_t *n = NULL;
    uint64_t rv;
    int r = local_store_list(c->store, k, NULL, &n, &rv);
    if (r < 0)
        return r;
    json_decref(*items);
    *items = n;
    return 0;
}

/* Ready=False with reason/message on the claim, other conditions kept (a transient state the
 * core cannot see: its plan met a conflict in the store). */
static void set_claim_ready(local_controller *c, const json_t *claim, const char *reason,
                            const char *message)
{
    json_t *st = json_deep_copy(json_object_get(claim, "status"));
    if (!json_is_object(st)) {
        json_decref(st);
        st = json_object();
    }
    json_t *conds = json_array();
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(st, "conditions"), i, x) {
        if (!same_str(json_string_value(json_object_get(x, "type")), "Ready"))
            json_array_append(conds, x);
    }
    char ts[40];
    reconcile_format_time(wall_now(), 0, ts);
    json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "type", "Ready",
                                           "status", "False", "reason", reason, "message", message,
                                           "lastTransitionTime", ts, "observedGeneration",
                                           json_integer_value(json_object_get(
                                               json_object_get(claim, "metadata"), "generation"))));
    json_object_set_new(st, "conditions", conds);
    patch_ctx pc = {.status = st};
    apply(c, c->k_claim, claim, &pc, NULL);
    json_decref(st);
}

/* Executes one claim plan. -EAGAIN: a conflict, re-run from fresh objects. */
static int execute_claim(local_controller *c, pass *p, const json_t *claim,
                         reconcile_claim_out *out)
{
    const char *cname = api_meta_string(claim, "name");
    patch_ctx cp = {.patch = out->claim_patch, .status = out->status_changed ? out->status : NULL};
    int r = 0;
    switch (out->action) {
    case RECONCILE_CLAIM_ADOPT: {
        /* One transaction: the sandbox changes hands and the claim names it and says Ready. */
        patch_ctx sp = {.uid = api_meta_string(out->target, "uid"),
                        .rv = api_meta_string(out->target, "resourceVersion"),
                        .patch = out->sandbox_patch,
                        .carry_conditions = true};
        cp.uid = api_meta_string(claim, "uid");
        _cleanup_free_ char *sname = strdup(api_meta_string(out->target, "name") ?: "");
        /* current: both as this pass saw them, so the store need not parse their rows again */
        store_op ops[2] = {
            {c->k_sb, api_meta_string(out->target, "namespace"),
             api_meta_string(out->target, "name"), patch_fn, &sp, out->target, NULL},
            {c->k_claim, api_meta_string(claim, "namespace"), cname, patch_fn, &cp, claim, NULL},
        };
        r = local_store_update_many(c->store, ops, 2);
        if (r == 0) {
            /* The pass goes on with the member as adopted: later claims cannot pick it. */
            for (size_t i = 0; i < json_array_size(p->sandboxes); i++)
                if (json_array_get(p->sandboxes, i) == out->target) {
                    json_array_set(p->sandboxes, i, ops[0].result);
                    out->target = NULL;
                    break;
                }
        }
        if (r == 0 && !p->claim_after) {
            p->claim_after = json_incref(ops[1].result);
            p->sandbox_after = json_incref(ops[0].result);
        }
        json_decref(ops[0].result);
        json_decref(ops[1].result);
        if (r == -EAGAIN || r == -ESTALE || r == -ENOENT)
            return -EAGAIN;
        if (r == 0) {
            local_claim_activity_mark(); /* the next claims of a burst likely follow */
            log_info("claim adopted a warm sandbox", "claim", cname, "sandbox", sname);
        }
        return r;
    }
    case RECONCILE_CLAIM_CREATE:
        r = create_object(c, c->k_sb, out->sandbox);
        if (r == -EEXIST) {
            requeue(p, CREATE_PENDING_REQUEUE);
            set_claim_ready(c, claim, "SandboxCreatePending",
                            "Sandbox already created; waiting for cache to converge");
            return 0;
        }
        if (r < 0)
            return r;
        log_info("claim created a sandbox (cold)", "claim", cname);
        json_array_append(p->sandboxes, out->sandbox);
        break;
    case RECONCILE_CLAIM_PATCH_SANDBOX: {
        patch_ctx sp = {.rv = api_meta_string(out->target, "resourceVersion"),
                        .patch = out->sandbox_patch};
        r = apply(c, c->k_sb, out->target, &sp, NULL);
        if (r == -EAGAIN)
            return -EAGAIN;
        break;
    }
    case RECONCILE_CLAIM_DELETE_SANDBOX:
        delete_sandbox(c, out->target, "claim expired (Retain)");
        break;
    case RECONCILE_CLAIM_DELETE: {
        patch_ctx dp = {.remove = true};
        apply(c, c->k_claim, claim, &dp, NULL);
        log_info("claim expired: deleted (Delete)", "claim", cname);
        return 0; /* its sandbox goes with the garbage collection of the next pass */
    }
    case RECONCILE_CLAIM_DELETE_FOREGROUND: {
        patch_ctx fp = {.mark_foreground = true};
        apply(c, c->k_claim, claim, &fp, NULL);
        log_info("claim expired: deleting (DeleteForeground)", "claim", cname);
        return 0;
    }
    case RECONCILE_CLAIM_NOTHING:
        break;
    }
    if (out->claim_patch || cp.status)
        apply(c, c->k_claim, claim, &cp, NULL);
    return 0;
}

/* After a claim plan ran: its Event (the core names the reason, as on a cluster) and, when this
 * plan made the claim Ready for the first time, its latency by launch type. */
static void claim_executed(local_controller *c, pass *p, const json_t *claim,
                           const reconcile_claim_out *out)
{
    if (out->event_reason) {
        const char *action = strcmp(out->event_reason, "SandboxAdopted") == 0       ? "Adopt"
                             : strcmp(out->event_reason, "SandboxProvisioned") == 0 ? "Create"
                                                                                    : "Delete";
        local_event_record(c->store, EVENT_SOURCE, claim, LOCAL_EVENT_NORMAL, out->event_reason,
                           action, "%s", out->message ?: out->event_reason);
    }
    const json_t *ann = json_object_get(json_object_get(out->claim_patch, "metadata"),
                                        "annotations");
    const char *ready_at = json_string_value(json_object_get(ann, RECONCILE_ANN_FIRST_READY));
    if (!ready_at)
        return;
    const char *sname = json_string_value(
        json_object_get(json_object_get(out->status, "sandbox"), "name"));
    const json_t *sb = find_obj(p->sandboxes, api_meta_string(claim, "namespace"), sname);
    const char *lt = json_string_value(json_object_get(
        json_object_get(json_object_get(sb, "metadata"), "labels"), RECONCILE_LABEL_LAUNCH_TYPE));
    local_metrics_claim_ready(claim, ready_at, lt ?: "unknown");
}

static int cmp_claims(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    const char *tx = api_meta_string(x, "creationTimestamp") ?: "",
               *ty = api_meta_string(y, "creationTimestamp") ?: "";
    int k = strcmp(tx, ty);
    return k ? k : strcmp(api_meta_string(x, "name") ?: "", api_meta_string(y, "name") ?: "");
}

/* adopt_only: the first round, which only runs the claims whose plan is to adopt a member
 * (once each; a conflict waits for the second round); else every claim not adopted yet. */
static void reconcile_claims_in(local_controller *c, pass *p, bool adopt_only)
{
    size_t n = json_array_size(p->claims);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(p->claims, i);
    qsort(v, n, sizeof(*v), cmp_claims);
    for (size_t i = 0; i < n; i++) {
        json_t *claim = json_incref(v[i]);
        const char *cuid = api_meta_string(claim, "uid");
        if (reconcile_deleting(claim) || (cuid && json_object_get(p->adopted, cuid))) {
            json_decref(claim);
            continue;
        }
        const char *ns = api_meta_string(claim, "namespace");
        const char *pname = json_string_value(json_object_get(
            json_object_get(json_object_get(claim, "spec"), "warmPoolRef"), "name"));
        const json_t *pool = find_obj(p->pools, ns, pname);
        const char *tname = json_string_value(json_object_get(
            json_object_get(json_object_get(pool, "spec"), "sandboxTemplateRef"), "name"));
        for (unsigned attempt = 0; attempt < ADOPT_ATTEMPTS; attempt++) {
            reconcile_claim_in in = claim_input(
                c, claim, pool, pool ? find_obj(p->templates, ns, tname) : NULL, p->sandboxes);
            reconcile_claim_out out;
            if (reconcile_claim(&in, &out) < 0)
                break;
            /* Marked before it runs: the second round never runs a claim of the first again
             * (its cached object does not show the adoption yet). */
            if (adopt_only && (out.action != RECONCILE_CLAIM_ADOPT || !cuid ||
                               json_object_set_new(p->adopted, cuid, json_true()) < 0)) {
                reconcile_claim_out_done(&out);
                break;
            }
            int r = execute_claim(c, p, claim, &out);
            if (r == 0)
                claim_executed(c, p, claim, &out);
            if (adopt_only && r == -EAGAIN)
                json_object_del(p->adopted, cuid); /* a conflict: the second round retries */
            requeue(p, out.requeue);
            reconcile_claim_out_done(&out);
            if (r != -EAGAIN || adopt_only)
                break;
            if (attempt + 1 == ADOPT_ATTEMPTS) {
                set_claim_ready(c, claim, "AdoptionConflict",
                                "the warm sandbox changed while it was being adopted; the next "
                                "pass retries from a converged view");
                requeue(p, CREATE_PENDING_REQUEUE);
                break;
            }
            /* Conflict: fresh sandboxes and claim, then again. */
            relist(c, c->k_sb, &p->sandboxes);
            json_t *fresh = NULL;
            if (local_store_get(c->store, c->k_claim, ns, api_meta_string(claim, "name"), &fresh) <
                0)
                break;
            json_decref(claim);
            claim = fresh;
        }
        json_decref(claim);
    }
    free(v);
}

/* The adopting round runs as one batch: N claims that arrived together are adopted by one
 * commit (one fsync) and their Ready events reach the watches together when it commits. */
static void reconcile_claims(local_controller *c, pass *p, bool adopt_only)
{
    if (!adopt_only) {
        reconcile_claims_in(c, p, false);
        return;
    }
    bool began = batch_begin(c);
    reconcile_claims_in(c, p, true);
    if (!batch_end(c, began, "adoptions")) {
        /* None of them happened: forget what the pass believed, the second round retries. */
        json_object_clear(p->adopted);
        relist(c, c->k_sb, &p->sandboxes);
    }
}

static void pass_free(pass *p)
{
    json_decref(p->templates);
    json_decref(p->pools);
    json_decref(p->claims);
    json_decref(p->sandboxes);
    json_decref(p->adopted);
    json_decref(p->claim_after);
    json_decref(p->sandbox_after);
}

static int kind_index(const local_controller *c, const api_kind *k)
{
    return k == c->k_tpl ? 0 : k == c->k_pool ? 1 : k == c->k_claim ? 2 : k == c->k_sb ? 3 : -1;
}

/* The cache's key of an object: "namespace/name". */
static void cache_key(char key[512], const char *ns, const char *name)
{
    snprintf(key, 512, "%s/%s", ns ?: "", name ?: "");
}

static void cache_apply(local_controller *c, const store_event *e)
{
    int i = kind_index(c, e->kind);
    if (i < 0)
        return;
    char key[512];
    cache_key(key, api_meta_string(e->object, "namespace"), api_meta_string(e->object, "name"));
    json_t *cur = json_object_get(c->cache[i], key);
    if (cur && api_meta_rv(cur) > e->rv)
        return; /* a list taken after this event already has a newer state */
    pthread_mutex_lock(&c->cache_lock);
    if (e->type == STORE_DELETED)
        json_object_del(c->cache[i], key);
    else
        json_object_set(c->cache[i], key, e->object); /* shared, never modified */
    const char *uid = api_meta_string(e->object, "uid");
    json_t *t = uid && i == 3 ? json_object_get(c->taken, uid) : NULL;
    if (t && (e->type == STORE_DELETED || e->rv >= (uint64_t)json_integer_value(t)))
        json_object_del(c->taken, uid);
    pthread_mutex_unlock(&c->cache_lock);
}

/* Replaces the cache with fresh lists. */
static int cache_reload(local_controller *c)
{
    const api_kind *kinds[4] = {c->k_tpl, c->k_pool, c->k_claim, c->k_sb};
    for (size_t i = 0; i < 4; i++) {
        json_t *items = NULL, *map = json_object();
        if (!map || relist(c, kinds[i], &items) < 0) {
            json_decref(map);
            return -ENOMEM;
        }
        size_t j;
        json_t *o;
        json_array_foreach (items, j, o) {
            char key[512];
            cache_key(key, api_meta_string(o, "namespace"), api_meta_string(o, "name"));
            json_object_set(map, key, o);
        }
        json_decref(items);
        pthread_mutex_lock(&c->cache_lock);
        json_t *old = c->cache[i];
        c->cache[i] = map;
        pthread_mutex_unlock(&c->cache_lock);
        json_decref(old);
    }
    return 0;
}

static json_t *cache_items(const json_t *map)
{
    json_t *a = json_array();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)map, k, v)
        json_array_append(a, v);
    return a;
}

/* One level-triggered pass over everything, from the cache. Returns the requeue delay (0 =
 * none). */
static usec_t run_pass(local_controller *c)
{
    usec_t start = now_usec(CLOCK_MONOTONIC);
    pass p = {cache_items(c->cache[0]),
              cache_items(c->cache[1]),
              cache_items(c->cache[2]),
              cache_items(c->cache[3]),
              json_object(),
              0,
              NULL,
              NULL};
    if (!p.templates || !p.pools || !p.claims || !p.sandboxes || !p.adopted) {
        pass_free(&p);
        local_metrics_reconcile("claims", (double)(now_usec(CLOCK_MONOTONIC) - start) / 1e6, true);
        return USEC_PER_SEC;
    }
    /* Within a pass, after our own changes, sandboxes are read from the store again. */
    if (collect_garbage(c, &p))
        relist(c, c->k_sb, &p.sandboxes);
    reconcile_templates(c, &p);
    /* Claims that can adopt a Ready member do so first, in one batch, not behind the commits
     * of the pools' replacements; in a pass that adopted nothing the pools refill and then
     * every other claim runs, as before (one that waits for a member sees the replacements
     * and does not start a cold sandbox). */
    reconcile_claims(c, &p, true);
    usec_t now = now_usec(CLOCK_MONOTONIC), quiet_at = local_claim_activity_until();
    if (json_object_size(p.adopted) > 0) {
        /* A burst: more claims are likely queued behind these (their creates committed while
         * this pass ran). The next pass adopts them at once; the pools' refill and the
         * claims that cannot adopt wait for the first pass that adopts nothing, which comes
         * as soon as the burst's claims are served or the pool is empty. */
        requeue(&p, 1);
    } else {
        /* Claims were just served (adopted in their own create, or by a pass): the pools'
         * replacements (commits, then `runc run`) wait until the claims' first requests and
         * Executes are done, then refill (local-claim-activity.h). */
        if (quiet_at > now && !c->refill_held_since)
            c->refill_held_since = now;
        bool hold = quiet_at > now &&
                    now - c->refill_held_since < LOCAL_CLAIM_ACTIVITY_MAX_HOLD_USEC;
        if (hold) /* never held longer than that: a steady stream of claims must not drain it */
            requeue(&p, (int64_t)MIN(quiet_at - now, c->refill_held_since +
                                                         LOCAL_CLAIM_ACTIVITY_MAX_HOLD_USEC - now));
        else
            c->refill_held_since = 0;
        /* The pools' status is written either way: readyReplicas says what is Ready now. */
        if (reconcile_pools(c, &p, hold))
            relist(c, c->k_sb, &p.sandboxes);
        reconcile_claims(c, &p, false);
    }
    usec_t rq = p.requeue;
    pass_free(&p);
    local_metrics_reconcile("claims", (double)(now_usec(CLOCK_MONOTONIC) - start) / 1e6, false);
    return rq;
}

static void *controller_thread(void *arg)
{
    local_controller *c = arg;
    uint64_t rv = local_store_current_rv(c->store);
    while (cache_reload(c) < 0 && !local_store_is_shutdown(c->store))
        usleep(100000);
    /* The requeue is counted from the pass that asked for it: events of kinds this controller
     * does not watch (Events, snapshots) wake the wait but must not push an expiry back. */
    usec_t rq = run_pass(c), passed = now_usec(CLOCK_MONOTONIC);
    for (;;) {
        usec_t deadline = passed + (rq ? MIN(rq, RESYNC_INTERVAL) : RESYNC_INTERVAL);
        store_event **evs = NULL;
        int n = local_store_wait(c->store, rv, deadline, &evs);
        if (n == -ESHUTDOWN)
            break;
        bool run = n == 0 || n == -ESTALE;
        if (n == -ESTALE || (n == 0 && now_usec(CLOCK_MONOTONIC) >= passed + RESYNC_INTERVAL)) {
            /* Fell behind the watch window, or a quiet resync: start from fresh lists. */
            rv = local_store_current_rv(c->store);
            cache_reload(c);
        }
        for (int i = 0; i < n; i++) {
            rv = MAX(rv, evs[i]->rv);
            if (kind_index(c, evs[i]->kind) >= 0) {
                /* A claim arrived: the pools' refill starts wait for the burst's adoptions. */
                if (evs[i]->kind == c->k_claim && evs[i]->type == STORE_ADDED)
                    local_claim_activity_mark();
                cache_apply(c, evs[i]);
                run = true;
            }
        }
        if (n > 0)
            store_events_free(evs, (size_t)n);
        if (n < 0 && n != -ESTALE) {
            usleep(10000);
            continue;
        }
        if (run) {
            /* Our own writes wake us again; a pass over a converged state writes nothing. */
            rq = run_pass(c);
            passed = now_usec(CLOCK_MONOTONIC);
        }
    }
    return NULL;
}

/* Under cache_lock: the cached object "ns/name" of kind index i (a new reference), or NULL. */
static json_t *cache_get_locked(local_controller *c, int i, const char *ns, const char *name)
{
    char key[512];
    if (!ns || !name || !c->cache[i])
        return NULL;
    cache_key(key, ns, name);
    return json_incref(json_object_get(c->cache[i], key));
}

/* A member reserved by a planned adoption: no other create picks it until the plan ran. */
#define TAKEN_RESERVED ((json_int_t)INT64_MAX)

struct local_claim_adoption {
    pass p;
    reconcile_claim_out out;
    const json_t *claim;
    char *member_uid; /* reserved in c->taken */
};

static void release_member(local_controller *c, local_claim_adoption *a, const json_t *after)
{
    pthread_mutex_lock(&c->cache_lock);
    if (after) /* adopted: skipped until the cache shows this version */
        json_object_set_new(c->taken, a->member_uid, json_integer((json_int_t)api_meta_rv(after)));
    else
        json_object_del(c->taken, a->member_uid);
    pthread_mutex_unlock(&c->cache_lock);
}

/* Under cache_lock: the cached sandbox has been taken by an adoption at an earlier create (or
 * is reserved by a planned one) that the cache does not show yet. */
static bool taken_locked(local_controller *c, const json_t *sb)
{
    json_t *t = json_object_get(c->taken, api_meta_string(sb, "uid") ?: "");
    return t && api_meta_rv(sb) < (uint64_t)json_integer_value(t);
}

/* What a pass would know about one new claim, from the cache, narrowed to the member the core
 * would adopt (reserved in c->taken, so concurrent creates each get their own) and a Sandbox of
 * the claim's own name (the core refuses to adopt for a claim whose name a foreign Sandbox
 * holds). False when there is no member to adopt. */
static bool claim_pass_from_cache(local_controller *c, const json_t *claim, pass *p,
                                  char **ret_member_uid)
{
    const char *ns = api_meta_string(claim, "namespace");
    const char *cname = api_meta_string(claim, "name");
    const char *pname = json_string_value(json_object_get(
        json_object_get(json_object_get(claim, "spec"), "warmPoolRef"), "name"));
    *p = (pass){json_array(), json_array(), json_array(), json_array(), json_object(), 0, NULL,
                NULL};
    _cleanup_json_ json_t *members = json_array();
    if (!p->templates || !p->pools || !p->claims || !p->sandboxes || !p->adopted || !members)
        return false;
    json_array_append(p->claims, (json_t *)claim);
    const json_t *pick = NULL;
    pthread_mutex_lock(&c->cache_lock);
    json_t *pool = cache_get_locked(c, 1, ns, pname);
    if (pool) {
        const char *tname = json_string_value(json_object_get(
            json_object_get(json_object_get(pool, "spec"), "sandboxTemplateRef"), "name"));
        json_array_append_new(p->pools, pool);
        json_t *tpl = cache_get_locked(c, 0, ns, tname);
        if (tpl)
            json_array_append_new(p->templates, tpl);
        const char *k;
        json_t *sb;
        json_object_foreach (c->cache[3], k, sb) {
            if (same_str(api_meta_string(sb, "namespace"), ns) &&
                same_str(api_meta_string(sb, "name"), cname))
                json_array_append(p->sandboxes, sb);
            else if (reconcile_pool_member(pool, sb) && !taken_locked(c, sb))
                json_array_append(members, sb);
        }
        reconcile_claim_in in = claim_input(c, claim, pool, tpl, members);
        pick = reconcile_claim_warm_pick(&in);
        const char *uid = api_meta_string(pick, "uid");
        if (uid && (*ret_member_uid = strdup(uid)) &&
            json_object_set_new(c->taken, uid, json_integer(TAKEN_RESERVED)) == 0)
            json_array_append(p->sandboxes, (json_t *)pick);
        else
            pick = NULL;
    }
    pthread_mutex_unlock(&c->cache_lock);
    return pick != NULL;
}

static void adoption_free(local_claim_adoption *a)
{
    reconcile_claim_out_done(&a->out);
    pass_free(&a->p);
    free(a->member_uid);
    free(a);
}

local_claim_adoption *local_controller_plan_adoption(local_controller *c, const json_t *claim)
{
    local_claim_adoption *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->claim = claim;
    if (!claim_pass_from_cache(c, claim, &a->p, &a->member_uid)) {
        local_controller_drop_adoption(c, a);
        return NULL;
    }
    reconcile_claim_in in = claim_input(c, claim, json_array_get(a->p.pools, 0),
                                        json_array_get(a->p.templates, 0), a->p.sandboxes);
    if (reconcile_claim(&in, &a->out) < 0 || a->out.action != RECONCILE_CLAIM_ADOPT) {
        local_controller_drop_adoption(c, a);
        return NULL;
    }
    return a;
}

int local_controller_adopt_planned(local_controller *c, local_claim_adoption *a,
                                   json_t **ret_claim)
{
    /* The store's optimistic lock (the member's resourceVersion) settles a race with the
     * controller's own pass: on a conflict nothing is written and the pass serves the claim. */
    int r = execute_claim(c, &a->p, a->claim, &a->out);
    if (r == 0)
        claim_executed(c, &a->p, a->claim, &a->out);
    bool adopted = r == 0 && a->p.claim_after && a->p.sandbox_after;
    release_member(c, a, adopted ? a->p.sandbox_after : NULL);
    *ret_claim = adopted ? json_incref(a->p.claim_after) : NULL;
    adoption_free(a);
    return adopted ? 1 : 0;
}

void local_controller_drop_adoption(local_controller *c, local_claim_adoption *a)
{
    if (!a)
        return;
    if (a->member_uid)
        release_member(c, a, NULL);
    adoption_free(a);
}

static char **split_domains(const char *s)
{
    if (!s || !*s)
        return NULL;
    size_t n = 1;
    for (const char *q = s; *q; q++)
        n += *q == ',' || *q == '\n';
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return NULL;
    size_t k = 0;
    const char *q = s;
    while (*q) {
        size_t len = strcspn(q, ",\n");
        while (len > 0 && (*q == ' ' || *q == '\t')) {
            q++;
            len--;
        }
        while (len > 0 && (q[len - 1] == ' ' || q[len - 1] == '\t'))
            len--;
        if (len > 0 && (v[k] = strndup(q, len))) {
            for (char *x = v[k]; *x; x++)
                *x = (char)(*x >= 'A' && *x <= 'Z' ? *x + 32 : *x);
            k++;
        }
        q += strcspn(q, ",\n");
        if (*q)
            q++;
    }
    return v;
}

int local_controller_start(const local_controller_options *o, local_controller **ret)
{
    local_controller *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->cache_lock, NULL);
    c->taken = json_object();
    if (!c->taken) {
        free(c);
        return -ENOMEM;
    }
    c->store = o->store;
    c->grace = o->readiness_grace;
    c->domains = split_domains(o->label_domains);
    c->k_sb = api_kind_by_plural(API_GROUP_CORE, "sandboxes");
    c->k_tpl = api_kind_by_plural(API_GROUP_EXT, "sandboxtemplates");
    c->k_pool = api_kind_by_plural(API_GROUP_EXT, "sandboxwarmpools");
    c->k_claim = api_kind_by_plural(API_GROUP_EXT, "sandboxclaims");
    if (!c->k_sb || !c->k_tpl || !c->k_pool || !c->k_claim) {
        local_controller_stop(c);
        return -EINVAL;
    }
    int k = pthread_create(&c->thread, NULL, controller_thread, c);
    if (k != 0) {
        local_controller_stop(c);
        return -k;
    }
    c->started = true;
    *ret = c;
    return 0;
}

local_controller *local_controller_stop(local_controller *c)
{
    if (!c)
        return NULL;
    if (c->started)
        pthread_join(c->thread, NULL);
    for (size_t i = 0; c->domains && c->domains[i]; i++)
        free(c->domains[i]);
    for (size_t i = 0; i < 4; i++)
        json_decref(c->cache[i]);
    json_decref(c->taken);
    pthread_mutex_destroy(&c->cache_lock);
    free(c->domains);
    free(c);
    return NULL;
}
