/* HTTP plumbing of the API server: listener, bearer-token check, request bodies, routing.
 * Resource handlers are in local-apiserver-resource.c, watches in local-apiserver-watch.c,
 * discovery in local-apiserver-discovery.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "local/apiserver/local-apiserver-internal.h"
#include "shared/log.h"

#define REQUEST_THREAD_STACK ((size_t)512 * 1024)
/* libmicrohttpd zeroes each connection's memory pool (32 KiB by default): 13 % of the request
 * threads' samples in a burst of claims (docs/performance.md, "Fewer copies per claim"). 16 KiB
 * holds a request's headers up to ~14 KB (431 beyond) and then the response's, whose Warnings
 * reply_json_headers keeps within WARNING_MAX_TOTAL. */
#define REQUEST_MEMORY ((size_t)16 * 1024)

typedef struct conn_ctx {
    buf body;
    bool too_large;
} conn_ctx;

/* `299 - "text"` (RFC 7234 warn-code 299, no agent, text as a quoted-string), as kube-apiserver
 * writes its Warning headers. Control characters (a field name may hold any) become '?' so a
 * header can never be split. Owned, NULL on ENOMEM. */
static char *warning_value(const char *text)
{
    size_t n = strlen(text);
    if (n > WARNING_MAX_TEXT)
        n = WARNING_MAX_TEXT;
    char *v = malloc(2 * n + 16), *o = v;
    if (!v)
        return NULL;
    o += sprintf(o, "299 - \"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '"' || ch == '\\')
            *o++ = '\\';
        *o++ = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    strcpy(o, "\"");
    return v;
}

enum MHD_Result reply_json_warnings(struct MHD_Connection *c, unsigned code, json_t *j,
                                    const json_t *warnings)
{
    return reply_json_headers(c, code, j, warnings, NULL, NULL);
}

enum MHD_Result reply_json_headers(struct MHD_Connection *c, unsigned code, json_t *j,
                                   const json_t *warnings, const char *header, const char *value)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        return MHD_NO;
    size_t n = strlen(s);
    struct MHD_Response *r = MHD_create_response_from_buffer(n, s, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    size_t i, total = 0, count = json_array_size(warnings);
    json_t *w;
    json_array_foreach ((json_t *)warnings, i, w) {
        _cleanup_free_ char *v = warning_value(json_string_value(w) ? json_string_value(w) : "");
        if (!v || i >= WARNING_MAX_COUNT || (total += strlen(v)) > WARNING_MAX_TOTAL)
            break;
        MHD_add_response_header(r, "Warning", v);
    }
    if (i < count) { /* the rest would not fit the connection's memory: say so instead */
        char more[64];
        snprintf(more, sizeof(more), "299 - \"%zu more warnings not shown\"", count - i);
        MHD_add_response_header(r, "Warning", more);
    }
    if (header && value)
        MHD_add_response_header(r, header, value);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result reply_json(struct MHD_Connection *c, unsigned code, json_t *j)
{
    return reply_json_warnings(c, code, j, NULL);
}

json_t *status_failure(kube_reason reason, const char *message, const api_kind *k, const char *name)
{
    const kube_reason_info *info = kube_reason_info_of(reason);
    return api_status_failure(info->http, info->name, message, k, name);
}

enum MHD_Result reply_failure_warnings(struct MHD_Connection *c, json_t *st, const json_t *warnings)
{
    json_t *code = json_object_get(st, "code");
    unsigned http = json_is_integer(code) ? (unsigned)json_integer_value(code)
                                          : kube_reason_info_of(KUBE_REASON_INTERNAL_ERROR)->http;
    return reply_json_warnings(c, http, st, warnings);
}

enum MHD_Result reply_failure(struct MHD_Connection *c, json_t *st)
{
    return reply_failure_warnings(c, st, NULL);
}

enum MHD_Result reply_api_error(struct MHD_Connection *c, const api_error *e, const api_kind *k,
                                const char *name)
{
    return reply_failure(c, status_failure(api_error_reason(e), e->message, k, name));
}

enum MHD_Result reply_status(struct MHD_Connection *c, kube_reason reason, const api_kind *k,
                             const char *name, const char *fmt, ...)
{
    _cleanup_free_ char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    return reply_failure(c, status_failure(reason, msg, k, name));
}

const char *query(struct MHD_Connection *c, const char *key)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

bool query_bool(struct MHD_Connection *c, const char *key)
{
    const char *v = query(c, key);
    bool b = false;
    return v && parse_go_bool(v, &b) == 0 && b;
}

/* Constant-time comparison of the presented bearer token. */
static bool authorized(local_apiserver *srv, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h), m = strlen(srv->token);
    unsigned char diff = n != m;
    for (size_t i = 0; i < m; i++)
        diff |= (unsigned char)(srv->token[i] ^ (i < n ? h[i] : 0));
    return diff == 0;
}

#define MAX_SEGMENTS 12

/* Splits the path in place into segments; false when there are too many or empty ones. */
static bool split_path(char *p, char **seg, size_t *nseg)
{
    *nseg = 0;
    if (*p == '/')
        p++;
    size_t len = strlen(p);
    if (len > 0 && p[len - 1] == '/')
        p[len - 1] = '\0';
    if (!*p)
        return true;
    for (char *save = NULL, *t = strtok_r(p, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (*nseg == MAX_SEGMENTS)
            return false;
        seg[(*nseg)++] = t;
    }
    return true;
}

static enum MHD_Result not_found(struct MHD_Connection *c)
{
    return reply_status(c, KUBE_REASON_NOT_FOUND, NULL, NULL,
                        "the server could not find the requested resource");
}

static enum MHD_Result route(local_apiserver *srv, struct MHD_Connection *c, const char *url,
                             const char *method, conn_ctx *ctx)
{
    _cleanup_free_ char *path = strdup(url);
    char *seg[MAX_SEGMENTS];
    size_t n;
    if (!path)
        return MHD_NO;
    if (!split_path(path, seg, &n))
        return not_found(c);
    if (n == 1 && strcmp(seg[0], "metrics") == 0)
        return apiserver_metrics(srv, c, method);
    if (apiserver_is_podmetrics(seg, n))
        return apiserver_podmetrics(srv, c, method, seg, n);
    bool events = n >= 4 && strcmp(seg[0], "apis") == 0 && strcmp(seg[1], API_GROUP_EVENTS) == 0 &&
                  strcmp(seg[2], API_VERSION_EVENTS) == 0;
    if (!events && (n < 4 || strcmp(seg[0], "apis") != 0 || !api_group_known(seg[1]) ||
                    strcmp(seg[2], API_VERSION) != 0))
        return apiserver_discovery(srv, c, seg, n);

    api_request rq = {
        .srv = srv, .conn = c, .method = method, .body = ctx->body.data, .body_len = ctx->body.len};
    const char *plural;
    if (n == 4) {
        plural = seg[3];
    } else if (n >= 6 && n <= 8 && strcmp(seg[3], "namespaces") == 0) {
        rq.ns = seg[4];
        plural = seg[5];
        rq.name = n >= 7 ? seg[6] : NULL;
        if (n == 8) {
            if (strcmp(seg[7], "status") == 0)
                rq.status = true;
            else if (strcmp(seg[7], "scale") == 0)
                rq.scale = true;
            else
                return not_found(c);
        }
    } else {
        return not_found(c);
    }
    rq.kind = api_kind_by_plural(seg[1], plural);
    if (!rq.kind || (rq.status && !rq.kind->has_status) || (rq.scale && !rq.kind->has_scale))
        return not_found(c);
    /* Events are written by the controllers' recorder only: read, watch and delete them. */
    if (events && strcmp(method, "GET") != 0 && strcmp(method, "DELETE") != 0)
        return reply_status(c, KUBE_REASON_METHOD_NOT_ALLOWED, rq.kind, NULL,
                            "events are recorded by asb serve's controllers and are read-only");
    if (!rq.ns && strcmp(method, "GET") != 0)
        return reply_status(c, KUBE_REASON_METHOD_NOT_ALLOWED, rq.kind, NULL,
                            "the server does not allow this method on the requested resource");
    return apiserver_resource(&rq);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    local_apiserver *srv = cls;
    conn_ctx *ctx = *con_cls;
    if (!ctx) {
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return MHD_NO;
        *con_cls = ctx;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (ctx->too_large || ctx->body.len + n > APISERVER_MAX_BODY) {
            ctx->too_large = true;
            return MHD_YES;
        }
        return buf_append(&ctx->body, upload_data, n) < 0 ? MHD_NO : MHD_YES;
    }
    if (!authorized(srv, c))
        return reply_status(c, KUBE_REASON_UNAUTHORIZED, NULL, NULL, "Unauthorized");
    if (ctx->too_large)
        return reply_status(c, KUBE_REASON_REQUEST_ENTITY_TOO_LARGE, NULL, NULL,
                            "Request entity too large: limit is %u", APISERVER_MAX_BODY);
    return route(srv, c, url, method, ctx);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    conn_ctx *ctx = *con_cls;
    if (ctx) {
        buf_done(&ctx->body);
        free(ctx);
        *con_cls = NULL;
    }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_debug("microhttpd", "message", msg);
}

/* "host:port" or "[v6]:port" into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, bool *ret_v6)
{
    const char *colon = strrchr(listen, ':');
    if (!colon)
        return -EINVAL;
    _cleanup_free_ char *host = strndup(listen, (size_t)(colon - listen));
    if (!host)
        return -ENOMEM;
    int64_t port;
    if (parse_go_int(colon + 1, &port) < 0 || port < 0 || port > 65535)
        return -EINVAL;
    memset(ss, 0, sizeof(*ss));
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        *ret_v6 = true;
        return inet_pton(AF_INET6, host + 1, &a->sin6_addr) == 1 ? 0 : -EINVAL;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    *ret_v6 = false;
    if (strcmp(host, "localhost") == 0)
        return inet_pton(AF_INET, "127.0.0.1", &a->sin_addr) == 1 ? 0 : -EINVAL;
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -EINVAL;
}

int local_apiserver_start(const local_apiserver_options *o, local_apiserver **ret,
                          uint16_t *ret_port, api_error *err)
{
    struct sockaddr_storage ss;
    bool v6 = false;
    if (parse_listen(o->listen, &ss, &v6) < 0) {
        return api_error_set_errno(err, -EINVAL, "invalid listen address \"%s\" (want HOST:PORT)",
                                   o->listen);
    }
    local_apiserver *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    srv->token = strdup(o->token);
    srv->store = o->store;
    srv->bookmark_interval = o->bookmark_interval ? o->bookmark_interval : 60 * USEC_PER_SEC;
    if (o->capacity) {
        srv->capacity = *o->capacity;
        srv->has_capacity = true;
    }
    pthread_rwlock_init(&srv->hook_lock, NULL);
    if (!srv->token) {
        free(srv);
        return -ENOMEM;
    }
    /* Small request-thread stacks: glibc keeps 40 MiB of freed thread stacks for reuse, five of
     * the default 8 MiB, so a burst of connections would map, fault in and unmap a stack each
     * (docs/performance.md, "Request threads on small stacks"). Objects nest at most
     * API_MAX_DEPTH levels, which bounds every recursion over them; a database from before that
     * limit may hold deeper ones, and then the default stays. */
    size_t stack = REQUEST_THREAD_STACK;
    if (local_store_holds_deep_objects(o->store)) {
        log_warn("the store holds objects nested deeper than the API accepts now: request "
                 "threads keep the default stack size");
        stack = 0;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR,
                                   (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED,
                                   on_completed, srv, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
                                   MHD_OPTION_THREAD_STACK_SIZE, stack,
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, REQUEST_MEMORY,
                                   MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv, MHD_OPTION_END);
    if (!srv->daemon) {
        int e = errno ? errno : EADDRINUSE;
        api_error_set_errno(err, -e, "cannot listen on %s: %s", o->listen, strerror(e));
        free(srv->token);
        free(srv);
        return -e;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : 0;
    *ret_port = srv->port;
    *ret = srv;
    return 0;
}

local_apiserver *local_apiserver_stop(local_apiserver *s)
{
    if (!s)
        return NULL;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    pthread_rwlock_destroy(&s->hook_lock);
    free(s->token);
    free(s);
    return NULL;
}

void local_apiserver_set_create_hook(local_apiserver *s, const api_kind *k, const char *header,
                                     const local_apiserver_create_hook *hook, void *userdata)
{
    pthread_rwlock_wrlock(&s->hook_lock);
    s->hook_kind = hook ? k : NULL;
    s->hook_header = hook ? header : NULL;
    s->hook = hook ? *hook : (local_apiserver_create_hook){0};
    s->hook_data = hook ? userdata : NULL;
    pthread_rwlock_unlock(&s->hook_lock);
}
