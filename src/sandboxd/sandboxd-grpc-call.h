/* The contract between the gRPC transport (HTTP/2 streams, framing, trailers, deadlines) and the
 * service handlers. A call lives on the loop thread. A handler owns its per-call state in
 * `c->data` until it finishes the call (grpc_call_finish) or the transport cancels it
 * (method->on_cancel); after either it must not touch the call again. */
#pragma once

#include <nghttp2/nghttp2.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "sandboxd/sandboxd-grpc-frame.h"
#include "sandboxd/sandboxd.h"
#include "shared/status.h"

typedef struct grpc_server grpc_server;
typedef struct grpc_conn grpc_conn;
typedef struct grpc_call grpc_call;
typedef struct grpc_outbuf grpc_outbuf;

typedef struct grpc_method {
    const char *path; /* "/process.v1.ProcessService/Start" */
    bool client_streaming;
    /* Non-client-streaming: called once with the single request after the client half-closed.
     * Client-streaming: called for every request message. The bytes are borrowed. */
    void (*on_message)(grpc_call *c, const uint8_t *msg, size_t len);
    /* Client-streaming only: the client half-closed. */
    void (*on_half_close)(grpc_call *c);
    /* The call ends early (RST_STREAM, deadline, connection loss, server stop): drop c->data. */
    void (*on_cancel)(grpc_call *c);
    /* Pending output fell below GRPC_CALL_LOW_WATER after having been above the high mark. */
    void (*on_drain)(grpc_call *c);
} grpc_method;

/* Extra trailing metadata a handler may add (grpc_call_add_trailer). */
#define GRPC_CALL_MAX_TRAILERS 4

/* Output flow control: handlers pause their producers above the high mark. */
#define GRPC_CALL_HIGH_WATER (256u * 1024)
#define GRPC_CALL_LOW_WATER (64u * 1024)

struct grpc_call {
    grpc_server *server;
    grpc_conn *conn;
    int32_t stream_id;
    const grpc_method *method;
    void *data; /* handler state */

    grpc_frame_decoder dec;
    uint8_t *req; /* non-client-streaming: the one request message */
    size_t req_len;
    unsigned nreq;

    grpc_outbuf *out_head, *out_tail;
    size_t out_pending;
    bool above_high;

    bool dispatched;      /* method resolved, handler may be running */
    bool half_closed;     /* END_STREAM received */
    bool headers_sent;    /* response HEADERS submitted */
    bool finished;        /* handler done: trailers go out once the queue drains */
    bool trailers_queued; /* trailers handed to nghttp2 */
    bool deferred;        /* data provider returned DEFERRED */
    status_code status;
    char *status_msg;
    /* extra trailing metadata, "name\0value\0" pairs (owned), see grpc_call_add_trailer */
    char *trailer_md[GRPC_CALL_MAX_TRAILERS];
    size_t n_trailer_md;

    char *path;     /* :path from the request headers */
    bool grpc_ct;   /* content-type application/grpc[+...] */
    usec_t timeout; /* from grpc-timeout, 0 when none */
    uv_timer_t *deadline;

    grpc_call *next, *prev; /* server-wide list */
};

/* Queues one message (serialized with its 5-byte prefix). Returns 0 or -ENOMEM / -ECANCELED. */
int grpc_call_send(grpc_call *c, const ProtobufCMessage *msg);
/* Queues an already framed message (prefix included) at buf[off..off+len), taking ownership of
 * `buf` (malloc'd). */
int grpc_call_send_framed(grpc_call *c, uint8_t *buf, size_t off, size_t len);
/* Ends the call with `code` (message may be NULL). The handler must not use `c` afterwards. */
void grpc_call_finish(grpc_call *c, status_code code, const char *msg);
void grpc_call_finish_error(grpc_call *c, const api_error *e);
/* Adds one trailing-metadata field (lower-case name, not "grpc-*"), sent with grpc-status. Call
 * before grpc_call_finish. Both strings are copied. Returns 0, -ENOMEM or -E2BIG. */
int grpc_call_add_trailer(grpc_call *c, const char *name, const char *value);
static inline size_t grpc_call_pending(const grpc_call *c)
{
    return c->out_pending;
}
sandboxd *grpc_call_sandboxd(const grpc_call *c);

/* Handler registry (sandboxd-grpc-process.c, sandboxd-grpc-reflection.c). */
extern const grpc_method grpc_process_methods[];
extern const size_t grpc_process_methods_count;
extern const grpc_method grpc_reflection_methods[];
extern const size_t grpc_reflection_methods_count;
