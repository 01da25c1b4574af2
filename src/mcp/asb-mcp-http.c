/* `asb mcp --listen HOST:PORT`: MCP's Streamable HTTP transport on one endpoint, /mcp.
 * POST carries one JSON-RPC message: a notification or response is answered 202; a tools/call
 * with a progressToken is answered with an SSE stream (its progress notifications, then its
 * response) fed by a worker thread; any other request with application/json. initialize opens a
 * session (Mcp-Session-Id); later requests must carry it (400 without, 404 for an unknown or
 * deleted one), and DELETE ends it. GET is 405: we push nothing outside a request. A bearer token
 * is checked on every request unless none is configured, and a browser's Origin must name this
 * server or a loopback host. One thread per connection (libmicrohttpd), so a cancellation POST is
 * handled while another connection's tool call runs. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/random-util.h"
#include "basic/time-util.h"
#include "mcp/asb-mcp-mhd.h"
#include "mcp/asb-mcp.h"

#define MCP_PATH "/mcp"
#define MAX_BODY JSONRPC_MAX_LINE
#define SSE_KEEPALIVE_SEC                                                                          \
    2 /* a silent stream sends a comment this often (detects a gone client)                        \
       */

typedef struct http_session {
    mcp_session s;
    bool deleted;
    struct http_session *next;
} http_session;

typedef struct http_state {
    mcp_server *server;
    const char *token;
    pthread_mutex_t lock; /* sessions, workers */
    pthread_cond_t idle;
    http_session *sessions;
    unsigned workers; /* SSE worker threads still running (they point at sessions) */
} http_state;

/* Per-request state between the calls of the access handler. */
typedef struct http_request {
    buf body;
    bool too_large;
} http_request;

/* A tools/call answered as an SSE stream: the worker appends events, MHD's reader drains them. */
typedef struct sse_stream {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    buf data;
    bool done, closed;
    int refs;
    http_state *hs;
    jsonrpc_msg msg;
    mcp_call call;
} sse_stream;

static void sse_unref(sse_stream *st)
{
    pthread_mutex_lock(&st->lock);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->lock);
    if (!last)
        return;
    mcp_call_done(&st->call);
    jsonrpc_msg_done(&st->msg);
    buf_done(&st->data);
    pthread_cond_destroy(&st->cond);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static int sse_push(sse_stream *st, json_t *msg, bool last)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    pthread_mutex_lock(&st->lock);
    int r = text ? buf_appendf(&st->data, "event: message\ndata: %s\n\n", text) : -ENOMEM;
    if (last)
        st->done = true;
    if (st->closed)
        r = -EPIPE;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->lock);
    free(text);
    return r;
}

static int sse_notify(mcp_call *call, json_t *notification)
{
    return sse_push(call->transport, notification, false);
}

static void *sse_worker(void *arg)
{
    sse_stream *st = arg;
    http_state *hs = st->hs;
    json_t *reply = mcp_handle(hs->server, &st->call, &st->msg);
    (void)sse_push(st, reply, true);
    sse_unref(st);
    pthread_mutex_lock(&hs->lock);
    hs->workers--;
    pthread_cond_broadcast(&hs->idle);
    pthread_mutex_unlock(&hs->lock);
    return NULL;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
    sse_stream *st = cls;
    pthread_mutex_lock(&st->lock);
    while (st->data.len == 0 && !st->done && !mcp_stop) {
        struct timespec ts = timespec_realtime_after(SSE_KEEPALIVE_SEC * USEC_PER_SEC);
        if (pthread_cond_timedwait(&st->cond, &st->lock, &ts) == ETIMEDOUT && st->data.len == 0 &&
            !st->done) {
            /* An SSE comment: ignored by the client, but a client that went away makes this
             * write fail, which ends the stream and cancels the call (sse_free). */
            static const char ping[] = ": keep-alive\n\n";
            pthread_mutex_unlock(&st->lock);
            memcpy(out, ping, MIN(max, sizeof(ping) - 1));
            return (ssize_t)MIN(max, sizeof(ping) - 1);
        }
    }
    ssize_t n;
    if (st->data.len == 0) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        n = (ssize_t)MIN(max, st->data.len);
        memcpy(out, st->data.data, (size_t)n);
        buf_consume(&st->data, (size_t)n);
    }
    pthread_mutex_unlock(&st->lock);
    return n;
}

