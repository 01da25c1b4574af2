/* Shared by the HTTP/2 client connection code: router-h2.c (the client's session, routing,
 * I/O), router-h2-grpc.c (gRPC upstream sessions) and router-h2-rest.c (HTTP/1.1 upstreams of
 * REST streams, and the legacy layer over HTTP/2). Not an interface for anything else. */
#pragma once

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
#include "basic/time-util.h"
#include "router/router-core.h"
#include "shared/router-stats.h"

#define RESP_HIGH (1024 * 1024)
#define OUT_HIGH (256 * 1024)
#define WINDOW (1024 * 1024)
#define MAX_LEGACY_BODY (64 * 1024 * 1024)

/* A byte queue: appended at the end, taken from start (compacted when it would grow). */
typedef struct bbuf {
    buf b;
    size_t start;
} bbuf;

static inline size_t bb_len(const bbuf *b)
{
    return b->b.len - b->start;
}

static inline const char *bb_data(const bbuf *b)
{
    return b->b.data ? b->b.data + b->start : "";
}

/* Forgets the first n bytes. */
static inline void bb_drop(bbuf *b, size_t n)
{
    b->start += n;
    if (b->start == b->b.len)
        b->start = b->b.len = 0;
}

static inline int bb_put(bbuf *b, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    if (b->start > 0 && b->b.len + n > b->b.cap) {
        memmove(b->b.data, b->b.data + b->start, b->b.len - b->start);
        b->b.len -= b->start;
        b->start = 0;
    }
    return buf_append(&b->b, p, n);
}

static inline size_t bb_take(bbuf *b, void *out, size_t n)
{
    size_t k = MIN(n, bb_len(b));
    if (k == 0)
        return 0;
    memcpy(out, bb_data(b), k);
    bb_drop(b, k);
    return k;
}

static inline void bb_free(bbuf *b)
{
    buf_done(&b->b);
    b->start = 0;
}

/* nghttp2 header pairs (owned copies), the array grown in a buf. */
typedef struct nvlist {
    buf b;
    nghttp2_nv *v; /* b's data */
    size_t n;
    size_t bytes;
} nvlist;

static inline int nv_add(nvlist *l, const char *name, size_t nl, const char *value, size_t vl)
{
    char *n = strndup(name, nl), *val = strndup(value, vl);
    nghttp2_nv nv = {(uint8_t *)n, (uint8_t *)val, nl, vl, NGHTTP2_NV_FLAG_NONE};
    if (!n || !val || buf_append(&l->b, &nv, sizeof(nv)) < 0) {
        free(n);
        free(val);
        return -ENOMEM;
    }
    l->v = (nghttp2_nv *)(void *)l->b.data;
    l->n++;
    l->bytes += nl + vl;
    return 0;
}

static inline int nv_adds(nvlist *l, const char *name, const char *value)
{
    return nv_add(l, name, strlen(name), value, strlen(value));
}

static inline void nv_free(nvlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].value);
    }
    buf_done(&l->b);
    *l = (nvlist){0};
}

static inline const char *nv_get(const nvlist *l, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].namelen == nl && strncasecmp((char *)l->v[i].name, name, nl) == 0)
            return (const char *)l->v[i].value;
    return NULL;
}

typedef struct h2_conn h2_conn;
typedef struct h2_up h2_up;

typedef struct h2_stream {
    h2_conn *c;
    int32_t id;
    struct h2_stream *next;
    nvlist req_hdrs;
    router_route route;
    router_target target;
    bool grpc_ct;
    bool started; /* routed */
    bool local;   /* answered by the router itself: request data is discarded */
    /* client -> upstream */
    bbuf req;
    bool req_eof;
    size_t req_pending_consume;
    /* upstream -> client */
    bbuf resp;
    bool resp_eof;
    bool resp_submitted;
    nvlist resp_hdrs, trailers;
    /* gRPC upstream */
    h2_up *up;
    int32_t up_id;
    /* HTTP/1.1 upstream (REST) */
    int h1fd;
    bbuf h1out;
    bool h1_chunked;
    bool h1_wdead;     /* upstream no longer takes the request body */
    router_message rm; /* the HTTP/1.1 upstream's response */
    bool is_head;
    long long deadline_ms;
    int64_t started_us; /* now_usec(CLOCK_MONOTONIC) when the request's headers began */
    /* legacy layer */
    bool legacy;
    bool resolving; /* a resolve_job is out for this stream */
    size_t legacy_len;
    bool legacy_too_big;
} h2_stream;

struct h2_up {
    h2_conn *c;
    char *addr;
    int fd;
    nghttp2_session *s;
    bbuf out;
    h2_up *next;
    bool dead;
};

struct h2_conn {
    router_ctx *ctx;
    int fd;
    int notify[2]; /* resolve_job pointers come back here */
    bool loopback;
    nghttp2_session *s;
    bbuf out;
    h2_stream *streams;
    h2_up *ups;
    bool dead;
};

static inline void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* router-h2.c: the client side of a stream. */
void h2_resume_client(h2_stream *st);
/* Submits the response head (status: its :status, counted in router_stats). */
int h2_submit_resp(h2_stream *st, int status, nvlist *hdrs, bool body);
void h2_respond_error(h2_stream *st, const api_error *err);
void h2_respond_simple(h2_stream *st, int status, const char *ctype, const char *extra,
                       const char *body, size_t len);

/* router-h2-grpc.c: a stream's gRPC upstream (one nghttp2 client session per socket). */
/* Starts a gRPC stream to the HTTP/2 server at addr. */
void h2_start_grpc(h2_stream *st, const char *addr);
void h2_stream_upstream_failed(h2_stream *st, uint32_t code);
void h2_up_free(h2_up *u);
void h2_up_fail(h2_conn *c, h2_up *u);

/* router-h2-rest.c: a REST stream's HTTP/1.1 upstream, and the legacy layer. */
void h2_start_rest(h2_stream *st, const char *addr, bool end_stream);
void h2_h1_close(h2_stream *st);
void h2_h1_put_body(h2_stream *st, const void *data, size_t n);
void h2_run_legacy(h2_stream *st);
