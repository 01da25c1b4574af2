/* The one admission sequence every client protocol runs before a request is proxied
 * (router-core.h): healthz -> auth -> route -> protocol checks -> resolve. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "basic/macro.h"
#include "router/router-core.h"
#include "router/router-errors.h"
#include "router/router-preview.h"

const char router_healthz_body[] = "{\"status\":\"ok\"}";

static bool path_is(const char *url, const char *want)
{
    size_t n = strlen(want);
    return strncmp(url, want, n) == 0 && (url[n] == '\0' || url[n] == '?');
}

void router_admission_from_headers(router_admission *a, const char *method, const char *path,
                                   const router_headers *h)
{
    /* the headers admission looks at, first occurrence, in one pass over the list */
    enum { H_AUTH, H_ID, H_NS, H_PORT, H_IP, H_CT, H_HOST, H_COOKIE, H_N };
    static const struct {
        const char *name;
        size_t len;
    } want[H_N] = {{"authorization", 13},
                   {"x-sandbox-id", 12},
                   {"x-sandbox-namespace", 19},
                   {"x-sandbox-port", 14},
                   {"x-sandbox-pod-ip", 16},
                   {"content-type", 12},
                   {"host", 4},
                   {"cookie", 6}};
    const char *hv[H_N] = {0};
    for (size_t i = 0; i < h->n; i++) {
        const char *name = router_headers_name(h, i);
        size_t nl = strlen(name);
        for (int k = 0; k < H_N; k++)
            if (!hv[k] && nl == want[k].len && strcasecmp(name, want[k].name) == 0) {
                hv[k] = name + nl + 1;
                break;
            }
    }
    a->authorization = hv[H_AUTH];
    a->cookie = hv[H_COOKIE];
    a->info = (router_request_info){
        .method = method,
        .path = path,
        .sandbox_id = hv[H_ID],
        .sandbox_ns = hv[H_NS],
        .sandbox_port = hv[H_PORT],
        .pod_ip = hv[H_IP],
        .content_type = hv[H_CT],
        .host = hv[H_HOST],
    };
}

router_admit_result router_admit_resolve(router_ctx *ctx, const router_route *route,
                                         router_target *ret_target, api_error *err)
{
    int r = ctx->resolver->resolve(ctx->resolver, route->ns, route->id, route->port, false,
                                   ret_target, err);
    return r < 0 ? ROUTER_ADMIT_REFUSED : ROUTER_ADMIT_TARGET;
}

/* A preview host's request: the bearer token when one is sent, else the preview cookie, else
 * a link's parameter (answered with a redirect that sets the cookie), else the loopback rule.
 * Returns 0 (admitted), 1 (*ret_answer filled) or -EACCES (err set). */
static int preview_auth(router_ctx *ctx, const router_admission *a, const router_route *rt,
                        router_answer *ret_answer, api_error *err)
{
    if (!ctx->token || a->authorization)
        return router_check_auth(a->authorization, ctx->token, ctx->allow_unauthenticated,
                                 a->loopback, err);
    long long now = (long long)time(NULL);
    size_t n;
    const char *cred = router_preview_link_param(a->info.path ? a->info.path : "/", &n);
    if (cred && router_preview_check(ctx->token, rt->ns, rt->id, rt->port, cred, n, now)) {
        _cleanup_free_ char *to = NULL;
        if (router_preview_strip_param(a->info.path, &to) < 0)
            return router_check_auth(NULL, ctx->token, false, false, err);
        long long exp = strtoll(cred, NULL, 10);
        if (to[0] != '/' || to[1] == '/') /* "//host/..." would lead the browser elsewhere */
            strcpy(to, "/");
        *ret_answer = (router_answer){.status = 303, .ctype = "text/plain; charset=utf-8"};
        int k = snprintf(ret_answer->headers, sizeof(ret_answer->headers),
                         "Location: %s\r\nSet-Cookie: " ROUTER_PREVIEW_NAME
                         "=%.*s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Lax\r\n"
                         "Cache-Control: no-store",
                         to, (int)n, cred, exp - now);
        if (k < 0 || (size_t)k >= sizeof(ret_answer->headers)) {
            return router_error_preview_too_long(err);
        }
        return 1;
    }
    const char *cookie = router_preview_cookie(a->cookie, &n);
    if (cookie && router_preview_check(ctx->token, rt->ns, rt->id, rt->port, cookie, n, now))
        return 0;
    if (!cred && !cookie && ctx->allow_unauthenticated && a->loopback)
        return 0;
    return router_error_preview_expired(err, rt->id, rt->port);
}

/* GET ROUTER_PREVIEW_PATH: a signed preview link (router-core.h). Returns 1 (*ret_answer) or
 * -EINVAL (err). */
