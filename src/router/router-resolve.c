/* Target resolution: the template resolver (cluster DNS or a socket path pattern) and the
 * control-plane resolver (Sandbox name -> metadata.uid -> sandboxd's unix sockets, resuming a
 * suspended sandbox on the way). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "asb/client.h"
#include "asb/sandbox.h"
#include "basic/macro.h"
#include "basic/state-files.h"
#include "basic/time-util.h"
#include "router/router-internal.h"
#include "shared/log.h"

/* ---- template ---- */

typedef struct tmpl_resolver {
    router_resolver base;
    char *tmpl;
} tmpl_resolver;

/* Two passes (length, then bytes): no stdio stream per expansion (it was the router's most
 * expensive step per request). */
static size_t expand_into(const char *tmpl, const char *ns, const char *id, const char *port,
                          const char *sock, char *out)
{
    size_t len = 0;
    for (const char *p = tmpl; *p; p++) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            if (e) {
                size_t n = (size_t)(e - p - 1);
                const char *v = NULL;
                if (n == 2 && strncmp(p + 1, "id", 2) == 0)
                    v = id;
                else if (n == 9 && strncmp(p + 1, "namespace", 9) == 0)
                    v = ns;
                else if (n == 4 && strncmp(p + 1, "port", 4) == 0)
                    v = port;
                else if (n == 6 && strncmp(p + 1, "socket", 6) == 0)
                    v = sock;
                if (v) {
                    size_t vl = strlen(v);
                    if (out)
                        memcpy(out + len, v, vl);
                    len += vl;
                    p = e;
                    continue;
                }
            }
        }
        if (out)
            out[len] = *p;
        len++;
    }
    if (out)
        out[len] = '\0';
    return len;
}

static char *expand(const char *tmpl, const char *ns, const char *id, const char *port,
                    const char *sock)
{
    char *out = malloc(expand_into(tmpl, ns, id, port, sock, NULL) + 1);
    if (out)
        expand_into(tmpl, ns, id, port, sock, out);
    return out;
}

static int tmpl_resolve(router_resolver *base, const char *ns, const char *id, unsigned port,
                        bool nonblock, router_target *out, api_error *err)
{
    tmpl_resolver *r = (tmpl_resolver *)base;
    *out = (router_target){0};
    bool unix_sock = strncmp(r->tmpl, "unix:", 5) == 0;
    if (port && unix_sock) {
        return router_error_port_unix(err, port, id);
    }
    char pnum[8];
    snprintf(pnum, sizeof(pnum), "%u", port);
    out->rest = expand(r->tmpl, ns, id, "8080", "rest");
    out->grpc = expand(r->tmpl, ns, id, "9090", "grpc");
    if (!unix_sock)
        out->legacy = expand(r->tmpl, ns, id, "8888", "legacy");
    if (port)
        out->port = expand(r->tmpl, ns, id, pnum, "port");
    if (!out->rest || !out->grpc || (!unix_sock && !out->legacy) || (port && !out->port)) {
        router_target_done(out);
        return router_error_internal(err, -ENOMEM);
    }
    /* A missing socket shows as a connect failure (502) at the caller. */
    return 0;
}

static void tmpl_invalidate(router_resolver *base, const char *ns, const char *id) {}

static void tmpl_free(router_resolver *base)
{
    tmpl_resolver *r = (tmpl_resolver *)base;
    if (!r)
        return;
    free(r->tmpl);
    free(r);
}

int router_resolver_template_new(const char *tmpl, router_resolver **out)
{
    tmpl_resolver *r = calloc(1, sizeof(*r));
    if (!r || !(r->tmpl = strdup(tmpl))) {
        free(r);
        return -ENOMEM;
    }
    r->base = (router_resolver){tmpl_resolve, tmpl_invalidate, tmpl_free};
    *out = &r->base;
    return 0;
}

/* ---- control plane ---- */

typedef struct cache_entry {
    char *ns, *id, *uid;
    long long expires_ms;
} cache_entry;

typedef struct api_resolver {
    router_resolver base;
    char *server, *token, *state_dir;
    long cache_ms, resume_ms;
    pthread_mutex_t lock;
    cache_entry *v;
    size_t n;
} api_resolver;

/* The pid runc wrote for the sandbox's first process; 0 when there is none (yet). */
static long sandbox_pid(api_resolver *r, const char *uid)
{
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/sandboxes/%s/" SANDBOX_PID_FILE, r->state_dir, uid) < 0)
        return 0;
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    long pid = 0;
    if (!f || fscanf(f, "%ld", &pid) != 1 || pid <= 1)
        return 0;
    return pid;
}

