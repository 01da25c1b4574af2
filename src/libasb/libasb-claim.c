/* SandboxClaim client (spec §5.1): claim from a warm pool, wait for Ready on a watch (no
 * polling), roll back on failure, attach, disconnect vs close, lifecycle extension. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "asb/claim.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "libasb/libasb-claim-internal.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

#define DEFAULT_READY_TIMEOUT_MS 180000L
#define CLAIM_ANN_SANDBOX_NAME "agents.x-k8s.io/sandbox-name"
#define CLAIM_ANN_REQUESTED_AT "agents.x-k8s.io/client-first-requested-at"
#define CLAIM_LABEL_CREATED_BY "agents.x-k8s.io/created-by"
#define WAIT_MET 1

struct asb_claim {
    char *ns, *name, *sandbox_name;
    char *sandbox_uid; /* from the create's Asb-Claim-Sandbox header, or NULL */
    long long ready_usec;
    asb_sandbox *sandbox;
    asb_handle *handle;
    int registered;
};

void asbi_rfc3339(char out[40], long long add_seconds, int nanos)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t t = ts.tv_sec + (time_t)add_seconds;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    if (nanos)
        snprintf(out + n, 40 - n, ".%09ldZ", ts.tv_nsec);
    else
        snprintf(out + n, 40 - n, "Z");
}

/* The terminal Ready reasons of §2.8 (SDKs stop waiting on them), and a pool or template that
 * does not exist: the controller keeps looking (it may be created later), but a client waiting
 * for the claim stops at once and says so rather than wait for its timeout. */
int asbi_claim_reason_terminal(const char *reason)
{
    static const char *const terminal[] = {"InvalidMetadata", "EnvVarsInjectionRejected",
                                           "VolumeClaimTemplatesError", "ClaimExpired",
                                           "SandboxExpired", "WarmPoolNotFound",
                                           "TemplateNotFound"};
    for (size_t i = 0; reason && i < sizeof(terminal) / sizeof(terminal[0]); i++)
        if (strcmp(reason, terminal[i]) == 0)
            return 1;
    return 0;
}

const char *asbi_claim_bound_sandbox(const json_t *claim)
{
    const char *sn = json_string_value(
        json_object_get(json_object_get(json_object_get(claim, "status"), "sandbox"), "name"));
    if (sn && *sn)
        return sn;
    sn = json_string_value(
        json_object_get(json_object_get(json_object_get(claim, "metadata"), "annotations"),
                        CLAIM_ANN_SANDBOX_NAME));
    return sn && *sn ? sn : NULL;
}

typedef struct ready_wait {
    const char *name;
    char *sandbox_name;
    char last[512]; /* the last Ready condition seen, for the timeout message */
    const asb_claim_options *opts; /* its progress callback (version >= 2), or NULL */
} ready_wait;

/* 0: keep waiting; WAIT_MET: Ready with a sandbox; an error: terminal. Pure (unit-tested). */
int asbi_claim_check(const json_t *claim, char **ret_sandbox, char *last, size_t last_size)
{
    const json_t *c = asbi_find_condition(claim, "Ready");
    const char *st = json_string_value(json_object_get(c, "status"));
    const char *reason = json_string_value(json_object_get(c, "reason"));
    const char *msg = json_string_value(json_object_get(c, "message"));
    const char *name =
        json_string_value(json_object_get(json_object_get(claim, "metadata"), "name"));
    if (last && c)
        snprintf(last, last_size, "Ready=%s %s: %s", st ? st : "?", reason ? reason : "",
                 msg ? msg : "");
    const char *sn = asbi_claim_bound_sandbox(claim);
    if (st && strcasecmp(st, "True") == 0 && sn && asbi_condition_met(claim, "Ready", "True")) {
        if (ret_sandbox && !(*ret_sandbox = strdup(sn)))
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        return WAIT_MET;
    }
    if (st && strcasecmp(st, "False") == 0 && asbi_claim_reason_terminal(reason))
        return asbi_error_set(ASB_ECLAIMFAILED, 0, reason, "claim %s failed: %s: %s",
                              name ? name : "", reason, msg ? msg : "");
    return 0;
}

int asbi_claim_parse_bound(const char *value, char **ret_name, char **ret_uid)
{
    char name[256], uid[64];
    if (!value || sscanf(value, "name=%255[^; ]; uid=%63[^; ]", name, uid) != 2)
        return 0;
    if (!(*ret_name = strdup(name)) || !(*ret_uid = strdup(uid))) {
        free(*ret_name);
        *ret_name = NULL;
        return -ENOMEM;
    }
    return 1;
}

