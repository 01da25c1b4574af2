#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/acp-jsonrpc.h"
#include "unit.h"

static int parse(const char *s, jsonrpc_msg *m, json_t **err)
{
    return jsonrpc_parse(s, strlen(s), m, err);
}

TEST(request_notification_response)
{
    jsonrpc_msg m;
    json_t *err;
    CHECK_INT_EQ(
        parse("{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"method\":\"session/new\",\"params\":{}}", &m,
              &err),
        0);
    CHECK(m.kind == JSONRPC_MSG_REQUEST && json_is_string(m.id) && json_is_object(m.params));
    CHECK_STR_EQ(m.method, "session/new");
    jsonrpc_msg_done(&m);
    CHECK_INT_EQ(parse("{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\"}", &m, &err), 0);
    CHECK(m.kind == JSONRPC_MSG_NOTIFICATION && !m.id && !m.params);
    jsonrpc_msg_done(&m);
    CHECK_INT_EQ(parse("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":null}", &m, &err), 0);
    CHECK(m.kind == JSONRPC_MSG_RESPONSE && json_is_null(m.result) && !m.error);
    jsonrpc_msg_done(&m);
}

TEST(errors_carry_codes_and_ids)
{
    jsonrpc_msg m;
    json_t *err;
    CHECK_INT_EQ(parse("{", &m, &err), JSONRPC_ERR_PARSE);
    CHECK(err && json_is_null(json_object_get(err, "id")));
    json_decref(err);
    CHECK_INT_EQ(parse("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":1}", &m, &err),
                 JSONRPC_ERR_INVALID_REQUEST);
    CHECK_INT_EQ(json_integer_value(json_object_get(err, "id")), 5);
    json_decref(err);
    /* A broken response gets no reply. */
    CHECK_INT_EQ(parse("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":1,\"error\":{}}", &m, &err),
                 JSONRPC_ERR_INVALID_REQUEST);
    CHECK(err == NULL);
}

TEST(dump_is_one_line)
{
    json_t *msg = jsonrpc_notification("session/update", json_pack("{s:s}", "t", "a\nb\"c"));
    size_t len = 0;
    char *line = jsonrpc_dump(msg, &len);
    CHECK(line && len == strlen(line) && line[len - 1] == '\n' && !memchr(line, '\n', len - 1));
    free(line);
    json_decref(msg);
}

TEST(prompt_blocks_join)
{
    json_t *p =
        json_loads("{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"text\",\"text\":\"a\"},"
                   "{\"type\":\"resource_link\",\"uri\":\"file:///x\",\"name\":\"x\"},"
                   "{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///y\",\"text\":\"Y\"}}]}",
                   0, NULL);
    const char *sid;
    api_error why = API_ERROR_INIT;
    char *text = NULL;
    CHECK_INT_EQ(acp_params_prompt(p, &sid, &text, &why), 0);
    CHECK_STR_EQ(text, "a\nfile:///x\nY");
    free(text);
    json_decref(p);
    p = json_loads("{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"image\",\"data\":\"\"}]}", 0,
                   NULL);
    CHECK_INT_EQ(acp_params_prompt(p, &sid, &text, &why), -EINVAL);
    CHECK_STR_EQ(why.message,
                 "unsupported content block type (the agent advertises no image or audio support)");
    api_error_clear(&why);
    json_decref(p);
    /* An empty prompt is "", and an empty first block adds no line break. */
    p = json_loads("{\"sessionId\":\"s1\",\"prompt\":[]}", 0, NULL);
    CHECK_INT_EQ(acp_params_prompt(p, &sid, &text, &why), 0);
    CHECK_STR_EQ(text, "");
    free(text);
    json_decref(p);
    p = json_loads("{\"sessionId\":\"s1\",\"prompt\":[{\"type\":\"text\",\"text\":\"\"},"
                   "{\"type\":\"text\",\"text\":\"b\"},{\"type\":\"text\",\"text\":\"c\"}]}",
                   0, NULL);
    CHECK_INT_EQ(acp_params_prompt(p, &sid, &text, &why), 0);
    CHECK_STR_EQ(text, "b\nc");
    free(text);
    json_decref(p);
}

TEST(permission_outcomes)
{
    json_t *r = json_loads("{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"allow_always\"}}",
                           0, NULL);
    CHECK_INT_EQ(acp_permission_from_response(r, NULL), ACP_PERMISSION_ALLOW_ALWAYS);
    json_decref(r);
    r = json_loads("{\"outcome\":{\"outcome\":\"cancelled\"}}", 0, NULL);
    CHECK_INT_EQ(acp_permission_from_response(r, NULL), ACP_PERMISSION_CANCELLED);
    json_decref(r);
    r = json_loads("{\"outcome\":{\"outcome\":\"selected\",\"optionId\":\"yes please\"}}", 0, NULL);
    CHECK_INT_EQ(acp_permission_from_response(r, NULL), ACP_PERMISSION_REJECT_ONCE);
    json_decref(r);
    CHECK_INT_EQ(acp_permission_from_response(NULL, NULL), ACP_PERMISSION_REJECT_ONCE);
    json_t *opts = acp_permission_options();
    CHECK_INT_EQ(json_array_size(opts), 4);
    json_decref(opts);
}

TEST(session_params)
{
    json_t *p = json_loads("{\"cwd\":\"/w\",\"mcpServers\":[],\"sessionId\":\"s1\"}", 0, NULL);
    const char *sid = NULL, *cwd;
    api_error why = API_ERROR_INIT;
    CHECK_INT_EQ(acp_params_session(p, true, &sid, &cwd, &why), 0);
    CHECK_STR_EQ(sid, "s1");
    CHECK_STR_EQ(cwd, "/w");
    json_decref(p);
    p = json_loads("{\"cwd\":\"w\",\"mcpServers\":[]}", 0, NULL);
    CHECK_INT_EQ(acp_params_session(p, false, NULL, &cwd, &why), -EINVAL);
    CHECK_STR_EQ(why.message, "cwd must be an absolute path");
    api_error_clear(&why);
    json_decref(p);
}
