/* One client connection: socket reads into the nghttp2 session, batched writes of what the
 * session produces (bounded in flight, so a slow client stalls its streams, not our memory),
 * once-per-iteration flushing, GOAWAY and close. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-grpc-server.h"

#define CONN_WRITE_CHUNK (256u * 1024)
#define CONN_MAX_WRITES_PENDING (1024u * 1024)

typedef struct conn_write {
    uv_write_t req;
    grpc_conn *conn;
    uint8_t *buf;
    size_t len;
} conn_write;

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *uvb)
{
    static char rbuf[64 * 1024];
    *uvb = uv_buf_init(rbuf, sizeof(rbuf));
}

static void conn_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *uvb)
{
    grpc_conn *conn = stream->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        grpc_conn_close(conn);
        return;
    }
    ssize_t r = nghttp2_session_mem_recv(conn->session, (const uint8_t *)uvb->base, (size_t)nread);
    if (r < 0) {
        grpc_conn_close(conn);
        return;
    }
    grpc_conn_mark_dirty(conn);
}

int grpc_conn_start(grpc_conn *conn)
{
    int r = grpc_session_new(&conn->session, conn);
    if (r < 0)
        return r;
    conn->h.handle.data = conn;
    grpc_server *s = conn->server;
    conn->next = s->conns;
    if (s->conns)
        s->conns->prev = conn;
    s->conns = conn;
    r = uv_read_start(&conn->h.stream, conn_alloc_cb, conn_read_cb);
    if (r < 0)
        return r;
    if (s->stopping)
        grpc_conn_goaway(conn);
    grpc_conn_mark_dirty(conn);
    return 0;
}

static void conn_closed_cb(uv_handle_t *h)
{
    grpc_conn *conn = h->data;
    buf_done(&conn->wbuf);
    free(conn);
}

void grpc_conn_close(grpc_conn *conn)
{
    if (conn->closing)
        return;
    conn->closing = true;
    grpc_server *s = conn->server;
    grpc_conn_drop_calls(conn);
    if (conn->session) {
        nghttp2_session_del(conn->session);
        conn->session = NULL;
    }
    if (conn->dirty) {
        for (grpc_conn **p = &s->dirty; *p; p = &(*p)->next_dirty)
            if (*p == conn) {
                *p = conn->next_dirty;
                break;
            }
        conn->dirty = false;
    }
    if (conn->prev)
        conn->prev->next = conn->next;
    else
        s->conns = conn->next;
    if (conn->next)
        conn->next->prev = conn->prev;
    uv_close(&conn->h.handle, conn_closed_cb);
}

void grpc_conn_goaway(grpc_conn *conn)
{
    if (conn->closing || !conn->session)
        return;
    nghttp2_submit_goaway(conn->session, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(conn->session), NGHTTP2_NO_ERROR,
                          NULL, 0);
    grpc_conn_mark_dirty(conn);
}

static void conn_write_cb(uv_write_t *req, int status)
{
    conn_write *w = (conn_write *)req;
    grpc_conn *conn = w->conn;
    conn->writes_pending -= w->len;
    free(w->buf);
    free(w);
    if (conn->closing)
        return;
    if (status < 0)
        grpc_conn_close(conn);
    else
        grpc_conn_mark_dirty(conn);
}

static int conn_write_out(grpc_conn *conn)
{
    if (conn->wbuf.len == 0)
        return 0;
    size_t off = 0;
    if (conn->writes_pending == 0) {
        uv_buf_t b = uv_buf_init(conn->wbuf.data, (unsigned)conn->wbuf.len);
        int n = uv_try_write(&conn->h.stream, &b, 1);
        if (n < 0 && n != UV_EAGAIN)
            return n;
        if (n > 0)
            off = (size_t)n;
        if (off == conn->wbuf.len) {
            buf_reset(&conn->wbuf);
            return 0;
        }
    }
    conn_write *w = malloc(sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->conn = conn;
    w->len = conn->wbuf.len - off;
    w->buf = (uint8_t *)buf_steal(&conn->wbuf, NULL); /* never NULL: the buffer holds data */
    uv_buf_t b = uv_buf_init((char *)w->buf + off, (unsigned)w->len);
    int r = uv_write(&w->req, &conn->h.stream, &b, 1, conn_write_cb);
    if (r < 0) {
        free(w->buf);
        free(w);
        return r;
    }
    conn->writes_pending += w->len;
    return 0;
}

static void conn_flush(grpc_conn *conn)
{
    if (conn->closing)
        return;
    int r = 0;
    while (conn->writes_pending < CONN_MAX_WRITES_PENDING) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(conn->session, &p);
        if (conn->closing)
            return;
        if (n < 0) {
            r = -EPROTO;
            break;
        }
        if (n == 0)
            break;
        r = buf_append(&conn->wbuf, p, (size_t)n);
        if (r < 0)
            break;
        if (conn->wbuf.len >= CONN_WRITE_CHUNK) {
            r = conn_write_out(conn);
            if (r < 0)
                break;
        }
    }
    if (r == 0)
        r = conn_write_out(conn);
    if (r < 0 || (!nghttp2_session_want_read(conn->session) &&
                  !nghttp2_session_want_write(conn->session) && conn->writes_pending == 0)) {
        grpc_conn_close(conn);
    }
}

static void on_flush_idle(uv_idle_t *h)
{
    grpc_server_flush(h->data);
}

void grpc_server_flush(grpc_server *s)
{
    while (s->dirty) {
        grpc_conn *conn = s->dirty;
        s->dirty = conn->next_dirty;
        conn->dirty = false;
        conn_flush(conn);
    }
    uv_idle_stop(&s->flusher);
}

void grpc_conn_mark_dirty(grpc_conn *conn)
{
    if (conn->dirty || conn->closing)
        return;
    conn->dirty = true;
    conn->next_dirty = conn->server->dirty;
    conn->server->dirty = conn;
    if (!uv_is_active((uv_handle_t *)&conn->server->flusher) &&
        !uv_is_closing((uv_handle_t *)&conn->server->flusher))
        uv_idle_start(&conn->server->flusher, on_flush_idle);
}
