/* The REST server: listeners (TCP, unix socket path, inherited fd), one libmicrohttpd daemon per
 * listener (thread per connection), request accounting, and Go ServeMux-style routing. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-rest-internal.h"
#include "shared/http-framing.h"
#include "shared/log.h"

#define FILES_PREFIX "/v1/files/"
/* libmicrohttpd 0.9.75 zeroes a connection's whole memory pool at every keep-alive reset
 * (MHD_pool_reset): with 512 KiB that memset was 31-42 % of sandboxd's CPU per small request
 * and, 50 connections x 512 KiB not fitting the caches, 11-19 us of it (docs/performance.md,
 * router section). 128 KiB still takes request heads of 100 KiB (the router forwards at most
 * 64 KiB); bigger ones are answered 431. */
#define CONNECTION_MEMORY_LIMIT (128 * 1024)
/* libmicrohttpd's own per-listener limit: --max-connections plus room for connections cut to
 * make room that are still closing (the cap itself is enforced by rest_conns_on_accept). */
#define CONNECTION_LIMIT_SLACK 64

/* Absolute-form request targets ("http://host/path") address the path, as in Go. */
static void strip_absolute_form(char *uri)
{
    size_t skip;
    if (strncasecmp(uri, "http://", 7) == 0)
        skip = 7;
    else if (strncasecmp(uri, "https://", 8) == 0)
        skip = 8;
    else
        return;
    char *slash = strchr(uri + skip, '/');
    if (!slash) {
        uri[0] = '/';
        uri[1] = '\0';
        return;
    }
    memmove(uri, slash, strlen(slash) + 1);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    rest_server *s = cls;
    rest_request *req = calloc(1, sizeof(*req));
    if (!req)
        return NULL;
    req->srv = s;
    req->raw_uri = strdup(uri ? uri : "");
    if (!req->raw_uri) {
        free(req);
        return NULL;
    }
    char *q = strchr(req->raw_uri, '?');
    if (q) {
        *q = '\0';
        req->query = q + 1;
    }
    strip_absolute_form(req->raw_uri);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    req->conn = ci ? ci->socket_context : NULL;
    if (req->conn) {
        pthread_mutex_lock(&s->conns_lock);
        req->conn->busy = true;
        pthread_mutex_unlock(&s->conns_lock);
        rest_conn_set_phase(s, req->conn, REST_CONN_HEAD);
    }
    atomic_fetch_add(&s->active, 1);
    return req;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    rest_server *s = cls;
    rest_request *req = *con_cls;
    *con_cls = NULL;
    if (!req)
        return;
    if (req->conn) {
        pthread_mutex_lock(&s->conns_lock);
        req->conn->busy = false;
        /* Draining: the connection goes once its response is out. */
        if (atomic_load(&s->stopping))
            shutdown(req->conn->fd, SHUT_RDWR);
        pthread_mutex_unlock(&s->conns_lock);
        rest_conn_set_phase(s, req->conn, REST_CONN_IDLE);
    }
    rest_put_free(req->put);
    free(req->file_path);
    free(req->raw_uri);
    free(req);
    atomic_fetch_sub(&s->active, 1);
}

/* Handlers see the raw (escaped) path; we decode ourselves. */
static size_t on_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    return strlen(s);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    _cleanup_free_ char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        return;
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_debug("libmicrohttpd", "msg", msg);
}

/* Go's htmlEscape for the redirect body. Returns a new string or NULL. */
static char *html_escape(const char *s)
{
    json_buf b = {0};
    for (const char *p = s; *p; p++) {
        const char *e = *p == '&'    ? "&amp;"
                        : *p == '<'  ? "&lt;"
                        : *p == '>'  ? "&gt;"
                        : *p == '"'  ? "&#34;"
                        : *p == '\'' ? "&#39;"
                                     : NULL;
        if (e)
            json_buf_lit(&b, e);
        else
            json_buf_raw(&b, p, 1);
    }
    json_buf_lit(&b, "");
    return json_buf_steal(&b, NULL);
}

