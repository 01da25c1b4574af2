/* libFuzzer: untrusted MCP messages (what `asb mcp` reads on stdin or in a POST body) through the
 * JSON-RPC parser and the whole MCP dispatch: initialize and version negotiation, tools/call
 * argument checks of every tool, resources/read URI parsing, cancellation and progress tokens.
 * The control plane refuses connections, so every tool stops there with a tool error.
 * Also round-trips base64 (binary file content). Invariants: every request gets exactly one
 * reply with its id, and that reply serialises to one line. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/base64.h"
#include "mcp/asb-mcp.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* A server that refuses at once (with no server configured at all, libasb would first wait
     * about 2 s for one that may be starting). */
    setenv("ASB_STATE_DIR", "/nonexistent-asb-fuzz", 1);
    setenv("ASB_SERVER", "http://127.0.0.1:1", 1);
    setenv("ASB_TOKEN", "fuzz", 1);
    return 0;
}

static void check_base64(const uint8_t *data, size_t size)
{
    char *enc = NULL, *dec = NULL;
    size_t enc_len = 0, dec_len = 0;
    if (base64_encode(data, size, &enc, &enc_len) < 0)
        return;
    if (strlen(enc) != enc_len || base64_decode(enc, enc_len, &dec, &dec_len) < 0 ||
        dec_len != size || memcmp(dec, data, size) != 0)
        abort();
    free(dec);
    free(enc);
    /* Arbitrary text either decodes or is refused; it never crashes. */
    if (base64_decode((const char *)data, size, &dec, &dec_len) == 0)
        free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_base64(data, size);
    mcp_server s;
    mcp_server_init(&s);
    mcp_session session = {0};
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        jsonrpc_msg m;
        json_t *err = NULL;
        if (jsonrpc_parse(p, n, &m, &err) == 0) {
            mcp_call call = {.session = &session};
            json_t *reply = mcp_handle(&s, &call, &m);
            if ((m.kind == JSONRPC_MSG_REQUEST) != (reply != NULL))
                abort();
            if (reply && !json_equal(json_object_get(reply, "id"), m.id))
                abort();
            size_t len;
            char *line = reply ? jsonrpc_dump(reply, &len) : NULL;
            if (line && memchr(line, '\n', len - 1))
                abort();
            free(line);
            json_decref(reply);
            mcp_call_done(&call);
            jsonrpc_msg_done(&m);
        }
        json_decref(err);
        p += n + (nl ? 1 : 0);
    }
    mcp_server_done(&s);
    return 0;
}