/* Checks one state of the claim and reports a changed Ready condition: 0, WAIT_MET or an error. */
static int observe_claim(ready_wait *w, const json_t *obj)
{
    char before[sizeof(w->last)];
    memcpy(before, w->last, sizeof(before));
    int r = asbi_claim_check(obj, &w->sandbox_name, w->last, sizeof(w->last));
    const asb_claim_options *o = w->opts;
    if (r == 0 && o && o->version >= 2 && o->progress && w->last[0] &&
        strcmp(before, w->last) != 0)
        o->progress(w->name, w->last, o->progress_payload);
    return r;
}

static int claim_deleted(const ready_wait *w)
{
    return asbi_error_set(ASB_ECLAIMFAILED, 0, "ClaimDeleted",
                          "claim %s was deleted while waiting for it to be ready", w->name);
}

static int on_claim_event(const char *type, json_t *obj, void *payload)
{
    ready_wait *w = payload;
    if (strcmp(type, "DELETED") == 0)
        return claim_deleted(w);
    if (strcmp(type, "ADDED") != 0 && strcmp(type, "MODIFIED") != 0)
        return 0;
    return observe_claim(w, obj);
}

/* Waits on a watch until the claim is Ready. It starts from `seen` (the claim as its create
 * answered it; NULL: read it first) and watches from that state's resourceVersion, so a change
 * between the read and the watch -- the claim's deletion too -- is an event of the watch. When
 * the server ends the stream, or our resourceVersion has left its window, it reads again. */
static int wait_ready(asb_client *c, const char *ns, const char *name, json_t *seen,
                      long timeout_ms, const asb_claim_options *o, char **ret_sandbox)
{
    const asb_kind *k;
    int r = asb_kind_lookup(&k, "SandboxClaim");
    if (r != ASB_OK)
        return r;
    const volatile int *cancel = o ? o->cancel : NULL;
    ready_wait w = {.name = name, .opts = o};
    json_t *obj = json_incref(seen);
    long long deadline = (long long)now_usec(CLOCK_MONOTONIC) + (long long)timeout_ms * 1000;
    for (;;) {
        if (!obj) {
            r = asbi_object_get_json(&obj, c, k->plural, ns, name);
            if (r == ASB_ENOTFOUND)
                r = claim_deleted(&w);
            if (r != ASB_OK)
                break;
        }
        r = observe_claim(&w, obj);
        if (r != 0)
            break;
        long left = (long)((deadline - (long long)now_usec(CLOCK_MONOTONIC)) / 1000);
        if (left <= 0) {
            r = ASB_ETIMEOUT;
            break;
        }
        asbi_watch_params p = {
            .name = name,
            .resource_version = json_string_value(
                json_object_get(json_object_get(obj, "metadata"), "resourceVersion")),
            .timeout_ms = left,
            .cancel = cancel,
        };
        r = asbi_watch(c, k, ns, &p, on_claim_event, &w);
        json_decref(obj);
        obj = NULL;
        if (r != ASB_OK && r != ASB_EEXPIRED)
            break; /* ASB_OK: the server ended the stream; read and watch again */
    }
    json_decref(obj);
    if (r == WAIT_MET) {
        *ret_sandbox = w.sandbox_name;
        return ASB_OK;
    }
    free(w.sandbox_name);
    if (r == ASB_ETIMEOUT)
        return asbi_error_set(ASB_ETIMEOUT, 0, NULL,
                              "claim %s/%s not ready after %ld ms (last condition: %s)", ns, name,
                              timeout_ms, w.last[0] ? w.last : "none");
    return r;
}

static asb_claim *claim_free(asb_claim *cl)
{
    if (!cl)
        return NULL;
    asb_handle_free(cl->handle);
    asb_sandbox_free(cl->sandbox);
    free(cl->ns);
    free(cl->name);
    free(cl->sandbox_name);
    free(cl->sandbox_uid);
    free(cl);
    return NULL;
}

static int check_opts(const asb_claim_options *o)
{
    if (o && (o->version == 0 || o->version > ASB_CLAIM_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_claim_options: unknown version %u",
                              o->version);
    if (o && (o->ready_timeout_ms < 0 || o->ttl_seconds < 0))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_claim_options: negative value");
    if (o && o->data_plane != ASB_DATA_PLANE_LOCAL && o->data_plane != ASB_DATA_PLANE_ROUTER)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_claim_options: unknown data_plane %d",
                              o->data_plane);
    return ASB_OK;
}

