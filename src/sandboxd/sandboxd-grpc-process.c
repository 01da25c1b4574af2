/* process.v1.ProcessService handlers: Start, Execute, WriteStdin, SendSignal, ResizeTTY
 * (shared/spec/UPSTREAM.md §1.5). Request decoding, validation and replies; the running child
 * is sandboxd-process-run.c's. */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "basic/macro.h"
#include "process.pb-c.h"
#include "sandboxd/sandboxd-process-run.h"

#define UNMARSHAL_ERROR "grpc: error unmarshalling request"

static void reply(grpc_call *c, const ProtobufCMessage *m)
{
    if (grpc_call_send(c, m) < 0)
        grpc_call_finish(c, STATUS_INTERNAL, "failed to send response");
    else
        grpc_call_finish(c, STATUS_OK, NULL);
}

static void finish_error(grpc_call *c, api_error *e)
{
    grpc_call_finish_error(c, e);
    api_error_clear(e);
}

/* Builds and spawns the command of a Start (pty may be NULL) or Execute (id 0) request. */
static proc *run_command(grpc_call *c, const Process__V1__ProcessConfig *cfg,
                         const Process__V1__PTY *pty, bool execute, int32_t *ret_id)
{
    grpc_server *s = c->server;
    api_error err = API_ERROR_INIT;
    spawn_cmd cmd = SPAWN_CMD_INIT;
    proc *p = NULL;
    if (spawn_cmd_build(&cmd, s->sd, cfg, &err) < 0)
        goto out;
    int32_t id = execute ? 0 : process_table_next_id(grpc_server_procs(s));
    spawned sp;
    spawn_mode mode = execute ? SPAWN_EXECUTE : pty ? SPAWN_PTY : SPAWN_PIPES;
    if (spawn_cmd_run(&cmd, s->sd, mode, pty ? pty->cols : 0, pty ? pty->rows : 0,
                      execute ? "execute" : "start", &sp, &err) < 0)
        goto out;
    p = proc_new(s, c, &sp, pty != NULL, execute, id);
    if (!p)
        api_error_set(&err, STATUS_INTERNAL, "out of memory");
    *ret_id = id;
out:
    spawn_cmd_done(&cmd);
    if (!p)
        finish_error(c, &err);
    return p;
}

static void start_on_message(grpc_call *c, const uint8_t *msg, size_t len)
{
    Process__V1__StartRequest *req = process__v1__start_request__unpack(NULL, len, msg);
    if (!req) {
        grpc_call_finish(c, STATUS_INTERNAL, UNMARSHAL_ERROR);
        return;
    }
    int32_t id = 0;
    proc *p = run_command(c, req->config, req->pty, false, &id);
    process__v1__start_request__free_unpacked(req, NULL);
    if (!p)
        return;
    Process__V1__InitEvent init = PROCESS__V1__INIT_EVENT__INIT;
    Process__V1__StartResponse resp = PROCESS__V1__START_RESPONSE__INIT;
    init.process_id = id;
    resp.event_case = PROCESS__V1__START_RESPONSE__EVENT_INIT;
    resp.init = &init;
    if (grpc_call_send(c, &resp.base) < 0) {
        proc_cancel(p);
        grpc_call_finish(c, STATUS_INTERNAL, "failed to send init event");
        return;
    }
    proc_update(p);
}

static void execute_on_message(grpc_call *c, const uint8_t *msg, size_t len)
{
    Process__V1__ExecuteRequest *req = process__v1__execute_request__unpack(NULL, len, msg);
    if (!req) {
        grpc_call_finish(c, STATUS_INTERNAL, UNMARSHAL_ERROR);
        return;
    }
    int32_t id;
    proc *p = run_command(c, req->config, NULL, true, &id);
    process__v1__execute_request__free_unpacked(req, NULL);
    if (p)
        proc_update(p);
}

static void run_on_cancel(grpc_call *c)
{
    proc *p = c->data;
    if (p)
        proc_cancel(p);
}

static void run_on_drain(grpc_call *c)
{
    proc *p = c->data;
    if (p)
        proc_resume(p);
}

static proc *lookup(grpc_call *c, int32_t id)
{
    proc *p = proc_find(c->server, id);
    if (!p) {
        char m[64];
        snprintf(m, sizeof(m), "process %d not found", id);
        grpc_call_finish(c, STATUS_NOT_FOUND, m);
    }
    return p;
}

