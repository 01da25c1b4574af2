/* One ACP connection: line reader, writer, outbound request table and method dispatch. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "agent/acp-server.h"
#include "basic/io-util.h"
#include "basic/macro.h"
#include "shared/log.h"

int acp_conn_send(acp_conn *c, json_t *msg)
{
    if (!msg)
        return -ENOMEM;
    size_t len = 0;
    char *line = jsonrpc_dump(msg, &len);
    json_decref(msg);
    if (!line)
        return -ENOMEM;
    int r = 0;
    pthread_mutex_lock(&c->write_lock);
    if (loop_send(c->fd, line, len) < 0) {
        r = -EPIPE;
        /* Wake the reader: the peer is gone or stuck. */
        shutdown(c->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&c->write_lock);
    free(line);
    return r;
}

static void pending_unlink(acp_conn *c, acp_pending *p)
{
    for (acp_pending **pp = &c->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

int acp_conn_call(acp_conn *c, const char *method, json_t *params, const volatile int *cancel,
                  json_t **ret_result, json_t **ret_error)
{
    acp_pending *p = calloc(1, sizeof(*p));
    if (!p) {
        json_decref(params);
        return -ENOMEM;
    }
    pthread_mutex_lock(&c->lock);
    if (c->closed) {
        pthread_mutex_unlock(&c->lock);
        free(p);
        json_decref(params);
        return -EPIPE;
    }
    p->id = c->next_id++;
    p->next = c->pending;
    c->pending = p;
    pthread_mutex_unlock(&c->lock);

    int r = acp_conn_send(c, jsonrpc_request(p->id, method, params));

    pthread_mutex_lock(&c->lock);
    while (r == 0 && !p->done && !c->closed && !(cancel && *cancel))
        pthread_cond_wait(&c->cond, &c->lock);
    if (r == 0 && !p->done)
        r = c->closed ? -EPIPE : -ECANCELED;
    pending_unlink(c, p);
    pthread_mutex_unlock(&c->lock);
    if (r == 0) {
        *ret_result = p->result;
        *ret_error = p->error;
    } else {
        json_decref(p->result);
        json_decref(p->error);
    }
    free(p);
    return r;
}

static void handle_response(acp_conn *c, const jsonrpc_msg *m)
{
    if (!json_is_integer(m->id))
        return; /* not one of ours: we only send integer ids */
    pthread_mutex_lock(&c->lock);
    for (acp_pending *p = c->pending; p; p = p->next)
        if (p->id == json_integer_value(m->id) && !p->done) {
            p->done = true;
            p->result = json_incref(m->result);
            p->error = json_incref(m->error);
            pthread_cond_broadcast(&c->cond);
            break;
        }
    pthread_mutex_unlock(&c->lock);
}

static void reply_error(acp_conn *c, json_t *id, int code, const char *message)
{
    acp_conn_send(c, jsonrpc_error(id, code, message, NULL));
}

static void handle_initialize(acp_conn *c, json_t *id, const json_t *params)
{
    json_int_t version;
    const char *why;
    if (acp_params_initialize(params, &version, &why) < 0) {
        reply_error(c, id, JSONRPC_ERR_INVALID_PARAMS, why);
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->initialized = true;
    pthread_mutex_unlock(&c->lock);
    json_t *methods = json_array();
    if (c->server->cfg.token)
        json_array_append_new(
            methods, json_pack("{s:s,s:s,s:s}", "id", ACP_AUTH_METHOD_ID, "name",
                               "Agent Sandbox token", "description",
                               "Bearer token of the control plane ($ASB_STATE_DIR/token), sent as "
                               "_meta.token of the authenticate request"));
    /* We always answer with the one version we speak; a client that cannot speak it closes. */
    json_t *result = json_pack(
        "{s:i,s:{s:b,s:{s:b,s:b,s:b},s:{s:b,s:b}},s:o,s:{s:s,s:s,s:s}}", "protocolVersion",
        ACP_PROTOCOL_VERSION, "agentCapabilities", "loadSession", 1, "promptCapabilities", "image",
        0, "audio", 0, "embeddedContext", 1, "mcpCapabilities", "http", 0, "sse", 0, "authMethods",
        methods, "agentInfo", "name", "acp-server", "title", "Agent Sandbox", "version", "0.1.0");
    acp_conn_send(c, jsonrpc_result(id, result));
}

/* An authenticated client may stay idle as long as it likes; others are closed after
 * ACP_IO_TIMEOUT_SEC without input. */
static void set_read_timeout(int fd, int sec)
{
    struct timeval tv = {.tv_sec = sec};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Constant time in the length of the expected token. */
static bool token_equal(const char *expected, const char *given)
{
    size_t n = strlen(expected), m = strlen(given);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)expected[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

static void handle_authenticate(acp_conn *c, json_t *id, const json_t *params)
{
    const char *method_id, *token, *why;
    if (acp_params_authenticate(params, &method_id, &token, &why) < 0) {
        reply_error(c, id, JSONRPC_ERR_INVALID_PARAMS, why);
        return;
    }
    if (strcmp(method_id, ACP_AUTH_METHOD_ID) != 0 || !c->server->cfg.token) {
        reply_error(c, id, JSONRPC_ERR_INVALID_PARAMS, "unknown authentication method");
        return;
    }
    if (!token || !token_equal(c->server->cfg.token, token)) {
        log_warn("acp: authentication failed");
        reply_error(c, id, ACP_ERR_AUTH_REQUIRED, "Authentication required: invalid token");
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->authenticated = true;
    pthread_mutex_unlock(&c->lock);
    set_read_timeout(c->fd, 0);
    acp_conn_send(c, jsonrpc_result(id, json_object()));
}

static bool is_session_method(const char *m)
{
    return strncmp(m, "session/", 8) == 0;
}

static void dispatch(acp_conn *c, const jsonrpc_msg *m)
{
    if (m->kind == JSONRPC_MSG_RESPONSE) {
        handle_response(c, m);
        return;
    }
    pthread_mutex_lock(&c->lock);
    bool initialized = c->initialized, authenticated = c->authenticated;
    pthread_mutex_unlock(&c->lock);

    if (m->kind == JSONRPC_MSG_NOTIFICATION) {
        /* Unknown notifications are ignored, as are cancels from unauthenticated peers. */
        if (strcmp(m->method, "session/cancel") == 0 && authenticated)
            acp_session_handle_cancel(c, m->params);
        return;
    }
    if (strcmp(m->method, "initialize") == 0) {
        handle_initialize(c, m->id, m->params);
        return;
    }
    static const char *const known[] = {"authenticate", "session/new", "session/load",
                                        "session/prompt"};
    bool found = false;
    for (size_t i = 0; i < ELEMENTSOF(known); i++)
        found = found || strcmp(m->method, known[i]) == 0;
    if (!found) {
        acp_conn_send(c, jsonrpc_error(m->id, JSONRPC_ERR_METHOD_NOT_FOUND, "Method not found",
                                           json_pack("{s:s}", "method", m->method)));
        return;
    }
    if (!initialized) {
        reply_error(c, m->id, JSONRPC_ERR_INVALID_REQUEST, "Invalid Request: call initialize first");
        return;
    }
    if (strcmp(m->method, "authenticate") == 0) {
        handle_authenticate(c, m->id, m->params);
        return;
    }
    if (is_session_method(m->method) && !authenticated) {
        reply_error(c, m->id, ACP_ERR_AUTH_REQUIRED, "Authentication required");
        return;
    }
    if (strcmp(m->method, "session/new") == 0)
        acp_session_handle_new(c, m->id, m->params);
    else if (strcmp(m->method, "session/load") == 0)
        acp_session_handle_load(c, m->id, m->params);
    else
        acp_session_handle_prompt(c, m->id, m->params);
}

static void handle_line(acp_conn *c, char *line, size_t len)
{
    /* Trim like the SDK's reader; blank lines are skipped. */
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    size_t start = 0;
    while (start < len && (line[start] == ' ' || line[start] == '\t'))
        start++;
    if (start == len)
        return;
    jsonrpc_msg m;
    json_t *err = NULL;
    if (jsonrpc_parse(line + start, len - start, &m, &err) < 0) {
        if (err)
            acp_conn_send(c, err);
        return;
    }
    dispatch(c, &m);
    jsonrpc_msg_done(&m);
}

static acp_conn *conn_new(acp_server *s, int fd)
{
    acp_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->server = s;
    c->fd = fd;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->write_lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->authenticated = s->cfg.allow_unauthenticated && s->loopback;
    struct timeval tv = {.tv_sec = ACP_IO_TIMEOUT_SEC};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    set_read_timeout(fd, c->authenticated ? 0 : ACP_IO_TIMEOUT_SEC);
    return c;
}

static void conn_register(acp_conn *c)
{
    acp_server *s = c->server;
    pthread_mutex_lock(&s->lock);
    c->next_conn = s->conns;
    s->conns = c;
    if (s->stopping)
        shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&s->lock);
}

static void conn_unregister(acp_conn *c)
{
    acp_server *s = c->server;
    pthread_mutex_lock(&s->lock);
    for (acp_conn **pp = &s->conns; *pp; pp = &(*pp)->next_conn)
        if (*pp == c) {
            *pp = c->next_conn;
            break;
        }
    pthread_mutex_unlock(&s->lock);
}

static void conn_close_and_free(acp_conn *c)
{
    pthread_mutex_lock(&c->lock);
    c->closed = true;
    for (acp_session *ss = c->sessions; ss; ss = ss->next)
        ss->cancel = 1;
    pthread_cond_broadcast(&c->cond);
    while (c->workers > 0)
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
    acp_session_free_all(c);
    conn_unregister(c);
    shutdown(c->fd, SHUT_RDWR);
    close(c->fd);
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->write_lock);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void acp_conn_serve(acp_server *s, int fd)
{
    acp_conn *c = conn_new(s, fd);
    if (!c) {
        close(fd);
        return;
    }
    conn_register(c);
    size_t cap = 64 * 1024, len = 0, scanned = 0;
    char *buf = malloc(cap);
    while (buf) {
        char *nl = memchr(buf + scanned, '\n', len - scanned);
        if (nl) {
            size_t n = (size_t)(nl - buf);
            handle_line(c, buf, n);
            memmove(buf, nl + 1, len - n - 1);
            len -= n + 1;
            scanned = 0;
            continue;
        }
        scanned = len;
        if (len >= JSONRPC_MAX_LINE) {
            acp_conn_send(
                c, jsonrpc_error(NULL, JSONRPC_ERR_PARSE, "Parse error: line too long", NULL));
            break;
        }
        if (len == cap) {
            size_t ncap = MIN(cap * 2, (size_t)JSONRPC_MAX_LINE);
            char *nb = realloc(buf, ncap);
            if (!nb)
                break;
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    free(buf);
    conn_close_and_free(c);
}