/* Opens the data-plane handle of a ready claim. */
static int claim_connect(asb_claim *cl, asb_client *client, const asb_claim_options *o,
                         long long deadline_usec)
{
    if (o && o->no_connect)
        return ASB_OK;
    const asb_sandbox_options *so = o ? o->sandbox_options : NULL;
    int r;
    if (o && o->data_plane == ASB_DATA_PLANE_ROUTER)
        r = o->router_url
                ? asb_sandbox_open_router(&cl->sandbox, o->router_url, client->token, cl->ns,
                                          cl->sandbox_name, so)
                : asb_sandbox_open_via_router(&cl->sandbox, client, cl->ns, cl->sandbox_name, so);
    else {
        /* Ready in our own create: the sandbox was Ready in that transaction, its uid names its
         * sockets, so there is nothing to read first. */
        _cleanup_free_ char *rest = NULL, *grpc = NULL;
        r = cl->sandbox_uid && asbi_sandbox_socket_paths(client->state_dir, cl->sandbox_uid, &rest,
                                                         &grpc) == ASB_OK
                ? asb_sandbox_open_sockets(&cl->sandbox, rest, grpc, so)
                : asb_sandbox_open(&cl->sandbox, client, cl->ns, cl->sandbox_name, so);
        if (r == ASB_ECONFLICT) {
            /* The claim forwarded Ready, but the Sandbox's own condition is about an older
             * generation (adoption rewrote its metadata): wait for it on a watch, as the Go SDK
             * watches the Sandbox after the claim, until it settles (Ready, or finished or
             * stopped: then the open below says why at once). */
            long left = (long)((deadline_usec - (long long)now_usec(CLOCK_MONOTONIC)) / 1000);
            asb_wait_options wo = ASB_WAIT_OPTIONS_INIT;
            wo.timeout_ms = left > 0 ? left : 1;
            wo.cancel = o ? o->cancel : NULL;
            r = asb_sandbox_wait_settled(NULL, client, cl->ns, cl->sandbox_name, &wo);
            if (r == ASB_OK)
                r = asb_sandbox_open(&cl->sandbox, client, cl->ns, cl->sandbox_name, so);
        }
    }
    if (r == ASB_OK)
        r = asb_handle_from_sandbox(&cl->handle, cl->sandbox, 0);
    return r;
}

static char *claim_manifest(const char *pool, const asb_claim_options *o)
{
    char now[40], shutdown[40];
    asbi_rfc3339(now, 0, 1);
    json_t *md = json_pack("{s:{s:s},s:{s:s}}", "labels", CLAIM_LABEL_CREATED_BY, "libasb",
                           "annotations", CLAIM_ANN_REQUESTED_AT, now);
    if (!md)
        return NULL;
    if (o && o->name && *o->name)
        json_object_set_new(md, "name", json_string(o->name));
    else
        json_object_set_new(md, "generateName", json_string("sandbox-claim-"));
    json_t *spec = json_pack("{s:{s:s}}", "warmPoolRef", "name", pool);
    if (spec && o && o->ttl_seconds > 0) {
        asbi_rfc3339(shutdown, o->ttl_seconds, 0);
        json_t *lc = json_pack("{s:s}", "shutdownTime", shutdown);
        if (lc && o->shutdown_policy)
            json_object_set_new(lc, "shutdownPolicy", json_string(o->shutdown_policy));
        json_object_set_new(spec, "lifecycle", lc);
    }
    json_t *obj =
        json_pack("{s:s,s:s,s:o,s:o*}", "apiVersion", "extensions.agents.x-k8s.io/v1beta1", "kind",
                  "SandboxClaim", "metadata", md, "spec", spec);
    char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    return s;
}

/* The claim of a create's answer (*ret owned, with its namespace and name; *ret_obj: the answer
 * parsed, owned, to wait from). */
static int created_claim(const char *text, const char *ns, asb_claim **ret, json_t **ret_obj)
{
    json_t *obj = json_loads(text, 0, NULL);
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    asb_claim *cl = calloc(1, sizeof(*cl));
    int r = ASB_OK;
    if (!cl || !name || !(cl->ns = strdup(ns)) || !(cl->name = strdup(name))) {
        r = name ? asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory")
                 : asbi_error_set(ASB_EPROTOCOL, 0, NULL, "created claim has no name");
        claim_free(cl);
        cl = NULL;
        json_decref(obj);
        obj = NULL;
    }
    *ret = cl;
    *ret_obj = obj;
    return r;
}

