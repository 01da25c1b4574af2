/* `asb mcp` over stdio: newline-delimited JSON-RPC on stdin/stdout (MCP's stdio transport).
 * Requests that talk to the cluster run on threads of their own so a notifications/cancelled read
 * meanwhile reaches them; every line out is written whole under one lock. Logs go to stderr. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/io-util.h"
#include "basic/time-util.h"
#include "mcp/asb-mcp.h"

typedef struct stdio_state {
    mcp_server *server;
    mcp_session session;
    pthread_mutex_t out_lock;
    pthread_mutex_t lock; /* running count */
    pthread_cond_t idle;
    unsigned running;
} stdio_state;

typedef struct stdio_job {
    stdio_state *st;
    jsonrpc_msg msg;
    mcp_call call;
} stdio_job;

static int write_message(stdio_state *st, json_t *msg)
{
    size_t len;
    char *line = jsonrpc_dump(msg, &len);
    json_decref(msg);
    if (!line)
        return -ENOMEM;
    int r = 0;
    pthread_mutex_lock(&st->out_lock);
    r = loop_write(STDOUT_FILENO, line, len);
    pthread_mutex_unlock(&st->out_lock);
    free(line);
    return r;
}

static int stdio_notify(mcp_call *call, json_t *notification)
{
    return write_message(call->transport, notification);
}

static void *job_thread(void *arg)
{
    stdio_job *job = arg;
    stdio_state *st = job->st;
    json_t *reply = mcp_handle(st->server, &job->call, &job->msg);
    if (reply)
        (void)write_message(st, reply);
    mcp_call_done(&job->call);
    jsonrpc_msg_done(&job->msg);
    free(job);
    pthread_mutex_lock(&st->lock);
    st->running--;
    pthread_cond_broadcast(&st->idle);
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

/* Requests that may wait on the cluster or a sandbox run on a thread. */
static bool slow(const jsonrpc_msg *m)
{
    return m->kind == JSONRPC_MSG_REQUEST &&
           (strcmp(m->method, "tools/call") == 0 || strncmp(m->method, "resources/", 10) == 0);
}

static void handle_line(stdio_state *st, const char *line, size_t len)
{
    jsonrpc_msg m;
    json_t *error = NULL;
    if (jsonrpc_parse(line, len, &m, &error) < 0) {
        if (error)
            (void)write_message(st, error);
        return;
    }
    mcp_call call = {.session = &st->session, .notify = stdio_notify, .transport = st};
    if (slow(&m)) {
        stdio_job *job = calloc(1, sizeof(*job));
        if (job) {
            job->st = st;
            job->msg = m;
            job->call = call;
            pthread_mutex_lock(&st->lock);
            st->running++;
            pthread_mutex_unlock(&st->lock);
            if (mcp_thread_start(job_thread, job) == 0)
                return;
            pthread_mutex_lock(&st->lock);
            st->running--;
            pthread_mutex_unlock(&st->lock);
            free(job);
        }
        /* No thread: run it here. */
    }
    json_t *reply = mcp_handle(st->server, &call, &m);
    if (reply)
        (void)write_message(st, reply);
    mcp_call_done(&call);
    jsonrpc_msg_done(&m);
}

/* Cancels every running call (the peer went away or we were told to stop). */
static void cancel_all(mcp_server *s)
{
    pthread_mutex_lock(&s->lock);
    for (mcp_call *c = s->running; c; c = c->next)
        c->cancel = 1;
    pthread_mutex_unlock(&s->lock);
}

int mcp_serve_stdio(mcp_server *s)
{
    stdio_state st = {.server = s};
    pthread_mutex_init(&st.out_lock, NULL);
    pthread_mutex_init(&st.lock, NULL);
    pthread_cond_init(&st.idle, NULL);
    _cleanup_buf_ buf in = BUF_INIT;
    int r = 0;
    while (!mcp_stop) {
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        if (buf_reserve(&in, 65536) < 0) {
            r = -ENOMEM;
            break;
        }
        ssize_t n = read(STDIN_FILENO, in.data + in.len, 65536);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break; /* the host closed our stdin: shut down */
        in.len += (size_t)n;
        char *nl;
        while ((nl = memchr(in.data, '\n', in.len))) {
            size_t len = (size_t)(nl - in.data);
            if (len > 0 && in.data[len - 1] == '\r')
                len--;
            if (len > 0)
                handle_line(&st, in.data, len);
            buf_consume(&in, (size_t)(nl - in.data) + 1);
        }
        if (in.len > JSONRPC_MAX_LINE) {
            fprintf(stderr, "asb mcp: a message longer than %u bytes: closing\n", JSONRPC_MAX_LINE);
            r = -EMSGSIZE;
            break;
        }
    }
    /* End of input: the calls already made still get their answers (a host may pipe requests
     * and close stdin), unless we are told to stop: then they are cancelled. */
    pthread_mutex_lock(&st.lock);
    while (st.running > 0) {
        if (mcp_stop || r < 0)
            cancel_all(s);
        struct timespec ts = timespec_realtime_after(200 * USEC_PER_MSEC);
        pthread_cond_timedwait(&st.idle, &st.lock, &ts);
    }
    pthread_mutex_unlock(&st.lock);
    mcp_threads_join_all();
    pthread_cond_destroy(&st.idle);
    pthread_mutex_destroy(&st.lock);
    pthread_mutex_destroy(&st.out_lock);
    return r;
}