/* MHD is done with the response: the client got it all, or went away (cancel the tool). */
static void sse_free(void *cls)
{
    sse_stream *st = cls;
    pthread_mutex_lock(&st->lock);
    st->closed = true;
    if (!st->done)
        st->call.cancel = 1;
    pthread_mutex_unlock(&st->lock);
    sse_unref(st);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, const char *session_id)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body ? body : ""), (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    if (type)
        MHD_add_response_header(r, "Content-Type", type);
    if (session_id && *session_id)
        MHD_add_response_header(r, "Mcp-Session-Id", session_id);
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"asb-mcp\"");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "POST, DELETE");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, json_t *msg,
                                  const char *session_id)
{
    char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    enum MHD_Result r = reply(c, text ? status : MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json",
                              text ? text : "", session_id);
    free(text);
    return r;
}

/* A JSON-RPC error as the body of an HTTP error status. */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, int code,
                                   const char *message)
{
    return reply_json(c, status, jsonrpc_error(NULL, code, message, NULL), NULL);
}

/* Constant-time comparison of the bearer token. */
static bool authorized(http_state *hs, struct MHD_Connection *c)
{
    if (!hs->token)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    size_t n = strlen(h), m = strlen(hs->token);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n && i < m; i++)
        diff |= (unsigned char)(h[i] ^ hs->token[i]);
    return diff == 0;
}

/* DNS rebinding defence (the MCP transport spec): a browser page's request carries an Origin;
 * only one naming this very server (same host as the Host header) or a loopback host is served.
 * Requests without an Origin (hosts, SDKs, curl) are not from a browser page. */
static bool origin_allowed(struct MHD_Connection *c)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin)
        return true;
    const char *host = strstr(origin, "://");
    if (!host)
        return false;
    host += 3;
    const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (want && strcmp(host, want) == 0)
        return true;
    static const char *const loopback[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < ELEMENTSOF(loopback); i++) {
        size_t n = strlen(loopback[i]);
        if (strncmp(host, loopback[i], n) == 0 && (host[n] == 0 || host[n] == ':'))
            return true;
    }
    return false;
}

static http_session *session_find(http_state *hs, const char *id)
{
    pthread_mutex_lock(&hs->lock);
    http_session *s = hs->sessions;
    while (s && (s->deleted || strcmp(s->s.id, id) != 0))
        s = s->next;
    pthread_mutex_unlock(&hs->lock);
    return s;
}

static http_session *session_new(http_state *hs)
{
    http_session *s = calloc(1, sizeof(*s));
    uint8_t raw[16];
    if (!s)
        return NULL;
    random_bytes(raw, sizeof(raw));
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(s->s.id + 2 * i, 3, "%02x", raw[i]);
    pthread_mutex_lock(&hs->lock);
    s->next = hs->sessions;
    hs->sessions = s;
    pthread_mutex_unlock(&hs->lock);
    return s;
}

static bool version_known(const char *v)
{
    for (size_t i = 0; mcp_versions[i]; i++)
        if (strcmp(v, mcp_versions[i]) == 0)
            return true;
    return false;
}

