/* Sandbox processes over sandboxd's gRPC ProcessService: Execute (unary), Start (server
 * streaming, events to callbacks), WriteStdin, SendSignal, ResizeTTY. Never retried. */
#include <stdlib.h>
#include <string.h>

#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"
#include "process.pb-c.h"

#define SERVICE "/process.v1.ProcessService/"

typedef struct config {
    Process__V1__ProcessConfig pc;
    Process__V1__ProcessConfig__EnvVarsEntry *entries;
    Process__V1__ProcessConfig__EnvVarsEntry **ptrs;
    char *env_copy; /* NAME\0VALUE\0... */
} config;

static void config_done(config *c)
{
    free(c->entries);
    free(c->ptrs);
    free(c->env_copy);
}

static int config_init(config *c, const char *fn, const char *const *argv,
                       const asb_sandbox_process_options *o)
{
    *c = (config){0};
    process__v1__process_config__init(&c->pc);
    if (!argv || !argv[0])
        return asbi_error_set(ASB_EINVAL, 0, NULL, "%s: empty argv", fn);
    if (o && (o->version == 0 || o->version > ASB_SANDBOX_PROCESS_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_process_options: unknown version %u",
                              o->version);
    size_t n = 0;
    while (argv[n])
        n++;
    c->pc.n_command = n;
    c->pc.command = (char **)argv;
    c->pc.cwd = o && o->cwd ? (char *)o->cwd : "";
    size_t ne = 0, total = 0;
    for (; o && o->env && o->env[ne]; ne++) {
        if (!strchr(o->env[ne], '=') || o->env[ne][0] == '=')
            return asbi_error_set(ASB_EINVAL, 0, NULL, "%s: env entry \"%s\" is not NAME=VALUE",
                                  fn, o->env[ne]);
        total += strlen(o->env[ne]) + 1;
    }
    if (!ne)
        return ASB_OK;
    c->entries = calloc(ne, sizeof(*c->entries));
    c->ptrs = calloc(ne, sizeof(*c->ptrs));
    c->env_copy = malloc(total);
    if (!c->entries || !c->ptrs || !c->env_copy) {
        config_done(c);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    char *p = c->env_copy;
    for (size_t i = 0; i < ne; i++) {
        size_t l = strlen(o->env[i]) + 1;
        memcpy(p, o->env[i], l);
        char *eq = strchr(p, '=');
        *eq = '\0';
        process__v1__process_config__env_vars_entry__init(&c->entries[i]);
        c->entries[i].key = p;
        c->entries[i].value = eq + 1;
        c->ptrs[i] = &c->entries[i];
        p += l;
    }
    c->pc.n_env_vars = ne;
    c->pc.env_vars = c->ptrs;
    return ASB_OK;
}

/* Packs msg and runs the call. */
static int call_packed(asb_sandbox *s, const char *method, const ProtobufCMessage *msg,
                       long timeout_ms, const volatile int *cancel, asbi_grpc_msg_cb cb,
                       void *payload, asbi_grpc_followup *follow)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *bytes = malloc(n ? n : 1);
    if (!bytes)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    protobuf_c_message_pack(msg, bytes);
    int r = asbi_grpc_call(s, method, bytes, n, timeout_ms, cancel, cb, payload, follow);
    free(bytes);
    return r;
}

static int ignore_reply(const uint8_t *msg, size_t len, void *payload)
{
    return 0;
}

static int on_execute_reply(const uint8_t *msg, size_t len, void *payload)
{
    asb_sandbox_result *res = payload;
    Process__V1__ExecuteResponse *m = process__v1__execute_response__unpack(NULL, len, msg);
    if (!m)
        return asbi_error_set(ASB_EPROTOCOL, 0, NULL, "malformed ExecuteResponse");
    free(res->out_data);
    free(res->err_data);
    res->out_data = malloc(m->stdout.len + 1);
    res->err_data = malloc(m->stderr.len + 1);
    if (!res->out_data || !res->err_data) {
        process__v1__execute_response__free_unpacked(m, NULL);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    if (m->stdout.len)
        memcpy(res->out_data, m->stdout.data, m->stdout.len);
    if (m->stderr.len)
        memcpy(res->err_data, m->stderr.data, m->stderr.len);
    res->out_data[m->stdout.len] = res->err_data[m->stderr.len] = '\0';
    res->out_len = m->stdout.len;
    res->err_len = m->stderr.len;
    res->exit_code = m->exit_code;
    process__v1__execute_response__free_unpacked(m, NULL);
    return 0;
}

ASB_PUBLIC void asb_sandbox_result_free(asb_sandbox_result *r)
{
    if (!r)
        return;
    free(r->out_data);
    free(r->err_data);
    free(r);
}

ASB_PUBLIC int asb_sandbox_execute(asb_sandbox_result **out, asb_sandbox *s,
                                   const char *const *argv, const asb_sandbox_process_options *o)
{
    if (!out || !s)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_execute: NULL out or sandbox");
    *out = NULL;
    config c;
    int r = config_init(&c, "asb_sandbox_execute", argv, o);
    if (r != ASB_OK)
        return r;
    Process__V1__ExecuteRequest req = PROCESS__V1__EXECUTE_REQUEST__INIT;
    req.config = &c.pc;
    asb_sandbox_result *res = calloc(1, sizeof(*res));
    if (!res) {
        config_done(&c);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    r = call_packed(s, SERVICE "Execute", &req.base, o ? o->timeout_ms : 0, o ? o->cancel : NULL,
                    on_execute_reply, res, NULL);
    config_done(&c);
    if (r == ASB_OK && !res->out_data)
        r = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "Execute returned no response");
    if (r != ASB_OK) {
        asb_sandbox_result_free(res);
        return r;
    }
    *out = res;
    return ASB_OK;
}

typedef struct start_state {
    const asb_sandbox_callbacks *cbs;
    int exit_code, exited;
    asbi_grpc_followup *close_stdin; /* NULL unless opts->close_stdin */
    uint8_t close_req[16];           /* WriteStdinRequest{process_id, eof: {}} */
} start_state;

/* Queues WriteStdin(process_id, eof) on the Start's own connection. */
static void queue_close_stdin(start_state *st, int process_id)
{
    Process__V1__WriteStdinRequest req;
    process__v1__write_stdin_request__init(&req);
    Google__Protobuf__Empty empty = GOOGLE__PROTOBUF__EMPTY__INIT;
    req.process_id = process_id;
    req.payload_case = PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_EOF;
    req.eof = &empty;
    size_t n = protobuf_c_message_get_packed_size(&req.base);
    if (n > sizeof(st->close_req))
        return; /* cannot happen: a varint id and an empty message */
    st->close_stdin->req_len = protobuf_c_message_pack(&req.base, st->close_req);
    st->close_stdin->req = st->close_req;
    st->close_stdin->method = SERVICE "WriteStdin";
    st->close_stdin->ready = 1;
}

static int on_start_event(const uint8_t *msg, size_t len, void *payload)
{
    start_state *st = payload;
    const asb_sandbox_callbacks *cb = st->cbs;
    Process__V1__StartResponse *m = process__v1__start_response__unpack(NULL, len, msg);
    if (!m)
        return asbi_error_set(ASB_EPROTOCOL, 0, NULL, "malformed StartResponse");
    int r = 0;
    switch (m->event_case) {
    case PROCESS__V1__START_RESPONSE__EVENT_INIT:
        if (st->close_stdin && m->init)
            queue_close_stdin(st, m->init->process_id);
        if (cb && cb->init_cb)
            r = cb->init_cb(m->init ? m->init->process_id : 0, cb->payload);
        break;
    case PROCESS__V1__START_RESPONSE__EVENT_STDOUT:
        if (cb && cb->stdout_cb)
            r = cb->stdout_cb((const char *)m->stdout.data, m->stdout.len, cb->payload);
        break;
    case PROCESS__V1__START_RESPONSE__EVENT_STDERR:
        if (cb && cb->stderr_cb)
            r = cb->stderr_cb((const char *)m->stderr.data, m->stderr.len, cb->payload);
        break;
    case PROCESS__V1__START_RESPONSE__EVENT_EXIT:
        st->exited = 1;
        st->exit_code = m->exit ? m->exit->exit_code : -1;
        if (cb && cb->exit_cb)
            r = cb->exit_cb(st->exit_code, cb->payload);
        break;
    default:
        break;
    }
    process__v1__start_response__free_unpacked(m, NULL);
    return r;
}

ASB_PUBLIC int asb_sandbox_start(int *out_exit_code, asb_sandbox *s, const char *const *argv,
                                 const asb_sandbox_process_options *o,
                                 const asb_sandbox_callbacks *cbs)
{
    if (out_exit_code)
        *out_exit_code = -1;
    if (!s)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_start: NULL sandbox");
    if (cbs && (cbs->version == 0 || cbs->version > ASB_SANDBOX_CALLBACKS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_callbacks: unknown version %u",
                              cbs->version);
    config c;
    int r = config_init(&c, "asb_sandbox_start", argv, o);
    if (r != ASB_OK)
        return r;
    Process__V1__StartRequest req = PROCESS__V1__START_REQUEST__INIT;
    Process__V1__PTY pty = PROCESS__V1__PTY__INIT;
    req.config = &c.pc;
    if (o && o->pty) {
        pty.cols = o->pty_cols;
        pty.rows = o->pty_rows;
        req.pty = &pty;
    }
    asbi_grpc_followup close_stdin = {0};
    start_state st = {.cbs = cbs, .exit_code = -1};
    if (o && o->version >= 2 && o->close_stdin)
        st.close_stdin = &close_stdin;
    r = call_packed(s, SERVICE "Start", &req.base, o ? o->timeout_ms : 0, o ? o->cancel : NULL,
                    on_start_event, &st, st.close_stdin);
    config_done(&c);
    if (r == ASB_OK && !st.exited)
        r = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "Start stream ended without an exit event");
    if (r == ASB_OK && out_exit_code)
        *out_exit_code = st.exit_code;
    return r;
}

ASB_PUBLIC int asb_sandbox_write_stdin(asb_sandbox *s, int process_id, const void *data,
                                       size_t len, int eof)
{
    if (!s || (!data && len))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_write_stdin: NULL argument");
    Process__V1__WriteStdinRequest req;
    process__v1__write_stdin_request__init(&req);
    req.process_id = process_id;
    int r = ASB_OK;
    if (len > 0 || !eof) {
        req.payload_case = PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_INPUT;
        req.input.data = (uint8_t *)data;
        req.input.len = len;
        r = call_packed(s, SERVICE "WriteStdin", &req.base, 0, NULL, ignore_reply, NULL, NULL);
    }
    if (r == ASB_OK && eof) {
        Google__Protobuf__Empty empty = GOOGLE__PROTOBUF__EMPTY__INIT;
        req.payload_case = PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_EOF;
        req.eof = &empty;
        r = call_packed(s, SERVICE "WriteStdin", &req.base, 0, NULL, ignore_reply, NULL, NULL);
    }
    return r;
}

ASB_PUBLIC int asb_sandbox_signal(asb_sandbox *s, int process_id, int signal)
{
    if (!s)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_signal: NULL sandbox");
    Process__V1__SendSignalRequest req = PROCESS__V1__SEND_SIGNAL_REQUEST__INIT;
    req.process_id = process_id;
    req.signal = (Process__V1__Signal)signal;
    return call_packed(s, SERVICE "SendSignal", &req.base, 0, NULL, ignore_reply, NULL, NULL);
}

ASB_PUBLIC int asb_sandbox_resize(asb_sandbox *s, int process_id, unsigned int cols,
                                  unsigned int rows)
{
    if (!s)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_resize: NULL sandbox");
    Process__V1__ResizeTTYRequest req = PROCESS__V1__RESIZE_TTYREQUEST__INIT;
    req.process_id = process_id;
    req.cols = cols;
    req.rows = rows;
    return call_packed(s, SERVICE "ResizeTTY", &req.base, 0, NULL, ignore_reply, NULL, NULL);
}
