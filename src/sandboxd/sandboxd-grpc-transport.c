/* gRPC calls on nghttp2 server sessions (h2c with prior knowledge): streams become calls,
 * request DATA is de-framed into messages, responses are framed, flow-controlled by the peer's
 * windows, and end with grpc-status/grpc-message trailers (trailers-only for early errors).
 * The socket side of a connection is sandboxd-grpc-conn.c's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-grpc-server.h"

#define STREAM_WINDOW (1u << 20)
#define CONN_WINDOW (16u << 20)

struct grpc_outbuf {
    grpc_outbuf *next;
    uint8_t *buf;
    size_t len, off;
};

sandboxd *grpc_call_sandboxd(const grpc_call *c)
{
    return c->server->sd;
}

/* ---- calls ---- */

static grpc_call *call_new(grpc_conn *conn, int32_t stream_id)
{
    grpc_call *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->server = conn->server;
    c->conn = conn;
    c->stream_id = stream_id;
    grpc_server *s = conn->server;
    c->next = s->calls;
    if (s->calls)
        s->calls->prev = c;
    s->calls = c;
    s->ncalls++;
    return c;
}

static void free_cb(uv_handle_t *h)
{
    free(h);
}

static void call_stop_deadline(grpc_call *c)
{
    if (c->deadline) {
        uv_close((uv_handle_t *)c->deadline, free_cb);
        c->deadline = NULL;
    }
}

static void call_free(grpc_call *c)
{
    grpc_server *s = c->server;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->ncalls--;
    if (s->ncalls == 0)
        grpc_server_went_idle(s);
    call_stop_deadline(c);
    while (c->out_head) {
        grpc_outbuf *o = c->out_head;
        c->out_head = o->next;
        free(o->buf);
        free(o);
    }
    grpc_frame_decoder_done(&c->dec);
    free(c->req);
    free(c->path);
    free(c->status_msg);
    for (size_t i = 0; i < c->n_trailer_md; i++)
        free(c->trailer_md[i]);
    free(c);
}

/* The transport ends the call: let the handler drop its state first. */
static void call_detach_handler(grpc_call *c)
{
    if (c->dispatched && !c->finished && c->method->on_cancel)
        c->method->on_cancel(c);
    c->data = NULL;
}

static ssize_t data_read_cb(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data);

#define MAKE_NV(n, v, vlen)                                                                        \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vlen), NGHTTP2_NV_FLAG_NONE                \
    }

/* Fills trailer fields (at most TRAILER_NV); *owned receives a buffer to free after
 * submission. */
#define TRAILER_NV (2 + GRPC_CALL_MAX_TRAILERS)
static size_t trailer_nv(grpc_call *c, nghttp2_nv *nv, char statusbuf[16], char **owned)
{
    size_t n = 0;
    int len = snprintf(statusbuf, 16, "%u", status_grpc(c->status));
    nv[n++] = (nghttp2_nv)MAKE_NV("grpc-status", statusbuf, (size_t)len);
    *owned = NULL;
    if (c->status != STATUS_OK && c->status_msg && c->status_msg[0]) {
        *owned = grpc_message_encode(c->status_msg);
        if (*owned)
            nv[n++] = (nghttp2_nv)MAKE_NV("grpc-message", *owned, strlen(*owned));
    }
    for (size_t i = 0; i < c->n_trailer_md; i++) {
        char *name = c->trailer_md[i], *value = name + strlen(name) + 1;
        nv[n++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                               NGHTTP2_NV_FLAG_NONE};
    }
    return n;
}

int grpc_call_add_trailer(grpc_call *c, const char *name, const char *value)
{
    if (c->n_trailer_md == GRPC_CALL_MAX_TRAILERS)
        return -E2BIG;
    size_t nl = strlen(name), vl = strlen(value);
    char *md = malloc(nl + vl + 2);
    if (!md)
        return -ENOMEM;
    memcpy(md, name, nl + 1);
    memcpy(md + nl + 1, value, vl + 1);
    c->trailer_md[c->n_trailer_md++] = md;
    return 0;
}