/* check: stat the REST socket (fresh lookups; cached ones learn of a missing socket from the
 * connect failure, which invalidates the entry). port: also the address of that port. */
static int target_from_uid(api_resolver *r, const char *id, const char *uid, unsigned port,
                           bool check, router_target *out, api_error *err)
{
    *out = (router_target){0};
    if (asprintf(&out->rest, "unix:%s/run/%s/rest.sock", r->state_dir, uid) < 0 ||
        asprintf(&out->grpc, "unix:%s/run/%s/grpc.sock", r->state_dir, uid) < 0) {
        router_target_done(out);
        return router_error_internal(err, -ENOMEM);
    }
    if (port) {
        long pid = sandbox_pid(r, uid);
        if (!pid) {
            router_target_done(out);
            return router_error_backend(err, -ENOENT, id);
        }
        if (asprintf(&out->port, "netns:%ld" SANDBOX_CGROUP_PARENT "%s@127.0.0.1:%u", pid, uid,
                     port) < 0) {
            router_target_done(out);
            return router_error_internal(err, -ENOMEM);
        }
    }
    struct stat st;
    if (check && stat(out->rest + 5, &st) < 0) {
        router_target_done(out);
        return router_error_backend(err, -ENOENT, id);
    }
    return 0;
}

static bool cache_lookup(api_resolver *r, const char *ns, const char *id, char **ret_uid)
{
    bool hit = false;
    long long now = now_msec(CLOCK_MONOTONIC);
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].ns, ns) == 0 && strcmp(r->v[i].id, id) == 0) {
            if (r->v[i].expires_ms > now) {
                *ret_uid = strdup(r->v[i].uid);
                hit = *ret_uid != NULL;
            }
            break;
        }
    pthread_mutex_unlock(&r->lock);
    return hit;
}

static void cache_drop_locked(api_resolver *r, const char *ns, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].ns, ns) == 0 && strcmp(r->v[i].id, id) == 0) {
            free(r->v[i].ns);
            free(r->v[i].id);
            free(r->v[i].uid);
            r->v[i] = r->v[--r->n];
            return;
        }
}

static void cache_store(api_resolver *r, const char *ns, const char *id, const char *uid)
{
    if (r->cache_ms <= 0)
        return;
    pthread_mutex_lock(&r->lock);
    cache_drop_locked(r, ns, id);
    long long now = now_msec(CLOCK_MONOTONIC);
    /* Expired entries go first; the cache never grows past what is being used. */
    for (size_t i = 0; i < r->n;) {
        if (r->v[i].expires_ms <= now) {
            free(r->v[i].ns);
            free(r->v[i].id);
            free(r->v[i].uid);
            r->v[i] = r->v[--r->n];
        } else
            i++;
    }
    cache_entry *nv = realloc(r->v, (r->n + 1) * sizeof(*nv));
    if (nv) {
        r->v = nv;
        cache_entry e = {strdup(ns), strdup(id), strdup(uid), now + r->cache_ms};
        if (e.ns && e.id && e.uid)
            r->v[r->n++] = e;
        else {
            free(e.ns);
            free(e.id);
            free(e.uid);
        }
    }
    pthread_mutex_unlock(&r->lock);
}

static void api_invalidate(router_resolver *base, const char *ns, const char *id)
{
    api_resolver *r = (api_resolver *)base;
    pthread_mutex_lock(&r->lock);
    cache_drop_locked(r, ns, id);
    pthread_mutex_unlock(&r->lock);
}

/* The error answer (503) for a sandbox that will not serve as it is (phase: STOPPED,
 * FINISHED_GONE or SUSPENDED again), named after why. Returns -EIO. */
static int not_serving(api_error *err, const char *ns, const char *id, asb_sandbox_phase phase,
                       const char *why)
{
    if (phase == ASB_SANDBOX_FINISHED_GONE)
        api_error_set(err, STATUS_UNAVAILABLE,
                      "Sandbox \"%s\" in namespace \"%s\" has finished and its "
                      "container is gone (%s).",
                      id, ns, why);
    else if (phase == ASB_SANDBOX_SUSPENDED)
        api_error_set(err, STATUS_UNAVAILABLE,
                      "Sandbox \"%s\" in namespace \"%s\" is suspended (%s).", id, ns, why);
    else
        api_error_set(err, STATUS_UNAVAILABLE,
                      "Sandbox \"%s\" in namespace \"%s\" will not become ready "
                      "(%s).",
                      id, ns, why);
    log_info("router: sandbox not served", "sandbox", id, "namespace", ns, "why", why);
    err->err = -EIO;
    return -EIO;
}

