/* JSON-RPC 2.0 framing and ACP parameter checks (see acp-jsonrpc.h). */
#include "agent/acp-jsonrpc.h"

#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"

void acp_msg_done(acp_msg *m)
{
    if (!m)
        return;
    json_decref(m->root);
    memset(m, 0, sizeof(*m));
}

json_t *acp_jsonrpc_error(json_t *id, int code, const char *message, json_t *data)
{
    json_t *err = json_pack("{s:i,s:s}", "code", code, "message", message ? message : "error");
    if (!err) {
        json_decref(data);
        return NULL;
    }
    if (data)
        json_object_set_new(err, "data", data);
    return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err);
}

json_t *acp_jsonrpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
                     result ? result : json_null());
}

json_t *acp_jsonrpc_request(json_int_t id, const char *method, json_t *params)
{
    return json_pack("{s:s,s:I,s:s,s:o}", "jsonrpc", "2.0", "id", id, "method", method, "params",
                     params ? params : json_object());
}

json_t *acp_jsonrpc_notification(const char *method, json_t *params)
{
    return json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", method, "params",
                     params ? params : json_object());
}

char *acp_jsonrpc_dump(const json_t *msg, size_t *ret_len)
{
    /* Compact output escapes every control character, so the line holds no raw newline. */
    char *s = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) {
        free(s);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = 0;
    *ret_len = n + 1;
    return line;
}

static bool id_valid(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id) || json_is_null(id) || json_is_real(id);
}

static int fail(json_t **ret_error, json_t *id, int code, const char *message)
{
    *ret_error = acp_jsonrpc_error(id, code, message, NULL);
    return code;
}

int acp_jsonrpc_parse(const char *line, size_t len, acp_msg *ret, json_t **ret_error)
{
    *ret_error = NULL;
    memset(ret, 0, sizeof(*ret));
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root)
        return fail(ret_error, NULL, ACP_ERR_PARSE, "Parse error");
    if (!json_is_object(root)) {
        json_decref(root);
        /* Batches are not part of ACP. */
        return fail(ret_error, NULL, ACP_ERR_INVALID_REQUEST, "Invalid Request: not a JSON object");
    }
    json_t *id = json_object_get(root, "id");
    json_t *reply_id = id_valid(id) ? id : NULL;
    json_t *ver = json_object_get(root, "jsonrpc");
    json_t *method = json_object_get(root, "method");
    int r;
    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0) {
        r = fail(ret_error, reply_id, ACP_ERR_INVALID_REQUEST,
                 "Invalid Request: jsonrpc must be \"2.0\"");
        goto bad;
    }
    if (id && !id_valid(id)) {
        r = fail(ret_error, NULL, ACP_ERR_INVALID_REQUEST, "Invalid Request: bad id type");
        goto bad;
    }
    if (method) {
        if (!json_is_string(method) || json_string_length(method) == 0 ||
            strlen(json_string_value(method)) != json_string_length(method)) {
            r = fail(ret_error, id, ACP_ERR_INVALID_REQUEST,
                     "Invalid Request: method must be a string");
            goto bad;
        }
        json_t *params = json_object_get(root, "params");
        if (params && !json_is_object(params) && !json_is_array(params) && !json_is_null(params)) {
            r = fail(ret_error, id, ACP_ERR_INVALID_REQUEST,
                     "Invalid Request: params must be an object or an array");
            goto bad;
        }
        ret->kind = id ? ACP_MSG_REQUEST : ACP_MSG_NOTIFICATION;
        ret->root = root;
        ret->id = id;
        ret->method = json_string_value(method);
        ret->params = json_is_null(params) ? NULL : params;
        return 0;
    }
    json_t *result = json_object_get(root, "result");
    json_t *error = json_object_get(root, "error");
    if (id && !json_is_null(id) && (result != NULL) != (error != NULL) &&
        (!error || json_is_object(error))) {
        ret->kind = ACP_MSG_RESPONSE;
        ret->root = root;
        ret->id = id;
        ret->result = result;
        ret->error = error;
        return 0;
    }
    if (result || error) {
        /* A broken response: answering it could start a ping-pong of errors. */
        r = ACP_ERR_INVALID_REQUEST;
        goto bad;
    }
    r = fail(ret_error, reply_id, ACP_ERR_INVALID_REQUEST, "Invalid Request: no method");
