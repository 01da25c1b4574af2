/* Internal layout of the gRPC server shared by its listener, transport and handler files. */
#pragma once

#include <nghttp2/nghttp2.h>
#include <uv.h>

#include "basic/buf.h"
#include "sandboxd/sandboxd-grpc-call.h"
#include "sandboxd/sandboxd-grpc.h"
#include "sandboxd/sandboxd-process.h"

#define GRPC_MAX_LISTENERS 3

struct grpc_server {
    uv_loop_t *loop;
    sandboxd *sd;
    uv_stream_t *listeners[GRPC_MAX_LISTENERS];
    unsigned nlisteners;
    grpc_conn *conns;
    grpc_call *calls;
    unsigned ncalls;
    uv_idle_t flusher; /* flushes dirty connections once per loop iteration */
    uv_timer_t trimmer; /* returns freed heap to the kernel once the server has gone idle */
    grpc_conn *dirty;
    process_table procs;
    bool stopping; /* GOAWAY sent, listeners closed */
    bool closed;
    /* Test hook (fuzzing): when set, the only methods served. */
    const grpc_method *methods;
    size_t nmethods;
    unsigned close_refs;
};

/* One client connection (TCP or unix socket). */
struct grpc_conn {
    grpc_server *server;
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_stream_t stream;
        uv_handle_t handle;
    } h;
    nghttp2_session *session;
    buf wbuf; /* bytes produced by nghttp2, not yet handed to the socket */
    size_t writes_pending; /* bytes in uv_write requests in flight */
    bool dirty;
    bool closing;
    grpc_conn *next, *prev;
    grpc_conn *next_dirty;
};

/* Connections (sandboxd-grpc-conn.c). */
/* Wraps an accepted stream; `conn` was allocated by the listener with conn->h initialized. */
int grpc_conn_start(grpc_conn *conn);
/* Marks the connection for a flush at the end of this loop iteration. */
void grpc_conn_mark_dirty(grpc_conn *conn);
void grpc_conn_close(grpc_conn *conn);
void grpc_conn_goaway(grpc_conn *conn);
void grpc_server_flush(grpc_server *s);
/* The last call ended: schedule giving freed heap back (idle sandboxd stays small). */
void grpc_server_went_idle(grpc_server *s);

/* Calls (sandboxd-grpc-transport.c). */
/* Cancels and frees every call of `conn` (it is closing). */
void grpc_conn_drop_calls(grpc_conn *conn);
/* Cancels a call from the server side (deadline, stop). */
void grpc_call_cancel(grpc_call *c, status_code code, const char *msg);

/* nghttp2 session callbacks for a server session bound to `conn` (fuzzing reuses them). */
int grpc_session_new(nghttp2_session **ret, grpc_conn *conn);

/* Process handlers (sandboxd-grpc-process.c). */
process_table *grpc_server_procs(grpc_server *s);