static int api_resolve(router_resolver *base, const char *ns, const char *id, unsigned port,
                       bool nonblock, router_target *out, api_error *err)
{
    api_resolver *r = (api_resolver *)base;
    _cleanup_free_ char *uid = NULL;
    if (cache_lookup(r, ns, id, &uid)) {
        if (target_from_uid(r, id, uid, port, false, out, err) == 0)
            return 0;
        api_invalidate(base, ns, id);
    }
    if (nonblock)
        return -EWOULDBLOCK;
    asb_client_options co = ASB_CLIENT_OPTIONS_INIT;
    co.server = r->server;
    co.token = r->token;
    co.state_dir = r->state_dir;
    co.timeout_ms = 10000;
    asb_client *client = NULL;
    if (asb_client_new(&client, &co) != ASB_OK) {
        return router_error_control_plane(err, -EIO, id);
    }
    char *text = NULL, *why = NULL;
    int ret = 0;
    json_t *obj = NULL;
    asb_sandbox_phase phase = ASB_SANDBOX_PENDING;
    int rc = asb_object_get(&text, client, "Sandbox", ns, id);
    if (rc == ASB_ENOTFOUND) {
        ret = router_error_not_found(err, ns, id);
        goto out;
    }
    if (rc != ASB_OK || asb_sandbox_phase_of(&phase, NULL, text) != ASB_OK) {
        ret = router_error_backend(err, -EIO, id);
        goto out;
    }
    if (phase == ASB_SANDBOX_SUSPENDED) {
        /* A request resumes a suspended sandbox: patch it to Running and wait below. */
        if (asb_object_patch(NULL, client, "Sandbox", ns, id,
                             "{\"spec\":{\"operatingMode\":\"Running\"}}", 0) != ASB_OK) {
            ret = router_error_resume(err, -EIO, id);
            goto out;
        }
        log_info("router: resuming sandbox", "sandbox", id, "namespace", ns);
        phase = ASB_SANDBOX_PENDING;
    }
    if (phase == ASB_SANDBOX_PENDING) {
        /* Starting or resuming: wait (watch) until it is Ready or settles otherwise (finished,
         * failed for good, deleted), never for a Ready that will not come. */
        log_info("router: waiting for sandbox", "sandbox", id, "namespace", ns);
        asb_wait_options wo = ASB_WAIT_OPTIONS_INIT;
        wo.timeout_ms = r->resume_ms;
        asb_free(text);
        text = NULL;
        rc = asb_sandbox_wait_settled(&text, client, ns, id, &wo);
        if (rc != ASB_OK) {
            if (rc == ASB_ENOTFOUND)
                ret = router_error_not_found(err, ns, id);
            else
                ret = router_error_backend(err, rc == ASB_ETIMEOUT ? -ETIMEDOUT : -EIO, id);
            goto out;
        }
    }
    if (!text || !(obj = json_loads(text, 0, NULL)) ||
        asb_sandbox_phase_of(&phase, &why, text) != ASB_OK) {
        ret = router_error_backend(err, -EIO, id);
        goto out;
    }
    /* Ready, or Finished with its container kept: sandboxd serves files and exec either way. */
    if (phase != ASB_SANDBOX_READY && phase != ASB_SANDBOX_FINISHED) {
        ret = not_serving(err, ns, id, phase, why);
        goto out;
    }
    const char *u = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    if (!u) {
        ret = router_error_backend(err, -EIO, id);
        goto out;
    }
    ret = target_from_uid(r, id, u, port, true, out, err);
    if (ret == 0)
        cache_store(r, ns, id, u);
out:
    json_decref(obj);
    asb_free(text);
    asb_free(why);
    asb_client_free(client);
    return ret;
}

static void api_free(router_resolver *base)
{
    api_resolver *r = (api_resolver *)base;
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].ns);
        free(r->v[i].id);
        free(r->v[i].uid);
    }
    free(r->v);
    free(r->server);
    free(r->token);
    free(r->state_dir);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

int router_resolver_api_new(const char *server, const char *token, const char *state_dir,
                            long cache_ms, long resume_timeout_ms, router_resolver **out)
{
    api_resolver *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->base = (router_resolver){api_resolve, api_invalidate, api_free};
    pthread_mutex_init(&r->lock, NULL);
    r->server = server ? strdup(server) : NULL;
    r->token = token ? strdup(token) : NULL;
    r->state_dir = strdup(state_dir);
    r->cache_ms = cache_ms;
    r->resume_ms = resume_timeout_ms > 0 ? resume_timeout_ms : 60000;
    if (!r->state_dir || (server && !r->server) || (token && !r->token)) {
        api_free(&r->base);
        return -ENOMEM;
    }
    *out = &r->base;
    return 0;
}