ASB_PUBLIC int asb_claim_create(asb_claim **out, asb_client *client, const char *ns,
                                const char *pool, const asb_claim_options *o)
{
    if (!out || !client || !pool || !*pool)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_claim_create: NULL out, client or pool");
    *out = NULL;
    int r = check_opts(o);
    if (r != ASB_OK)
        return r;
    ns = ns && *ns ? ns : "default";
    long long t0 = (long long)now_usec(CLOCK_MONOTONIC);
    char *manifest = claim_manifest(pool, o), *text = NULL;
    if (!manifest)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    _cleanup_free_ char *bound = NULL;
    asb_claim *cl = NULL;
    json_t *created = NULL;
    /* From the POST until the claim is registered, a signal's cleanup waits for it: the server
     * may have created it before we know its (generated) name. */
    bool auto_cleanup = o && o->auto_cleanup;
    if (auto_cleanup)
        asbi_claims_create_begin();
    r = asbi_object_create_claim(&text, &bound, client, ns, manifest);
    free(manifest);
    if (r == ASB_OK)
        r = created_claim(text, ns, &cl, &created);
    asb_free(text);
    if (r == ASB_OK && auto_cleanup) {
        r = asbi_claims_register(client, cl->ns, cl->name);
        cl->registered = r == ASB_OK;
    }
    if (auto_cleanup)
        asbi_claims_create_end();
    if (r != ASB_OK && !cl)
        return r;
    if (r != ASB_OK)
        goto rollback;
    /* asb serve adopts a Ready warm member in the create itself and says which in a header:
     * then no watch is needed. */
    int now = asbi_claim_parse_bound(bound, &cl->sandbox_name, &cl->sandbox_uid);
    if (now < 0) {
        r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto rollback;
    }
    long tmo = o && o->ready_timeout_ms > 0 ? o->ready_timeout_ms : DEFAULT_READY_TIMEOUT_MS;
    r = now ? ASB_OK : wait_ready(client, cl->ns, cl->name, created, tmo, o, &cl->sandbox_name);
    json_decref(created);
    created = NULL;
    if (r != ASB_OK)
        goto rollback;
    cl->ready_usec = (long long)now_usec(CLOCK_MONOTONIC) - t0;
    r = claim_connect(cl, client, o, t0 + (long long)tmo * 1000);
    if (r != ASB_OK)
        goto rollback;
    *out = cl;
    return ASB_OK;
rollback:;
    json_decref(created);
    /* Keep the first error for the caller: the delete must not overwrite it. */
    const asb_error *e = asb_error_last();
    char *msg = e && e->message ? strdup(e->message) : NULL;
    char *reason = e && e->reason && *e->reason ? strdup(e->reason) : NULL;
    int http = e ? e->http_status : 0;
    int d = asb_object_delete(NULL, client, "SandboxClaim", cl->ns, cl->name);
    if (d != ASB_OK && d != ASB_ENOTFOUND)
        asbi_log(client, ASB_LOG_WARNING, "rolling back claim %s/%s failed; it is orphaned", cl->ns,
                 cl->name);
    if (cl->registered)
        asbi_claims_unregister(cl->ns, cl->name);
    asbi_error_set(r, http, reason, "%s", msg ? msg : asb_strerror(r));
    free(msg);
    free(reason);
    claim_free(cl);
    return r;
}

