/* The one admission sequence every client protocol runs before a request is proxied
 * (router-core.h): healthz -> auth -> route -> protocol checks -> resolve. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "router/router-core.h"

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
    enum { H_AUTH, H_ID, H_NS, H_PORT, H_IP, H_CT, H_N };
    static const struct {
        const char *name;
        size_t len;
    } want[H_N] = {{"authorization", 13},  {"x-sandbox-id", 12},     {"x-sandbox-namespace", 19},
                   {"x-sandbox-port", 14}, {"x-sandbox-pod-ip", 16}, {"content-type", 12}};
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
    a->info = (router_request_info){
        .method = method,
        .path = path,
        .sandbox_id = hv[H_ID],
        .sandbox_ns = hv[H_NS],
        .sandbox_port = hv[H_PORT],
        .pod_ip = hv[H_IP],
        .content_type = hv[H_CT],
    };
}

router_admit_result router_admit_resolve(router_ctx *ctx, const router_route *route,
                                         router_target *ret_target, api_error *err)
{
    int r = ctx->resolver->resolve(ctx->resolver, route->ns, route->id, false, ret_target, err);
    return r < 0 ? ROUTER_ADMIT_REFUSED : ROUTER_ADMIT_TARGET;
}

router_admit_result router_admit(router_ctx *ctx, const router_admission *a, bool nonblock,
                                 router_route *ret_route, router_target *ret_target, api_error *err)
{
    const router_request_info *in = &a->info;
    const char *path = in->path ? in->path : "/";
    if (in->method && strcmp(in->method, "GET") == 0 && path_is(path, "/healthz"))
        return ROUTER_ADMIT_HEALTHZ;
    if (router_check_auth(a->authorization, ctx->token, ctx->allow_unauthenticated, a->loopback,
                          err) < 0)
        return ROUTER_ADMIT_REFUSED;
    if (router_route_request(in, ret_route, err) < 0)
        return ROUTER_ADMIT_REFUSED;
    if (a->upgrade) {
        router_error_upgrade(err);
        return ROUTER_ADMIT_REFUSED;
    }
    if (!a->http2 && ret_route->kind == ROUTER_KIND_GRPC) {
        api_error_set(err, STATUS_INVALID_ARGUMENT,
                      "gRPC requests need HTTP/2 (h2c prior knowledge).");
        return ROUTER_ADMIT_REFUSED;
    }
    int r = ctx->resolver->resolve(ctx->resolver, ret_route->ns, ret_route->id, nonblock,
                                   ret_target, err);
    if (r == -EWOULDBLOCK && nonblock)
        return ROUTER_ADMIT_PENDING;
    if (r == -EWOULDBLOCK)
        return router_admit_resolve(ctx, ret_route, ret_target, err);
    return r < 0 ? ROUTER_ADMIT_REFUSED : ROUTER_ADMIT_TARGET;
}

static void *resolve_thread(void *p)
{
    router_resolution *res = p;
    res->r = res->resolver->resolve(res->resolver, res->route.ns, res->route.id, false,
                                    &res->target, &res->err);
    res->done(res);
    return NULL;
}

int router_resolve_async(router_resolution *res)
{
    return router_thread_spawn(resolve_thread, res);
}