bad:
    json_decref(root);
    return r;
}

static int bad_params(const char **ret_why, const char *why)
{
    *ret_why = why;
    return ACP_ERR_INVALID_PARAMS;
}

static const char *get_str(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return NULL;
    return json_string_value(v);
}

int acp_params_initialize(const json_t *params, json_int_t *ret_version, const char **ret_why)
{
    if (!json_is_object(params))
        return bad_params(ret_why, "params must be an object");
    json_t *v = json_object_get(params, "protocolVersion");
    if (json_is_string(v)) {
        /* Pre-1 drafts sent strings; they read as version 0. */
        *ret_version = 0;
    } else if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 65535) {
        *ret_version = json_integer_value(v);
    } else {
        return bad_params(ret_why, "protocolVersion must be an integer between 0 and 65535");
    }
    json_t *caps = json_object_get(params, "clientCapabilities");
    if (caps && !json_is_object(caps) && !json_is_null(caps))
        return bad_params(ret_why, "clientCapabilities must be an object");
    return 0;
}

int acp_params_authenticate(const json_t *params, const char **ret_method_id,
                            const char **ret_token, const char **ret_why)
{
    if (!json_is_object(params))
        return bad_params(ret_why, "params must be an object");
    const char *m = get_str(params, "methodId");
    if (!m)
        return bad_params(ret_why, "methodId must be a string");
    *ret_method_id = m;
    *ret_token = NULL;
    json_t *meta = json_object_get(params, "_meta");
    if (meta && !json_is_object(meta) && !json_is_null(meta))
        return bad_params(ret_why, "_meta must be an object");
    if (json_is_object(meta))
        *ret_token = get_str(meta, "token");
    return 0;
}

static int check_mcp_servers(const json_t *servers, const char **ret_why)
{
    if (!json_is_array(servers))
        return bad_params(ret_why, "mcpServers must be an array");
    size_t i;
    json_t *s;
    json_array_foreach (servers, i, s) {
        if (!json_is_object(s) || !get_str(s, "name"))
            return bad_params(ret_why, "each mcpServers entry needs a name");
    }
    return 0;
}

int acp_params_session(const json_t *params, bool need_session_id, const char **ret_session_id,
                       const char **ret_cwd, const char **ret_why)
{
    if (!json_is_object(params))
        return bad_params(ret_why, "params must be an object");
    const char *cwd = get_str(params, "cwd");
    if (!cwd || cwd[0] != '/')
        return bad_params(ret_why, "cwd must be an absolute path");
    int r = check_mcp_servers(json_object_get(params, "mcpServers"), ret_why);
    if (r < 0)
        return r;
    if (need_session_id) {
        const char *sid = get_str(params, "sessionId");
        if (!sid)
            return bad_params(ret_why, "sessionId must be a string");
        *ret_session_id = sid;
    }
    *ret_cwd = cwd;
    return 0;
}

static const char *block_text(const json_t *b, const char **ret_why)
{
    const char *type = get_str(b, "type");
    if (!type) {
        *ret_why = "each prompt block needs a type";
        return NULL;
    }
    if (strcmp(type, "text") == 0) {
        const char *t = get_str(b, "text");
        if (!t)
            *ret_why = "text block needs text";
        return t;
    }
    if (strcmp(type, "resource_link") == 0) {
        const char *u = get_str(b, "uri");
        if (!u || !get_str(b, "name"))
            *ret_why = "resource_link needs uri and name";
        return u && get_str(b, "name") ? u : NULL;
    }
    if (strcmp(type, "resource") == 0) {
        json_t *res = json_object_get(b, "resource");
        const char *t = json_is_object(res) ? get_str(res, "text") : NULL;
        if (!t || !get_str(res, "uri"))
            *ret_why = "only embedded text resources with a uri are supported";
        return t && get_str(res, "uri") ? t : NULL;
    }
    *ret_why = "unsupported content block type (the agent advertises no image or audio support)";
    return NULL;
}