static void call_submit_headers(grpc_call *c)
{
    nghttp2_nv nv[] = {MAKE_NV(":status", "200", 3),
                       MAKE_NV("content-type", "application/grpc", 16)};
    nghttp2_data_provider prd = {.source.ptr = c, .read_callback = data_read_cb};
    c->headers_sent = true;
    if (nghttp2_submit_response(c->conn->session, c->stream_id, nv, ELEMENTSOF(nv), &prd) != 0)
        nghttp2_submit_rst_stream(c->conn->session, NGHTTP2_FLAG_NONE, c->stream_id,
                                  NGHTTP2_INTERNAL_ERROR);
}

static void call_submit_trailers_only(grpc_call *c)
{
    /* Like grpc-go, a request that is not gRPC at all is answered HTTP 415. */
    nghttp2_nv nv[2 + TRAILER_NV] = {MAKE_NV(":status", c->grpc_ct ? "200" : "415", 3),
                                     MAKE_NV("content-type", "application/grpc", 16)};
    char statusbuf[16];
    char *owned;
    size_t n = 2 + trailer_nv(c, nv + 2, statusbuf, &owned);
    c->headers_sent = true;
    c->trailers_queued = true;
    if (nghttp2_submit_response(c->conn->session, c->stream_id, nv, n, NULL) != 0)
        nghttp2_submit_rst_stream(c->conn->session, NGHTTP2_FLAG_NONE, c->stream_id,
                                  NGHTTP2_INTERNAL_ERROR);
    free(owned);
}

static void call_kick(grpc_call *c)
{
    if (c->deferred) {
        c->deferred = false;
        nghttp2_session_resume_data(c->conn->session, c->stream_id);
    }
    grpc_conn_mark_dirty(c->conn);
}

int grpc_call_send_framed(grpc_call *c, uint8_t *frame, size_t off, size_t len)
{
    if (c->finished || !c->conn || c->conn->closing) {
        free(frame);
        return -ECANCELED;
    }
    grpc_outbuf *o = malloc(sizeof(*o));
    if (!o) {
        free(frame);
        return -ENOMEM;
    }
    *o = (grpc_outbuf){.buf = frame, .off = off, .len = off + len};
    if (c->out_tail)
        c->out_tail->next = o;
    else
        c->out_head = o;
    c->out_tail = o;
    c->out_pending += len;
    if (c->out_pending > GRPC_CALL_HIGH_WATER)
        c->above_high = true;
    if (!c->headers_sent)
        call_submit_headers(c);
    call_kick(c);
    return 0;
}

int grpc_call_send(grpc_call *c, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *frame = malloc(GRPC_FRAME_HEADER + len);
    if (!frame)
        return -ENOMEM;
    grpc_frame_header(frame, len);
    protobuf_c_message_pack(msg, frame + GRPC_FRAME_HEADER);
    return grpc_call_send_framed(c, frame, 0, GRPC_FRAME_HEADER + len);
}

void grpc_call_finish(grpc_call *c, status_code code, const char *msg)
{
    if (c->finished)
        return;
    c->finished = true;
    c->status = code;
    c->status_msg = msg ? strdup(msg) : NULL;
    call_stop_deadline(c);
    if (!c->conn || c->conn->closing)
        return;
    if (!c->headers_sent)
        call_submit_trailers_only(c);
    else
        call_kick(c);
    grpc_conn_mark_dirty(c->conn);
}

void grpc_call_finish_error(grpc_call *c, const api_error *e)
{
    grpc_call_finish(c, e->code, e->message);
}

void grpc_call_cancel(grpc_call *c, status_code code, const char *msg)
{
    if (c->finished)
        return;
    call_detach_handler(c);
    grpc_call_finish(c, code, msg);
}