static int preview_link(router_ctx *ctx, const router_admission *a, router_answer *ret_answer,
                        api_error *err)
{
    const char *path = a->info.path, *v;
    size_t n;
    char ns[64] = "default", id[64] = "", pnum[8] = "", ttl[16] = "86400";
    struct {
        const char *name;
        char *dst;
        size_t size;
    } params[] = {{"namespace", ns, sizeof(ns)},
                  {"sandbox", id, sizeof(id)},
                  {"port", pnum, sizeof(pnum)},
                  {"ttl", ttl, sizeof(ttl)}};
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
        if ((v = router_query_param(path, params[i].name, &n))) {
            if (n >= params[i].size) {
                return router_error_preview_param(err, params[i].name);
            }
            memcpy(params[i].dst, v, n);
            params[i].dst[n] = '\0';
        }
    char *end, *tend;
    long port = strtol(pnum, &end, 10), secs = strtol(ttl, &tend, 10);
    if (!router_valid_dns_label(id) || !router_valid_dns_label(ns) || !*pnum || *end || *tend ||
        port < 1 || port > 65535 || router_port_is_sandboxd(pnum) || secs < 1 ||
        secs > 366L * 86400) {
        return router_error_preview_request(err);
    }
    long long exp = (long long)time(NULL) + secs;
    char cred[ROUTER_PREVIEW_CRED_MAX] = "";
    if (ctx->token && router_preview_credential(ctx->token, ns, id, (unsigned)port, exp, cred,
                                                sizeof(cred)) < 0) {
        return router_error_internal(err, -EIO);
    }
    /* the router's port as the client reached it */
    const char *host = a->info.host ? a->info.host : "", *colon = strrchr(host, ':');
    if (colon && strchr(colon, ']'))
        colon = NULL;
    struct tm tm;
    time_t t = (time_t)exp;
    char at[32];
    strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    _cleanup_free_ char *url = NULL;
    if (asprintf(&url, "http://%ld-%s.%s.%s%s/%s%s%s", port, id, ns, ctx->preview_domain,
                 colon ? colon : "", *cred ? "?" ROUTER_PREVIEW_NAME "=" : "", cred, "") < 0) {
        return router_error_internal(err, -ENOMEM);
    }
    json_t *o = json_pack("{s:s, s:s}", "url", url, "expiresAt", at);
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    *ret_answer = (router_answer){.status = 200, .ctype = "application/json"};
    int k = body ? snprintf(ret_answer->body, sizeof(ret_answer->body), "%s", body) : -1;
    free(body);
    if (k < 0 || (size_t)k >= sizeof(ret_answer->body)) {
        return router_error_internal(err, -ENOMEM);
    }
    return 1;
}

router_admit_result router_admit(router_ctx *ctx, const router_admission *a, bool nonblock,
                                 router_route *ret_route, router_target *ret_target,
                                 router_answer *ret_answer, api_error *err)
{
    router_request_info in = a->info;
    in.preview_domain = ctx->preview_domain;
    const char *path = in.path ? in.path : "/";
    bool get = in.method && strcmp(in.method, "GET") == 0;
    bool preview = router_preview_host(in.host, in.preview_domain, ret_route);
    /* a server of the sandbox has its own /healthz */
    if (get && path_is(path, "/healthz") && !preview && router_port_is_sandboxd(in.sandbox_port))
        return ROUTER_ADMIT_HEALTHZ;
    if (preview) {
        int k = preview_auth(ctx, a, ret_route, ret_answer, err);
        if (k != 0)
            return k > 0 ? ROUTER_ADMIT_ANSWER : ROUTER_ADMIT_REFUSED;
    } else {
        if (router_check_auth(a->authorization, ctx->token, ctx->allow_unauthenticated, a->loopback,
                              err) < 0)
            return ROUTER_ADMIT_REFUSED;
        if (get && !in.sandbox_id && ctx->preview_domain && path_is(path, ROUTER_PREVIEW_PATH))
            return preview_link(ctx, a, ret_answer, err) > 0 ? ROUTER_ADMIT_ANSWER
                                                             : ROUTER_ADMIT_REFUSED;
        if (router_route_request(&in, ret_route, err) < 0)
            return ROUTER_ADMIT_REFUSED;
    }
    /* CONNECT is tunnelled to a sandbox port only */
    if (a->upgrade && !(a->connect && ret_route->kind == ROUTER_KIND_PORT)) {
        router_error_upgrade(err);
        return ROUTER_ADMIT_REFUSED;
    }
    if (!a->http2 && ret_route->kind == ROUTER_KIND_GRPC) {
        api_error_set(err, STATUS_INVALID_ARGUMENT,
                      "gRPC requests need HTTP/2 (h2c prior knowledge).");
        return ROUTER_ADMIT_REFUSED;
    }
    int r = ctx->resolver->resolve(ctx->resolver, ret_route->ns, ret_route->id, ret_route->port,
                                   nonblock, ret_target, err);
    if (r == -EWOULDBLOCK && nonblock)
        return ROUTER_ADMIT_PENDING;
    if (r == -EWOULDBLOCK)
        return router_admit_resolve(ctx, ret_route, ret_target, err);
    return r < 0 ? ROUTER_ADMIT_REFUSED : ROUTER_ADMIT_TARGET;
}

static void *resolve_thread(void *p)
{
    router_resolution *res = p;
    res->r = res->resolver->resolve(res->resolver, res->route.ns, res->route.id, res->route.port,
                                    false, &res->target, &res->err);
    res->done(res);
    return NULL;
}

int router_resolve_async(router_resolution *res)
{
    return router_thread_spawn(resolve_thread, res);
}