int acp_params_prompt(const json_t *params, const char **ret_session_id, char **ret_text,
                      const char **ret_why)
{
    if (!json_is_object(params))
        return bad_params(ret_why, "params must be an object");
    const char *sid = get_str(params, "sessionId");
    if (!sid)
        return bad_params(ret_why, "sessionId must be a string");
    json_t *prompt = json_object_get(params, "prompt");
    if (!json_is_array(prompt))
        return bad_params(ret_why, "prompt must be an array of content blocks");
    /* The blocks' texts, one per line (no line break after an empty start). */
    _cleanup_buf_ buf text = BUF_INIT;
    size_t i;
    json_t *b;
    json_array_foreach (prompt, i, b) {
        if (!json_is_object(b))
            return bad_params(ret_why, "each prompt block must be an object");
        const char *t = block_text(b, ret_why);
        if (!t)
            return ACP_ERR_INVALID_PARAMS;
        if ((text.len > 0 && buf_append_byte(&text, '\n') < 0) || buf_append_str(&text, t) < 0)
            return bad_params(ret_why, "out of memory");
    }
    char *joined = buf_steal(&text, NULL);
    if (!joined)
        return bad_params(ret_why, "out of memory");
    *ret_session_id = sid;
    *ret_text = joined;
    return 0;
}

int acp_params_cancel(const json_t *params, const char **ret_session_id, const char **ret_why)
{
    if (!json_is_object(params))
        return bad_params(ret_why, "params must be an object");
    const char *sid = get_str(params, "sessionId");
    if (!sid)
        return bad_params(ret_why, "sessionId must be a string");
    *ret_session_id = sid;
    return 0;
}

static const struct {
    const char *id;
    const char *name;
} permission_options[] = {
    {"allow_once", "Allow"},
    {"allow_always", "Always allow this tool"},
    {"reject_once", "Reject"},
    {"reject_always", "Always reject this tool"},
};

json_t *acp_permission_options(void)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < sizeof(permission_options) / sizeof(permission_options[0]); i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:s}", "optionId", permission_options[i].id,
                                           "name", permission_options[i].name, "kind",
                                           permission_options[i].id));
    return a;
}

acp_permission acp_permission_from_response(const json_t *result, const json_t *error)
{
    if (error || !json_is_object(result))
        return ACP_PERMISSION_REJECT_ONCE;
    json_t *outcome = json_object_get(result, "outcome");
    const char *o = json_is_object(outcome) ? get_str(outcome, "outcome") : NULL;
    if (!o)
        return ACP_PERMISSION_REJECT_ONCE;
    if (strcmp(o, "cancelled") == 0)
        return ACP_PERMISSION_CANCELLED;
    if (strcmp(o, "selected") != 0)
        return ACP_PERMISSION_REJECT_ONCE;
    const char *opt = get_str(outcome, "optionId");
    if (!opt)
        return ACP_PERMISSION_REJECT_ONCE;
    if (strcmp(opt, "allow_once") == 0)
        return ACP_PERMISSION_ALLOW_ONCE;
    if (strcmp(opt, "allow_always") == 0)
        return ACP_PERMISSION_ALLOW_ALWAYS;
    if (strcmp(opt, "reject_always") == 0)
        return ACP_PERMISSION_REJECT_ALWAYS;
    return ACP_PERMISSION_REJECT_ONCE;
}
