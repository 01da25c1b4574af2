/* libFuzzer: untrusted ACP lines (acp-server's and acp-client's input) through the JSON-RPC
 * parser and every ACP parameter check. Invariants: a failed parse yields an error code, an error
 * reply (when one is due) serialises to exactly one line, and a parsed message is consistent. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/acp-jsonrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(const json_t *msg)
{
    size_t len = 0;
    char *line = jsonrpc_dump(msg, &len);
    if (!line)
        return;
    if (len == 0 || line[len - 1] != '\n' || memchr(line, '\n', len - 1) || strlen(line) != len)
        abort();
    free(line);
}

static void check_params(const jsonrpc_msg *m)
{
    const char *a = NULL, *b = NULL;
    api_error why = API_ERROR_INIT;
    json_int_t v;
    char *text = NULL;
    if (acp_params_initialize(m->params, &v, &why) == 0 && (v < 0 || v > 65535))
        abort();
    if (acp_params_authenticate(m->params, &a, &b, &why) == 0 && !a)
        abort();
    if (acp_params_session(m->params, true, &a, &b, &why) == 0 && (!a || !b || b[0] != '/'))
        abort();
    if (acp_params_session(m->params, false, NULL, &b, &why) == 0 && !b)
        abort();
    if (acp_params_prompt(m->params, &a, &text, &why) == 0) {
        if (!a || !text)
            abort();
        free(text);
    } else if (!why.message || api_error_errno(&why) >= 0) {
        abort();
    }
    if (acp_params_cancel(m->params, &a, &why) == 0 && !a)
        abort();
    api_error_clear(&why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        jsonrpc_msg m;
        json_t *err = NULL;
        int r = jsonrpc_parse(p, n, &m, &err);
        if (r < 0) {
            if (r != JSONRPC_ERR_PARSE && r != JSONRPC_ERR_INVALID_REQUEST)
                abort();
            if (err)
                check_line(err);
            json_decref(err);
        } else {
            if (err || !m.root)
                abort();
            if (m.kind == JSONRPC_MSG_RESPONSE) {
                if (m.method || (!m.result) == (!m.error) || !m.id)
                    abort();
                acp_permission_from_response(m.result, m.error);
            } else {
                if (!m.method || (m.kind == JSONRPC_MSG_REQUEST) != (m.id != NULL))
                    abort();
                check_params(&m);
                json_t *reply = jsonrpc_error(m.id, JSONRPC_ERR_METHOD_NOT_FOUND, m.method,
                                                  json_pack("{s:s}", "method", m.method));
                check_line(reply);
                json_decref(reply);
            }
            jsonrpc_msg_done(&m);
        }
        p += n + 1;
    }
    return 0;
}