static ssize_t data_read_cb(nghttp2_session *session, int32_t stream_id, uint8_t *out,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data)
{
    grpc_call *c = source->ptr;
    size_t n = 0;
    while (n < length && c->out_head) {
        grpc_outbuf *o = c->out_head;
        size_t k = MIN(length - n, o->len - o->off);
        memcpy(out + n, o->buf + o->off, k);
        o->off += k;
        n += k;
        if (o->off == o->len) {
            c->out_head = o->next;
            if (!c->out_head)
                c->out_tail = NULL;
            free(o->buf);
            free(o);
        }
    }
    c->out_pending -= n;
    if (!c->out_head && c->finished) {
        nghttp2_nv nv[TRAILER_NV];
        char statusbuf[16];
        char *owned;
        size_t k = trailer_nv(c, nv, statusbuf, &owned);
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        c->trailers_queued = true;
        if (nghttp2_submit_trailer(session, stream_id, nv, k) != 0)
            *data_flags &= ~NGHTTP2_DATA_FLAG_NO_END_STREAM;
        free(owned);
        return (ssize_t)n;
    }
    if (c->above_high && c->out_pending < GRPC_CALL_LOW_WATER) {
        c->above_high = false;
        if (c->dispatched && !c->finished && c->method->on_drain)
            c->method->on_drain(c);
    }
    if (n == 0) {
        c->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

/* ---- request side ---- */

static const grpc_method *method_lookup(const grpc_server *s, const char *path)
{
    if (!path)
        return NULL;
    if (s->methods) {
        for (size_t i = 0; i < s->nmethods; i++)
            if (strcmp(s->methods[i].path, path) == 0)
                return &s->methods[i];
        return NULL;
    }
    for (size_t i = 0; i < grpc_process_methods_count; i++)
        if (strcmp(grpc_process_methods[i].path, path) == 0)
            return &grpc_process_methods[i];
    for (size_t i = 0; i < grpc_reflection_methods_count; i++)
        if (strcmp(grpc_reflection_methods[i].path, path) == 0)
            return &grpc_reflection_methods[i];
    return NULL;
}

static void on_deadline(uv_timer_t *t)
{
    grpc_call *c = t->data;
    grpc_call_cancel(c, STATUS_DEADLINE_EXCEEDED, "Deadline Exceeded");
}

static void call_dispatch(grpc_call *c)
{
    if (!c->grpc_ct) {
        grpc_call_finish(c, STATUS_INTERNAL, "transport: received unexpected content-type");
        return;
    }
    c->method = method_lookup(c->server, c->path);
    if (!c->method) {
        _cleanup_free_ char *m = NULL;
        if (asprintf(&m, "unknown method %s", c->path ? c->path : "") < 0)
            m = NULL;
        grpc_call_finish(c, STATUS_UNIMPLEMENTED, m ? m : "unknown method");
        return;
    }
    c->dispatched = true;
    if (c->timeout) {
        c->deadline = malloc(sizeof(uv_timer_t));
        if (c->deadline) {
            uv_timer_init(c->server->loop, c->deadline);
            c->deadline->data = c;
            uint64_t ms = (c->timeout + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
            uv_timer_start(c->deadline, on_deadline, ms, 0);
        }
    }
}

static int on_request_message(void *payload, const uint8_t *msg, size_t len)
{
    grpc_call *c = payload;
    if (c->finished)
        return 0;
    if (c->method->client_streaming) {
        c->method->on_message(c, msg, len);
        return 0;
    }
    if (c->nreq++ > 0)
        return -EPROTO;
    c->req = malloc(len ? len : 1);
    if (!c->req)
        return -ENOMEM;
    if (len)
        memcpy(c->req, msg, len);
    c->req_len = len;
    return 0;
}

static void call_data(grpc_call *c, const uint8_t *data, size_t len)
{
    if (c->finished || !c->dispatched)
        return;
    int r = grpc_frame_decode(&c->dec, data, len, on_request_message, c);
    if (r == 0 || c->finished)
        return;
    char text[128];
    switch (r) {
    case -EMSGSIZE:
        snprintf(text, sizeof(text), "grpc: received message larger than max (%zu vs. %u)",
                 c->dec.msg_len, GRPC_MAX_RECV_MESSAGE);
        grpc_call_cancel(c, STATUS_RESOURCE_EXHAUSTED, text);
        break;
    case -EPROTONOSUPPORT:
        grpc_call_cancel(c, STATUS_UNIMPLEMENTED, "grpc: compressed messages are not supported");
        break;
    case -EPROTO:
        grpc_call_cancel(c, STATUS_UNIMPLEMENTED,
                         "grpc: too many request messages for a unary request");
        break;
    default:
        grpc_call_cancel(c, STATUS_INTERNAL, "grpc: malformed message framing");
        break;
    }
}

static void call_half_close(grpc_call *c)
{
    if (c->half_closed)
        return;
    c->half_closed = true;
    if (c->finished || !c->dispatched)
        return;
    if (!grpc_frame_decoder_idle(&c->dec)) {
        grpc_call_cancel(c, STATUS_INTERNAL, "grpc: request ended inside a message");
        return;
    }
    if (c->method->client_streaming) {
        if (c->method->on_half_close)
            c->method->on_half_close(c);
        return;
    }
    if (c->nreq != 1) {
        grpc_call_cancel(c, STATUS_UNIMPLEMENTED, "grpc: no request message for a unary request");
        return;
    }
    uint8_t *req = TAKE_PTR(c->req);
    c->method->on_message(c, req, c->req_len);
    free(req);
}

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    grpc_conn *conn = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    grpc_call *c = call_new(conn, frame->hd.stream_id);
    if (!c)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, c);
    return 0;
}

static bool has_prefix(const uint8_t *s, size_t len, const char *p)
{
    size_t n = strlen(p);
    return len >= n && memcmp(s, p, n) == 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    grpc_call *c = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!c)
        return 0;
    if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
        free(c->path);
        c->path = strndup((const char *)value, valuelen);
    } else if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
        c->grpc_ct = has_prefix(value, valuelen, "application/grpc") &&
                     (valuelen == 16 || value[16] == '+' || value[16] == ';');
    } else if (namelen == 12 && memcmp(name, "grpc-timeout", 12) == 0) {
        usec_t t;
        if (grpc_timeout_parse((const char *)value, valuelen, &t) == 0)
            c->timeout = t;
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    grpc_call *c = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!c)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        call_dispatch(c);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        call_half_close(c);
    return 0;
}

static int on_data_chunk_recv(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                              const uint8_t *data, size_t len, void *user_data)
{
    grpc_call *c = nghttp2_session_get_stream_user_data(session, stream_id);
    if (c)
        call_data(c, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data)
{
    grpc_call *c = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!c)
        return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    call_detach_handler(c);
    call_free(c);
    return 0;
}

int grpc_session_new(nghttp2_session **ret, grpc_conn *conn)
{
    nghttp2_session_callbacks *cbs;
    int r = nghttp2_session_callbacks_new(&cbs);
    if (r != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    r = nghttp2_session_server_new(ret, cbs, conn);
    nghttp2_session_callbacks_del(cbs);
    if (r != 0)
        return -ENOMEM;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
    };
    nghttp2_submit_settings(*ret, NGHTTP2_FLAG_NONE, iv, ELEMENTSOF(iv));
    nghttp2_session_set_local_window_size(*ret, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW);
    return 0;
}

void grpc_conn_drop_calls(grpc_conn *conn)
{
    grpc_server *s = conn->server;
    for (grpc_call *c = s->calls, *next; c; c = next) {
        next = c->next;
        if (c->conn != conn)
            continue;
        call_detach_handler(c);
        call_free(c);
    }
}
