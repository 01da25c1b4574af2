/* Arbitrary bytes from a client into a sandboxd gRPC server session: HTTP/2 frames (nghttp2),
 * our stream/call handling, 5-byte message framing, grpc-timeout parsing and protobuf request
 * decoding, with responses and trailers generated and discarded. Start and Execute are replaced
 * by handlers that decode the request and answer without spawning anything; WriteStdin,
 * SendSignal, ResizeTTY and reflection are the real handlers (no process is ever registered). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "process.pb-c.h"
#include "sandboxd/sandboxd-grpc-server.h"

static void fake_start(grpc_call *c, const uint8_t *msg, size_t len)
{
    Process__V1__StartRequest *req = process__v1__start_request__unpack(NULL, len, msg);
    if (!req) {
        grpc_call_finish(c, STATUS_INTERNAL, "grpc: error unmarshalling request");
        return;
    }
    Process__V1__InitEvent init = PROCESS__V1__INIT_EVENT__INIT;
    Process__V1__StartResponse resp = PROCESS__V1__START_RESPONSE__INIT;
    resp.event_case = PROCESS__V1__START_RESPONSE__EVENT_INIT;
    resp.init = &init;
    grpc_call_send(c, &resp.base);
    if (req->config && req->config->n_command > 0) {
        resp.event_case = PROCESS__V1__START_RESPONSE__EVENT_STDOUT;
        resp.stdout = (ProtobufCBinaryData){strlen(req->config->command[0]),
                                            (uint8_t *)req->config->command[0]};
        grpc_call_send(c, &resp.base);
    }
    process__v1__start_request__free_unpacked(req, NULL);
    grpc_call_finish(c, STATUS_OK, NULL);
}

static void fake_execute(grpc_call *c, const uint8_t *msg, size_t len)
{
    Process__V1__ExecuteRequest *req = process__v1__execute_request__unpack(NULL, len, msg);
    if (!req) {
        grpc_call_finish(c, STATUS_INTERNAL, "grpc: error unmarshalling request");
        return;
    }
    if (!req->config || req->config->n_command == 0) {
        grpc_call_finish(c, STATUS_INVALID_ARGUMENT, "command is required \xff\n%");
    } else {
        Process__V1__ExecuteResponse resp = PROCESS__V1__EXECUTE_RESPONSE__INIT;
        resp.stdout = (ProtobufCBinaryData){strlen(req->config->command[0]),
                                            (uint8_t *)req->config->command[0]};
        grpc_call_send(c, &resp.base);
        grpc_call_finish(c, STATUS_OK, NULL);
    }
    process__v1__execute_request__free_unpacked(req, NULL);
}

static grpc_method methods[16];
static size_t nmethods;
static uv_loop_t *loop;
static grpc_server server;
static sandboxd_config config;
static sandboxd sd;

static void setup(void)
{
    loop = uv_default_loop();
    config.stream_chunk_size = 4096;
    sd.config = &config;
    sd.root_fd = -1;
    server.loop = loop;
    server.sd = &sd;
    uv_idle_init(loop, &server.flusher);
    server.flusher.data = &server;
    uv_timer_init(loop, &server.trimmer);
    server.trimmer.data = &server;
    uv_unref((uv_handle_t *)&server.trimmer);
    for (size_t i = 0; i < grpc_process_methods_count; i++) {
        methods[nmethods] = grpc_process_methods[i];
        if (strstr(methods[nmethods].path, "/Start"))
            methods[nmethods].on_message = fake_start;
        else if (strstr(methods[nmethods].path, "/Execute"))
            methods[nmethods].on_message = fake_execute;
        methods[nmethods].on_cancel = NULL;
        methods[nmethods].on_drain = NULL;
        nmethods++;
    }
    for (size_t i = 0; i < grpc_reflection_methods_count; i++)
        methods[nmethods++] = grpc_reflection_methods[i];
    server.methods = methods;
    server.nmethods = nmethods;
}

static void drain(grpc_conn *conn)
{
    for (int i = 0; i < 64 && !conn->closing; i++) {
        const uint8_t *p;
        if (nghttp2_session_mem_send(conn->session, &p) <= 0)
            break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!loop)
        setup();
    grpc_conn *conn = calloc(1, sizeof(*conn));
    if (!conn)
        return 0;
    conn->server = &server;
    uv_pipe_init(loop, &conn->h.pipe, 0);
    conn->h.handle.data = conn;
    server.conns = conn;
    if (grpc_session_new(&conn->session, conn) < 0) {
        server.conns = NULL;
        uv_close(&conn->h.handle, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        free(conn);
        return 0;
    }
    /* Two pieces with output in between: exercises incremental decoding and deferred data. */
    size_t half = size / 2;
    if (nghttp2_session_mem_recv(conn->session, data, half) >= 0) {
        drain(conn);
        if (nghttp2_session_mem_recv(conn->session, data + half, size - half) >= 0)
            drain(conn);
    }
    server.dirty = NULL;
    conn->dirty = false;
    grpc_conn_close(conn); /* frees calls and the session; conn freed by its close callback */
    uv_idle_stop(&server.flusher);
    uv_run(loop, UV_RUN_NOWAIT);
    return 0;
}
