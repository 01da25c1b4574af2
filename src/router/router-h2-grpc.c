/* HTTP/2 client connections (router-h2.c): a stream's gRPC upstream, one nghttp2 client session
 * per upstream socket, its window released as the client takes the bytes. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "router/router-core.h"
#include "shared/router-stats.h"
#include "router/router-h2-internal.h"

/* ---- gRPC upstream sessions ---- */

static h2_stream *stream_of_up(h2_up *u, int32_t id)
{
    return nghttp2_session_get_stream_user_data(u->s, id);
}

static ssize_t req_read(nghttp2_session *session, int32_t id, uint8_t *out, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *user)
{
    h2_stream *st = src->ptr;
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    size_t k = bb_take(&st->req, out, length);
    if (k > 0)
        nghttp2_session_consume(st->c->s, st->id, k);
    if (bb_len(&st->req) == 0 && st->req_eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)k;
    }
    return k > 0 ? (ssize_t)k : NGHTTP2_ERR_DEFERRED;
}

static int up_on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user)
{
    h2_stream *st = stream_of_up(user, frame->hd.stream_id);
    if (!st || frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
        if (namelen == 7 && memcmp(name, ":status", 7) == 0)
            return nv_add(&st->resp_hdrs, (const char *)name, namelen, (const char *)value,
                          valuelen) < 0
                       ? NGHTTP2_ERR_CALLBACK_FAILURE
                       : 0;
        if (router_response_header_dropped((const char *)name, namelen))
            return 0;
        return nv_add(&st->resp_hdrs, (const char *)name, namelen, (const char *)value, valuelen) <
                       0
                   ? NGHTTP2_ERR_CALLBACK_FAILURE
                   : 0;
    }
    if (router_response_header_dropped((const char *)name, namelen))
        return 0;
    return nv_add(&st->trailers, (const char *)name, namelen, (const char *)value, valuelen) < 0
               ? NGHTTP2_ERR_CALLBACK_FAILURE
               : 0;
}

static int up_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    h2_stream *st = stream_of_up(user, frame->hd.stream_id);
    if (!st)
        return 0;
    bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    if (frame->hd.type == NGHTTP2_HEADERS) {
        if (frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
            const char *status = nv_get(&st->resp_hdrs, ":status");
            if (status && status[0] == '1') {
                nv_free(&st->resp_hdrs);
                return 0;
            }
            int code = status ? atoi(status) : 0; /* the upstream's :status field */
            if (end) {
                /* trailers-only */
                st->resp_eof = true;
                h2_submit_resp(st, code, &st->resp_hdrs, false);
                return 0;
            }
            h2_submit_resp(st, code, &st->resp_hdrs, true);
            return 0;
        }
        if (end) {
            st->resp_eof = true;
            h2_resume_client(st);
        }
        return 0;
    }
    if (frame->hd.type == NGHTTP2_DATA && end) {
        st->resp_eof = true;
        h2_resume_client(st);
    }
    return 0;
}