static void write_stdin_on_message(grpc_call *c, const uint8_t *msg, size_t len)
{
    Process__V1__WriteStdinRequest *req = process__v1__write_stdin_request__unpack(NULL, len, msg);
    if (!req) {
        grpc_call_finish(c, STATUS_INTERNAL, UNMARSHAL_ERROR);
        return;
    }
    proc *p = lookup(c, req->process_id);
    if (p) {
        bool eof = req->payload_case == PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_EOF;
        size_t n = req->payload_case == PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_INPUT
                       ? req->input.len
                       : 0;
        api_error err = API_ERROR_INIT;
        if (!eof && n == 0) {
            Process__V1__WriteStdinResponse resp = PROCESS__V1__WRITE_STDIN_RESPONSE__INIT;
            reply(c, &resp.base);
        } else if (proc_stdin_write(p, c, req->input.data, n, eof, &err) < 0) {
            finish_error(c, &err);
        }
    }
    process__v1__write_stdin_request__free_unpacked(req, NULL);
}

static void send_signal_on_message(grpc_call *c, const uint8_t *msg, size_t len)
{
    Process__V1__SendSignalRequest *req = process__v1__send_signal_request__unpack(NULL, len, msg);
    if (!req) {
        grpc_call_finish(c, STATUS_INTERNAL, UNMARSHAL_ERROR);
        return;
    }
    proc *p = lookup(c, req->process_id);
    int sig = (int)req->signal;
    process__v1__send_signal_request__free_unpacked(req, NULL);
    if (!p)
        return;
    if (sig != SIGINT && sig != SIGTERM && sig != SIGKILL) {
        char m[80];
        snprintf(m, sizeof(m), "unsupported or unspecified signal: %d", sig);
        grpc_call_finish(c, STATUS_INVALID_ARGUMENT, m);
        return;
    }
    if (!proc_exited(p)) {
        int r = proc_signal(p, sig);
        if (r < 0) {
            char m[120];
            snprintf(m, sizeof(m), "failed to send signal: %s", strerror(-r));
            grpc_call_finish(c, STATUS_INTERNAL, m);
            return;
        }
    }
    Process__V1__SendSignalResponse resp = PROCESS__V1__SEND_SIGNAL_RESPONSE__INIT;
    reply(c, &resp.base);
}

static void resize_tty_on_message(grpc_call *c, const uint8_t *msg, size_t len)
{
    Process__V1__ResizeTTYRequest *req = process__v1__resize_ttyrequest__unpack(NULL, len, msg);
    if (!req) {
        grpc_call_finish(c, STATUS_INTERNAL, UNMARSHAL_ERROR);
        return;
    }
    proc *p = lookup(c, req->process_id);
    unsigned cols = req->cols, rows = req->rows;
    process__v1__resize_ttyrequest__free_unpacked(req, NULL);
    if (!p)
        return;
    int r = proc_resize(p, cols, rows);
    if (r == -ENOTTY) {
        grpc_call_finish(c, STATUS_FAILED_PRECONDITION,
                         "failed to resize TTY: process is completed or has no active PTY");
        return;
    }
    if (r < 0) {
        char m[120];
        snprintf(m, sizeof(m), "failed to resize TTY: %s", strerror(-r));
        grpc_call_finish(c, STATUS_FAILED_PRECONDITION, m);
        return;
    }
    Process__V1__ResizeTTYResponse resp = PROCESS__V1__RESIZE_TTYRESPONSE__INIT;
    reply(c, &resp.base);
}

const grpc_method grpc_process_methods[] = {
    {"/process.v1.ProcessService/Start", false, start_on_message, NULL, run_on_cancel,
     run_on_drain},
    {"/process.v1.ProcessService/Execute", false, execute_on_message, NULL, run_on_cancel, NULL},
    {"/process.v1.ProcessService/WriteStdin", false, write_stdin_on_message, NULL,
     proc_stdin_cancel, NULL},
    {"/process.v1.ProcessService/SendSignal", false, send_signal_on_message, NULL, NULL, NULL},
    {"/process.v1.ProcessService/ResizeTTY", false, resize_tty_on_message, NULL, NULL, NULL},
};
const size_t grpc_process_methods_count = ELEMENTSOF(grpc_process_methods);