/* Starts the SSE answer of a tools/call; takes over msg. */
static enum MHD_Result stream_call(http_state *hs, struct MHD_Connection *c, http_session *sess,
                                   jsonrpc_msg *msg)
{
    sse_stream *st = calloc(1, sizeof(*st));
    if (!st) {
        jsonrpc_msg_done(msg);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_ERR_INTERNAL,
                           "out of memory");
    }
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->cond, NULL);
    st->hs = hs;
    st->msg = *msg;
    st->refs = 2; /* the worker and the response */
    st->call = (mcp_call){.session = &sess->s, .notify = sse_notify, .transport = st};
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, st, sse_free);
    pthread_mutex_lock(&hs->lock);
    hs->workers++;
    pthread_mutex_unlock(&hs->lock);
    if (!r || mcp_thread_start(sse_worker, st) < 0) {
        pthread_mutex_lock(&hs->lock);
        hs->workers--;
        pthread_mutex_unlock(&hs->lock);
        if (r)
            MHD_destroy_response(r); /* calls sse_free: one reference */
        else
            st->refs--;
        sse_unref(st);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_ERR_INTERNAL, "no thread");
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Mcp-Session-Id", sess->s.id);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle_post(http_state *hs, struct MHD_Connection *c, const buf *body)
{
    jsonrpc_msg m;
    json_t *error = NULL;
    if (jsonrpc_parse(body->data ? body->data : "", body->len, &m, &error) < 0) {
        if (!error)
            return reply(c, MHD_HTTP_ACCEPTED, NULL, NULL, NULL);
        return reply_json(c, MHD_HTTP_BAD_REQUEST, error, NULL);
    }
    const char *sid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id");
    const char *pv = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "MCP-Protocol-Version");
    bool init = m.kind == JSONRPC_MSG_REQUEST && strcmp(m.method, "initialize") == 0;
    http_session *sess = NULL;
    if (init) {
        sess = session_new(hs);
    } else if (!sid) {
        jsonrpc_msg_done(&m);
        return reply_error(c, MHD_HTTP_BAD_REQUEST, JSONRPC_ERR_INVALID_REQUEST,
                           "Bad Request: Mcp-Session-Id header is required (send initialize "
                           "first)");
    } else if (!(sess = session_find(hs, sid))) {
        jsonrpc_msg_done(&m);
        return reply_error(c, MHD_HTTP_NOT_FOUND, JSONRPC_ERR_INVALID_REQUEST,
                           "Session not found: initialize a new session");
    } else if (pv && !version_known(pv)) {
        jsonrpc_msg_done(&m);
        return reply_error(c, MHD_HTTP_BAD_REQUEST, JSONRPC_ERR_INVALID_REQUEST,
                           "Bad Request: unsupported MCP-Protocol-Version");
    }
    if (!sess) {
        jsonrpc_msg_done(&m);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_ERR_INTERNAL,
                           "out of memory");
    }
    /* A tool call that asked for progress gets an SSE stream to carry it; any other request is
     * answered with plain JSON on this connection's thread (cancellation still reaches it:
     * notifications/cancelled arrives on another connection). */
    if (m.kind == JSONRPC_MSG_REQUEST && strcmp(m.method, "tools/call") == 0 &&
        json_object_get(json_object_get(m.params, "_meta"), "progressToken"))
        return stream_call(hs, c, sess, &m);
    mcp_call call = {.session = &sess->s};
    json_t *answer = mcp_handle(hs->server, &call, &m);
    mcp_call_done(&call);
    jsonrpc_msg_done(&m);
    if (!answer)
        return reply(c, MHD_HTTP_ACCEPTED, NULL, NULL, NULL);
    if (init && json_object_get(answer, "error")) { /* no session came of it */
        pthread_mutex_lock(&hs->lock);
        sess->deleted = true;
        pthread_mutex_unlock(&hs->lock);
        return reply_json(c, MHD_HTTP_OK, answer, NULL);
    }
    return reply_json(c, MHD_HTTP_OK, answer, sess->s.id);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    http_state *hs = cls;
    http_request *req = *con_cls;
    if (!req) {
        req = calloc(1, sizeof(*req));
        if (!req)
            return MHD_NO;
        *con_cls = req;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (req->body.len + *upload_size > MAX_BODY || req->too_large)
            req->too_large = true;
        else if (buf_append(&req->body, upload, *upload_size) < 0)
            return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, MCP_PATH) != 0)
        return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found: the MCP endpoint is /mcp\n",
                     NULL);
    if (!origin_allowed(c))
        return reply_error(c, MHD_HTTP_FORBIDDEN, JSONRPC_ERR_INVALID_REQUEST,
                           "Forbidden: Origin not allowed");
    if (!authorized(hs, c))
        return reply_error(c, MHD_HTTP_UNAUTHORIZED, MCP_ERR_UNAUTHORIZED,
                           "Unauthorized: send Authorization: Bearer <token>");
    if (strcmp(method, "POST") == 0) {
        if (req->too_large)
            return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, JSONRPC_ERR_INVALID_REQUEST,
                               "message too large");
        return handle_post(hs, c, &req->body);
    }
    if (strcmp(method, "DELETE") == 0) {
        const char *sid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id");
        http_session *s = sid ? session_find(hs, sid) : NULL;
        if (!s)
            return reply_error(c, MHD_HTTP_NOT_FOUND, JSONRPC_ERR_INVALID_REQUEST,
                               "Session not found");
        pthread_mutex_lock(&hs->lock);
        s->deleted = true; /* kept until exit: running calls may still point at it */
        pthread_mutex_unlock(&hs->lock);
        return reply(c, MHD_HTTP_OK, NULL, NULL, NULL);
    }
    return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                 "method not allowed: POST JSON-RPC messages to /mcp\n", NULL);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_request *req = *con_cls;
    if (!req)
        return;
    buf_done(&req->body);
    free(req);
    *con_cls = NULL;
}

