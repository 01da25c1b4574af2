/* sandboxd gRPC half: process.v1.ProcessService and server reflection over HTTP/2 (nghttp2) on a
 * libuv loop, on TCP (listen_host:grpc_port) and optionally a unix socket path and/or an
 * inherited listening fd. Runs entirely on the loop's thread. */
#pragma once

#include <uv.h>

#include "sandboxd/sandboxd.h"

typedef struct grpc_server grpc_server;

/* Binds and starts serving on `loop`. Returns 0 or a negative errno (the message is logged). */
int grpc_server_new(grpc_server **ret, uv_loop_t *loop, sandboxd *sd);
/* Shutdown step: send `sig` to the process group of every live child (Start and Execute). */
void grpc_server_signal_processes(grpc_server *s, int sig);
/* Children not yet reaped. */
unsigned grpc_server_live_processes(grpc_server *s);
/* Graceful stop: close the listeners and send GOAWAY; calls in flight go on. */
void grpc_server_stop_accepting(grpc_server *s);
/* RPCs not yet finished. */
unsigned grpc_server_active_calls(grpc_server *s);
/* Hard stop: cancel every call (killing its process group), close every connection and handle.
 * Memory is released from libuv close callbacks: run the loop until it returns afterwards. */
void grpc_server_close(grpc_server *s);