static int up_on_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                      size_t len, void *user)
{
    h2_stream *st = stream_of_up(user, id);
    if (!st) {
        nghttp2_session_consume(session, id, len);
        return 0;
    }
    if (bb_put(&st->resp, data, len) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    h2_resume_client(st);
    return 0;
}

void h2_stream_upstream_failed(h2_stream *st, uint32_t code)
{
    if (!st->resp_submitted) {
        _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
        router_error_backend(&e, -ECONNREFUSED, st->route.id);
        h2_respond_error(st, &e);
    } else if (!st->resp_eof)
        nghttp2_submit_rst_stream(st->c->s, NGHTTP2_FLAG_NONE, st->id,
                                  code ? code : NGHTTP2_INTERNAL_ERROR);
}

static int up_on_close(nghttp2_session *session, int32_t id, uint32_t code, void *user)
{
    h2_stream *st = stream_of_up(user, id);
    if (!st)
        return 0;
    st->up = NULL;
    st->up_id = 0;
    if (code != NGHTTP2_NO_ERROR || !st->resp_eof)
        h2_stream_upstream_failed(st, code);
    return 0;
}

void h2_up_free(h2_up *u)
{
    nghttp2_session_del(u->s);
    safe_close(u->fd);
    bb_free(&u->out);
    free(u->addr);
    free(u);
}

static h2_up *up_get(h2_conn *c, const char *addr, int *ret_err)
{
    for (h2_up *u = c->ups; u; u = u->next)
        if (!u->dead && strcmp(u->addr, addr) == 0 &&
            nghttp2_session_get_next_stream_id(u->s) < (1 << 30))
            return u;
    int fd = router_connect(addr, c->ctx->connect_timeout_ms);
    if (fd < 0) {
        *ret_err = fd;
        return NULL;
    }
    set_nonblock(fd);
    h2_up *u = calloc(1, sizeof(*u));
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    if (!u || !(u->addr = strdup(addr)) || nghttp2_session_callbacks_new(&cb) != 0 ||
        nghttp2_option_new(&opt) != 0) {
        free(u ? u->addr : NULL);
        free(u);
        close(fd);
        nghttp2_session_callbacks_del(cb);
        *ret_err = -ENOMEM;
        return NULL;
    }
    u->fd = fd;
    u->c = c;
    nghttp2_session_callbacks_set_on_header_callback(cb, up_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, up_on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, up_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, up_on_close);
    nghttp2_option_set_no_auto_window_update(opt, 1);
    int r = nghttp2_session_client_new2(&u->s, cb, u, opt);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    if (r != 0) {
        close(fd);
        free(u->addr);
        free(u);
        *ret_err = -ENOMEM;
        return NULL;
    }
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW},
                                   {NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_submit_settings(u->s, NGHTTP2_FLAG_NONE, iv, 2);
    nghttp2_session_set_local_window_size(u->s, NGHTTP2_FLAG_NONE, 0, 4 * WINDOW);
    u->next = c->ups;
    c->ups = u;
    return u;
}

void h2_up_fail(h2_conn *c, h2_up *u)
{
    u->dead = true;
    for (h2_stream *st = c->streams; st; st = st->next)
        if (st->up == u) {
            st->up = NULL;
            st->up_id = 0;
            if (!st->resp_eof)
                h2_stream_upstream_failed(st, NGHTTP2_INTERNAL_ERROR);
        }
}

void h2_start_grpc(h2_stream *st, const char *addr)
{
    h2_conn *c = st->c;
    int err = 0;
    h2_up *u = addr ? up_get(c, addr, &err) : NULL;
    if (!u) {
        c->ctx->resolver->invalidate(c->ctx->resolver, st->route.ns, st->route.id);
        _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
        router_error_backend(&e, -ECONNREFUSED, st->route.id);
        h2_respond_error(st, &e);
        return;
    }
    nvlist h = {0};
    const char *method = nv_get(&st->req_hdrs, ":method");
    const char *path = nv_get(&st->req_hdrs, ":path");
    nv_adds(&h, ":method", method ? method : "POST");
    nv_adds(&h, ":scheme", "http");
    nv_adds(&h, ":authority", router_upstream_host(addr));
    nv_adds(&h, ":path", path ? path : "/");
    for (size_t i = 0; i < st->req_hdrs.n; i++) {
        nghttp2_nv *v = &st->req_hdrs.v[i];
        if (router_header_dropped((char *)v->name, v->namelen))
            continue;
        nv_add(&h, (char *)v->name, v->namelen, (char *)v->value, v->valuelen);
    }
    nv_adds(&h, "te", "trailers");
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = req_read};
    int32_t id = nghttp2_submit_request(u->s, NULL, h.v, h.n, &prd, st);
    nv_free(&h);
    if (id < 0) {
        _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
        router_error_backend(&e, -ECONNREFUSED, st->route.id);
        h2_respond_error(st, &e);
        return;
    }
    st->up = u;
    st->up_id = id;
}
