/* `asb mcp` failures: mcp_error_take() and the words every protocol error and tool error reply
 * carries, through mcp_handle() as a client sends them. The control plane refuses connections
 * (nothing listens on port 1), so tools that need it stop there. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "asb/asb.h"
#include "libasb/libasb-internal.h"
#include "mcp/asb-mcp.h"
#include "unit.h"

TEST(error_take_moves_the_text)
{
    api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(mcp_error_take(&e, -EIO, strdup("listing sandboxes: boom")), -EIO);
    CHECK_STR_EQ(e.message, "listing sandboxes: boom");
    CHECK_INT_EQ(api_error_errno(&e), -EIO);
    CHECK_INT_EQ(mcp_error_take(&e, -EIO, NULL), -ENOMEM);
    CHECK_STR_EQ(e.message, "out of memory");
    asbi_error_set(ASB_ECONNECT, 0, NULL, "refused");
    CHECK_INT_EQ(mcp_error_take(&e, -EIO, mcp_error_text("warm pool")), -EIO);
    CHECK_STR_EQ(e.message, "warm pool: cannot reach the Agent Sandbox server (refused); is `asb "
                            "serve` running?");
    api_error_clear(&e);
}

/* The reply to one request line (owned), or NULL. */
static json_t *ask(mcp_server *s, mcp_session *session, const char *line)
{
    jsonrpc_msg m;
    json_t *perr = NULL;
    if (jsonrpc_parse(line, strlen(line), &m, &perr) != 0) {
        json_decref(perr);
        return NULL;
    }
    mcp_call call = {.session = session};
    json_t *reply = mcp_handle(s, &call, &m);
    mcp_call_done(&call);
    jsonrpc_msg_done(&m);
    return reply;
}

/* 1 when the reply is a JSON-RPC error with this code and message. */
static int is_error(json_t *reply, int code, const char *message)
{
    json_t *e = json_object_get(reply, "error");
    const char *m = json_string_value(json_object_get(e, "message"));
    int ok = json_integer_value(json_object_get(e, "code")) == code && m && !strcmp(m, message);
    if (!ok) {
        char *t = json_dumps(reply, JSON_COMPACT);
        printf("#   got %s\n", t ? t : "(null)");
        free(t);
    }
    json_decref(reply);
    return ok;
}

/* The text of a tool result that failed (isError), owned; NULL otherwise. */
static char *tool_error_text(json_t *reply)
{
    json_t *r = json_object_get(reply, "result");
    const char *t = json_string_value(
        json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    char *out = json_is_true(json_object_get(r, "isError")) && t ? strdup(t) : NULL;
    json_decref(reply);
    return out;
}

TEST(protocol_and_tool_errors_keep_their_words)
{
    setenv("ASB_STATE_DIR", "/nonexistent-asb-unit", 1);
    setenv("ASB_SERVER", "http://127.0.0.1:1", 1);
    setenv("ASB_TOKEN", "unit", 1);
    mcp_server s;
    mcp_server_init(&s);
    mcp_session session = {0};
    CHECK(is_error(ask(&s, &session, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"),
                   JSONRPC_ERR_INVALID_REQUEST,
                   "the session is not initialized: send initialize first"));
    CHECK(is_error(ask(&s, &session, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\"}"),
                   JSONRPC_ERR_INVALID_PARAMS,
                   "initialize needs params.protocolVersion (a string)"));
    json_decref(ask(&s, &session,
                    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":"
                    "{\"protocolVersion\":\"2025-06-18\"}}"));
    CHECK(session.version[0] != '\0');
    CHECK(is_error(
        ask(&s, &session, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{}}"),
        JSONRPC_ERR_INVALID_PARAMS, "tools/call needs params.name"));
    CHECK(is_error(ask(&s, &session,
                       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
                       "{\"name\":\"nope\"}}"),
                   JSONRPC_ERR_INVALID_PARAMS, "unknown tool (see tools/list)"));
    CHECK(
        is_error(ask(&s, &session,
                     "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\",\"params\":{}}"),
                 JSONRPC_ERR_INVALID_PARAMS, "resources/read needs params.uri"));
    CHECK(is_error(
        ask(&s, &session, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/list\"}"),
        JSONRPC_ERR_INTERNAL, "cannot list sandboxes (is the Agent Sandbox server reachable?)"));
    CHECK(is_error(ask(&s, &session, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"nope\"}"),
                   JSONRPC_ERR_METHOD_NOT_FOUND, "method not found"));
    char *t = tool_error_text(ask(&s, &session,
                                  "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\","
                                  "\"params\":{\"name\":\"execute_command\",\"arguments\":{}}}"));
    CHECK(t && strcmp(t, "command is required: a shell command line") == 0);
    free(t);
    t = tool_error_text(ask(&s, &session,
                            "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":"
                            "{\"name\":\"execute_command\",\"arguments\":{\"command\":\"true\","
                            "\"sandbox_claim_name\":\"x\"}}}"));
    CHECK(t && strstr(t, "cannot reach the Agent Sandbox server") != NULL);
    free(t);
    mcp_server_done(&s);
    mcp_sandbox_cache_clear();
}