static enum MHD_Result queue_redirect(rest_request *req, struct MHD_Connection *c, const char *path,
                                      bool with_body)
{
    _cleanup_free_ char *loc = NULL;
    if (asprintf(&loc, "%s%s%s", path, req->query ? "?" : "", req->query ? req->query : "") < 0)
        return MHD_NO;
    char *body = NULL;
    if (with_body) {
        _cleanup_free_ char *esc = html_escape(loc);
        if (!esc || asprintf(&body, "<a href=\"%s\">Moved Permanently</a>.\n\n", esc) < 0)
            return MHD_NO;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(body ? strlen(body) : 0, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
    if (body)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    return rest_queue_response(req, c, MHD_HTTP_MOVED_PERMANENTLY, resp);
}

static enum MHD_Result queue_405(rest_request *req, struct MHD_Connection *c, const char *allow)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        strlen("Method Not Allowed\n"), (void *)"Method Not Allowed\n", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    return rest_queue_response(req, c, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
}

static enum MHD_Result dispatch(rest_request *req, struct MHD_Connection *c, const char *method,
                                const char *upload_data, size_t *upload_data_size)
{
    const char *path = req->raw_uri;
    bool get = strcmp(method, "GET") == 0, head = strcmp(method, "HEAD") == 0;

    if (path[0] != '/' || !rest_mux_valid_escapes(path, strlen(path)))
        return rest_queue_text(req, c, MHD_HTTP_BAD_REQUEST, "400 Bad Request");
    _cleanup_free_ char *clean = rest_mux_clean_path(path);
    if (!clean)
        return MHD_NO;
    if (strcmp(clean, "/v1/files") == 0)
        return queue_redirect(req, c, FILES_PREFIX, get || head);
    if (strcmp(clean, path) != 0)
        return queue_redirect(req, c, clean, get || head);

    if (strncmp(path, FILES_PREFIX, strlen(FILES_PREFIX)) == 0) {
        bool put = strcmp(method, "PUT") == 0, del = strcmp(method, "DELETE") == 0;
        if (!get && !head && !put && !del)
            return queue_405(req, c, "DELETE, GET, HEAD, PUT");
        const char *rest = path + strlen(FILES_PREFIX);
        size_t len = 0;
        int r = rest_unescape(rest, strlen(rest), false, &req->file_path, &len);
        if (r == -ENOMEM)
            return MHD_NO;
        if (r < 0)
            return rest_queue_text(req, c, MHD_HTTP_BAD_REQUEST, "400 Bad Request");
        if (memchr(req->file_path, '\0', len))
            return rest_queue_error(req, c, STATUS_INVALID_ARGUMENT,
                                    "path must not contain NUL bytes");
        if (put)
            return rest_handle_put(req, c, upload_data, upload_data_size);
        if (del)
            return rest_handle_delete(req, c);
        return rest_handle_get(req, c, head);
    }
    if (strcmp(path, "/v1/health") == 0 || strcmp(path, "/v1/metadata") == 0) {
        if (!get && !head)
            return queue_405(req, c, "GET, HEAD");
        return path[4] == 'h' ? rest_handle_health(req, c) : rest_handle_metadata(req, c);
    }
    return rest_queue_text(req, c, MHD_HTTP_NOT_FOUND, "404 page not found\n");
}

typedef struct field_list {
    http_field *v;
    size_t n, cap;
    bool oom;
} field_list;

static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                     size_t key_size, const char *value, size_t value_size)
{
    field_list *l = cls;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        http_field *v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->oom = true;
            return MHD_NO;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (http_field){key, key_size, value ? value : "", value ? value_size : 0};
    return MHD_YES;
}

/* libmicrohttpd lets the request-smuggling shapes through (it takes the first of two different
 * Content-Lengths, keeps "Content-Length " as another header, reads a non-chunked
 * Transfer-Encoding body until EOF, serves HTTP/1.1 without Host): refuse them as Go does,
 * before any body is read. Returns false when the request may proceed; true when it was refused,
 * with *ret the result of queueing the refusal. */
static bool refuse_bad_framing(rest_request *req, struct MHD_Connection *c, const char *version,
                               enum MHD_Result *ret)
{
    field_list l = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, collect_field, &l);
    if (l.oom) {
        free(l.v);
        *ret = MHD_NO;
        return true;
    }
    bool http11 = strcmp(version, MHD_HTTP_VERSION_1_0) != 0;
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    int r = http_framing_check(l.v, l.n, http11, &e);
    free(l.v);
    if (r == 0)
        return false;
    struct MHD_Response *resp =
        e.message
            ? MHD_create_response_from_buffer(strlen(e.message), e.message, MHD_RESPMEM_MUST_COPY)
            : NULL;
    if (!resp) {
        *ret = MHD_NO;
        return true;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    *ret = rest_queue_response(req, c, status_http(e.code), resp);
    return true;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    rest_request *req = *con_cls;
    if (!req)
        return MHD_NO; /* allocation failed in on_uri */
    /* libmicrohttpd closes the connection after a response queued on the first call (before the
     * body is known to be empty), so everything but PUT is answered once the body is read. PUT
     * validates early: an error then spares the upload (and closes the connection). */
    if (!req->seen) {
        req->seen = true;
        rest_conn_set_phase(req->srv, req->conn, REST_CONN_BUSY); /* the head is in */
        enum MHD_Result refused;
        if (refuse_bad_framing(req, c, version, &refused)) {
            req->dispatched = true;
            return refused;
        }
        if (strcmp(method, "PUT") != 0)
            return MHD_YES;
        req->dispatched = true;
        return dispatch(req, c, method, upload_data, upload_data_size);
    }
    if (req->put)
        return rest_handle_put(req, c, upload_data, upload_data_size);
    if (*upload_data_size > 0) {
        *upload_data_size = 0; /* a body we do not use: discard it */
        return MHD_YES;
    }
    if (req->dispatched)
        return MHD_YES;
    req->dispatched = true;
    return dispatch(req, c, method, upload_data, upload_data_size);
}

static int tcp_listen(const char *host, int port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    int r = getaddrinfo(host && *host ? host : NULL, portstr, &hints, &ai);
    if (r != 0) {
        log_error("rest: cannot resolve listen host", "host", host, "error", gai_strerror(r));
        return -EADDRNOTAVAIL;
    }
    int fd = -1, err = -EADDRNOTAVAIL;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = negative_errno();
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0)
            break;
        err = negative_errno();
        fd = safe_close(fd);
    }
    freeaddrinfo(ai);
    return fd >= 0 ? fd : err;
}