ASB_PUBLIC int asb_claim_attach(asb_claim **out, asb_client *client, const char *ns,
                                const char *name, const asb_claim_options *o)
{
    if (!out || !client || !name || !*name)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_claim_attach: NULL out, client or name");
    *out = NULL;
    int r = check_opts(o);
    if (r != ASB_OK)
        return r;
    ns = ns && *ns ? ns : "default";
    long long t0 = (long long)now_usec(CLOCK_MONOTONIC);
    asb_claim *cl = calloc(1, sizeof(*cl));
    if (!cl || !(cl->ns = strdup(ns)) || !(cl->name = strdup(name))) {
        claim_free(cl);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    /* A plain get first: an unknown claim is ASB_ENOTFOUND, not a wait. */
    json_t *seen = NULL;
    r = asbi_object_get_json(&seen, client, "SandboxClaim", ns, name);
    long tmo = o && o->ready_timeout_ms > 0 ? o->ready_timeout_ms : DEFAULT_READY_TIMEOUT_MS;
    if (r == ASB_OK)
        r = wait_ready(client, ns, name, seen, tmo, o, &cl->sandbox_name);
    json_decref(seen);
    if (r == ASB_OK) {
        cl->ready_usec = (long long)now_usec(CLOCK_MONOTONIC) - t0;
        r = claim_connect(cl, client, o, t0 + (long long)tmo * 1000);
    }
    if (r == ASB_OK && o && o->auto_cleanup)
        cl->registered = asbi_claims_register(client, ns, name) == ASB_OK;
    if (r != ASB_OK) {
        claim_free(cl);
        return r;
    }
    *out = cl;
    return ASB_OK;
}

ASB_PUBLIC const char *asb_claim_name(const asb_claim *cl)
{
    return cl ? cl->name : NULL;
}

ASB_PUBLIC const char *asb_claim_namespace(const asb_claim *cl)
{
    return cl ? cl->ns : NULL;
}

ASB_PUBLIC const char *asb_claim_sandbox_name(const asb_claim *cl)
{
    return cl ? cl->sandbox_name : NULL;
}

ASB_PUBLIC const char *asb_claim_sandbox_uid(const asb_claim *cl)
{
    return cl ? cl->sandbox_uid : NULL;
}

ASB_PUBLIC long long asb_claim_ready_usec(const asb_claim *cl)
{
    return cl ? cl->ready_usec : 0;
}

ASB_PUBLIC asb_sandbox *asb_claim_sandbox(asb_claim *cl)
{
    return cl ? cl->sandbox : NULL;
}

ASB_PUBLIC asb_handle *asb_claim_handle(asb_claim *cl)
{
    return cl ? cl->handle : NULL;
}

ASB_PUBLIC int asb_lifecycle_extend(asb_client *client, const char *kind, const char *ns,
                                    const char *name, long ttl_seconds, const char *shutdown_policy)
{
    const asb_kind *k;
    if (!client || !kind || !name || !*name || ttl_seconds < 0)
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "asb_lifecycle_extend: NULL client, kind or name, or negative ttl");
    int r = asb_kind_lookup(&k, kind);
    if (r != ASB_OK)
        return r;
    int is_claim = strcmp(k->kind, "SandboxClaim") == 0;
    if (!is_claim && strcmp(k->kind, "Sandbox") != 0)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "%s has no lifecycle", k->kind);
    char when[40];
    asbi_rfc3339(when, ttl_seconds, 0);
    json_t *lc = json_pack("{s:s}", "shutdownTime", when);
    if (lc && shutdown_policy)
        json_object_set_new(lc, "shutdownPolicy", json_string(shutdown_policy));
    json_t *patch =
        is_claim ? json_pack("{s:{s:o}}", "spec", "lifecycle", lc) : json_pack("{s:o}", "spec", lc);
    char *s = patch ? json_dumps(patch, JSON_COMPACT) : NULL;
    json_decref(patch);
    if (!s)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    r = asb_object_patch(NULL, client, k->kind, ns, name, s, 0);
    free(s);
    return r;
}

ASB_PUBLIC int asb_claim_extend(asb_claim *cl, asb_client *client, long ttl_seconds,
                                const char *shutdown_policy)
{
    if (!cl)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_claim_extend: NULL claim");
    return asb_lifecycle_extend(client, "SandboxClaim", cl->ns, cl->name, ttl_seconds,
                                shutdown_policy);
}

ASB_PUBLIC void asb_claim_disconnect(asb_claim *cl)
{
    if (cl && cl->registered)
        asbi_claims_unregister(cl->ns, cl->name);
    claim_free(cl);
}

ASB_PUBLIC int asb_claim_close(asb_claim *cl, asb_client *client)
{
    if (!cl)
        return ASB_OK;
    if (!client) {
        asb_claim_disconnect(cl);
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_claim_close: NULL client");
    }
    /* Transport first (no call can be in flight: a claim is used from one thread). */
    asb_handle_free(cl->handle);
    asb_sandbox_free(cl->sandbox);
    cl->handle = NULL;
    cl->sandbox = NULL;
    int r = asb_object_delete(NULL, client, "SandboxClaim", cl->ns, cl->name);
    if (r == ASB_ENOTFOUND)
        r = ASB_OK;
    asb_claim_disconnect(cl);
    return r;
}