/* Binds HOST:PORT (port 0: any); prints the address actually bound. */
static int listen_on(const char *address, char **ret_bound)
{
    _cleanup_free_ char *host = strdup(address);
    if (!host)
        return -ENOMEM;
    char *colon = strrchr(host, ':');
    if (!colon)
        return -EINVAL;
    *colon = 0;
    const char *port = colon + 1;
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = 0;
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(*h ? h : NULL, port, &hints, &ai) != 0 || !ai)
        return -EADDRNOTAVAIL;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        int r = -errno;
        freeaddrinfo(ai);
        safe_close(fd);
        return r;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char name[INET6_ADDRSTRLEN] = "?", serv[16] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, name, sizeof(name), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV);
    if (asprintf(ret_bound, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", name, serv) < 0) {
        safe_close(fd);
        return -ENOMEM;
    }
    return fd;
}

int mcp_serve_http(mcp_server *s, const mcp_http_options *o)
{
    int lr = mcp_mhd_load();
    if (lr < 0)
        return lr;
    _cleanup_free_ char *bound = NULL;
    int fd = listen_on(o->listen, &bound);
    if (fd < 0) {
        fprintf(stderr, "asb mcp: cannot listen on %s: %s\n", o->listen, strerror(-fd));
        return fd;
    }
    http_state hs = {.server = s, .token = o->token};
    pthread_mutex_init(&hs.lock, NULL);
    pthread_cond_init(&hs.idle, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d =
        MHD_start_daemon(flags, 0, NULL, NULL, on_access, &hs, MHD_OPTION_LISTEN_SOCKET,
                         (MHD_socket)fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, &hs,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "asb mcp: cannot start the HTTP server on %s\n", bound);
        close(fd);
        pthread_cond_destroy(&hs.idle);
        pthread_mutex_destroy(&hs.lock);
        return -EIO;
    }
    fprintf(stderr, "asb mcp: listening address=%s endpoint=http://%s" MCP_PATH " auth=%s\n", bound,
            bound, o->token ? "bearer" : "none");
    while (!mcp_stop)
        usleep(100000);
    /* Wake streams blocked in sse_read so MHD can stop their connections. */
    pthread_mutex_lock(&s->lock);
    for (mcp_call *c = s->running; c; c = c->next)
        c->cancel = 1;
    pthread_mutex_unlock(&s->lock);
    MHD_stop_daemon(d);
    close(fd);
    /* A worker whose client went away may still be finishing its (cancelled) call. */
    pthread_mutex_lock(&hs.lock);
    while (hs.workers > 0)
        pthread_cond_wait(&hs.idle, &hs.lock);
    pthread_mutex_unlock(&hs.lock);
    mcp_threads_join_all();
    pthread_cond_destroy(&hs.idle);
    for (http_session *n; hs.sessions; hs.sessions = n) {
        n = hs.sessions->next;
        free(hs.sessions);
    }
    pthread_mutex_destroy(&hs.lock);
    fprintf(stderr, "asb mcp: stopped\n");
    return 0;
}