static int unix_listen(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path); /* stale socket from a previous run */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return negative_errno();
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0) {
        int r = negative_errno();
        close(fd);
        return r;
    }
    return fd;
}

static int start_daemon(rest_server *s, int listen_fd)
{
    const sandboxd_config *cfg = s->sd->config;
    unsigned timeout = (unsigned)(cfg->http_idle_timeout / USEC_PER_SEC);
    if (cfg->http_idle_timeout > 0 && timeout == 0)
        timeout = 1;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, rest_conns_on_accept, s, on_access, s, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)listen_fd, MHD_OPTION_CONNECTION_TIMEOUT, timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY_LIMIT,
        MHD_OPTION_CONNECTION_LIMIT, s->max_conns + CONNECTION_LIMIT_SLACK,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, s, MHD_OPTION_NOTIFY_CONNECTION,
        rest_conns_notify, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
    if (!d)
        return -EIO;
    s->daemons[s->n_daemons++] = d;
    return 0;
}

int rest_server_new(rest_server **ret, sandboxd *sd)
{
    const sandboxd_config *cfg = sd->config;
    rest_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->sd = sd;
    atomic_init(&s->active, 0);
    atomic_init(&s->stopping, false);
    int r = rest_conns_init(s);
    if (r < 0) {
        free(s);
        return r;
    }
    *ret = s;

    int fd = tcp_listen(cfg->listen_host, cfg->rest_port);
    if (fd < 0) {
        char port[16];
        snprintf(port, sizeof(port), "%d", cfg->rest_port);
        log_error("rest: listen failed", "host", cfg->listen_host, "port", port, "error",
                  strerror(-fd));
        return fd;
    }
    r = start_daemon(s, fd);
    if (r < 0) {
        close(fd);
        log_error("rest: cannot start HTTP server");
        return r;
    }
    if (cfg->rest_socket) {
        fd = unix_listen(cfg->rest_socket);
        if (fd < 0) {
            log_error("rest: unix socket listen failed", "path", cfg->rest_socket, "error",
                      strerror(-fd));
            return fd;
        }
        s->socket_path = strdup(cfg->rest_socket);
        r = start_daemon(s, fd);
        if (r < 0) {
            close(fd);
            log_error("rest: cannot start HTTP server on unix socket");
            return r;
        }
    }
    if (cfg->rest_fd >= 0) {
        if (fcntl(cfg->rest_fd, F_SETFD, FD_CLOEXEC) < 0 || listen(cfg->rest_fd, SOMAXCONN) < 0) {
            r = negative_errno();
            log_error("rest: inherited fd is not a listening socket", "error", strerror(-r));
            return r;
        }
        r = start_daemon(s, cfg->rest_fd);
        if (r < 0) {
            log_error("rest: cannot start HTTP server on inherited fd");
            return r;
        }
    }
    return 0;
}

void rest_server_stop_accepting(rest_server *s)
{
    if (!s || atomic_exchange(&s->stopping, true))
        return;
    for (size_t i = 0; i < s->n_daemons; i++) {
        MHD_socket fd = MHD_quiesce_daemon(s->daemons[i]);
        if (fd == MHD_INVALID_SOCKET)
            continue;
        /* The polling thread may still hold a reference to the socket for a moment; shutdown()
         * stops listening at once, so new connections are refused rather than queued. */
        shutdown(fd, SHUT_RDWR);
        close(fd);
    }
    if (s->socket_path)
        unlink(s->socket_path);
    /* Idle keep-alive connections close now; busy ones after their response. */
    pthread_mutex_lock(&s->conns_lock);
    for (rest_conn *rc = s->conns; rc; rc = rc->next)
        if (!rc->busy)
            shutdown(rc->fd, SHUT_RDWR);
    pthread_mutex_unlock(&s->conns_lock);
}

unsigned rest_server_active_requests(rest_server *s)
{
    return s ? atomic_load(&s->active) : 0;
}

rest_server *rest_server_free(rest_server *s)
{
    if (!s)
        return NULL;
    rest_server_stop_accepting(s);
    rest_conns_done(s);
    for (size_t i = 0; i < s->n_daemons; i++)
        MHD_stop_daemon(s->daemons[i]);
    free(s->socket_path);
    pthread_cond_destroy(&s->watchdog_cond);
    pthread_mutex_destroy(&s->conns_lock);
    free(s);
    return NULL;
}
