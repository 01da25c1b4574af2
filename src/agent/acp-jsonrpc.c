/* ACP parameter checks (see acp-jsonrpc.h); the framing is src/shared/jsonrpc.c. */
#include "agent/acp-jsonrpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
/* -EINVAL: the caller answers JSONRPC_ERR_INVALID_PARAMS with err's message. */
static int bad_params(api_error *err, const char *why)
{
    return api_error_set_errno(err, -EINVAL, "%s", why);
}

static const char *get_str(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return NULL;
    return json_string_value(v);
}

int acp_params_initialize(const json_t *params, json_int_t *ret_version, api_error *err)
{
    if (!json_is_object(params))
        return bad_params(err, "params must be an object");
    json_t *v = json_object_get(params, "protocolVersion");
    if (json_is_string(v)) {
        /* Pre-1 drafts sent strings; they read as version 0. */
        *ret_version = 0;
    } else if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 65535) {
        *ret_version = json_integer_value(v);
    } else {
        return bad_params(err, "protocolVersion must be an integer between 0 and 65535");
    }
    json_t *caps = json_object_get(params, "clientCapabilities");
    if (caps && !json_is_object(caps) && !json_is_null(caps))
        return bad_params(err, "clientCapabilities must be an object");
    return 0;
}

int acp_params_authenticate(const json_t *params, const char **ret_method_id,
                            const char **ret_token, api_error *err)
{
    if (!json_is_object(params))
        return bad_params(err, "params must be an object");
    const char *m = get_str(params, "methodId");
    if (!m)
        return bad_params(err, "methodId must be a string");
    *ret_method_id = m;
    *ret_token = NULL;
    json_t *meta = json_object_get(params, "_meta");
    if (meta && !json_is_object(meta) && !json_is_null(meta))
        return bad_params(err, "_meta must be an object");
    if (json_is_object(meta))
        *ret_token = get_str(meta, "token");
    return 0;
}

static int check_mcp_servers(const json_t *servers, api_error *err)
{
    if (!json_is_array(servers))
        return bad_params(err, "mcpServers must be an array");
    size_t i;
    json_t *s;
    json_array_foreach (servers, i, s) {
        if (!json_is_object(s) || !get_str(s, "name"))
            return bad_params(err, "each mcpServers entry needs a name");
    }
    return 0;
}

int acp_params_session(const json_t *params, bool need_session_id, const char **ret_session_id,
                       const char **ret_cwd, api_error *err)
{
    if (!json_is_object(params))
        return bad_params(err, "params must be an object");
    const char *cwd = get_str(params, "cwd");
    if (!cwd || cwd[0] != '/')
        return bad_params(err, "cwd must be an absolute path");
    int r = check_mcp_servers(json_object_get(params, "mcpServers"), err);
    if (r < 0)
        return r;
    if (need_session_id) {
        const char *sid = get_str(params, "sessionId");
        if (!sid)
            return bad_params(err, "sessionId must be a string");
        *ret_session_id = sid;
    }
    *ret_cwd = cwd;
    return 0;
}

static const char *block_text(const json_t *b, api_error *err)
{
    const char *type = get_str(b, "type");
    if (!type) {
        bad_params(err, "each prompt block needs a type");
        return NULL;
    }
    if (strcmp(type, "text") == 0) {
        const char *t = get_str(b, "text");
        if (!t)
            bad_params(err, "text block needs text");
        return t;
    }
    if (strcmp(type, "resource_link") == 0) {
        const char *u = get_str(b, "uri");
        if (!u || !get_str(b, "name"))
            bad_params(err, "resource_link needs uri and name");
        return u && get_str(b, "name") ? u : NULL;
    }
    if (strcmp(type, "resource") == 0) {
        json_t *res = json_object_get(b, "resource");
        const char *t = json_is_object(res) ? get_str(res, "text") : NULL;
        if (!t || !get_str(res, "uri"))
            bad_params(err, "only embedded text resources with a uri are supported");
        return t && get_str(res, "uri") ? t : NULL;
    }
    bad_params(err,
               "unsupported content block type (the agent advertises no image or audio support)");
    return NULL;
}

int acp_params_prompt(const json_t *params, const char **ret_session_id, char **ret_text,
                      api_error *err)
{
    if (!json_is_object(params))
        return bad_params(err, "params must be an object");
    const char *sid = get_str(params, "sessionId");
    if (!sid)
        return bad_params(err, "sessionId must be a string");
    json_t *prompt = json_object_get(params, "prompt");
    if (!json_is_array(prompt))
        return bad_params(err, "prompt must be an array of content blocks");
    /* The blocks' texts, one per line (no line break after an empty start). */
    _cleanup_buf_ buf text = BUF_INIT;
    size_t i;
    json_t *b;
    json_array_foreach (prompt, i, b) {
        if (!json_is_object(b))
            return bad_params(err, "each prompt block must be an object");
        const char *t = block_text(b, err);
        if (!t)
            return api_error_errno(err);
        if ((text.len > 0 && buf_append_byte(&text, '\n') < 0) || buf_append_str(&text, t) < 0)
            return api_error_set_errno(err, -ENOMEM, "out of memory");
    }
    char *joined = buf_steal(&text, NULL);
    if (!joined)
        return api_error_set_errno(err, -ENOMEM, "out of memory");
    *ret_session_id = sid;
    *ret_text = joined;
    return 0;
}

int acp_params_cancel(const json_t *params, const char **ret_session_id, api_error *err)
{
    if (!json_is_object(params))
        return bad_params(err, "params must be an object");
    const char *sid = get_str(params, "sessionId");
    if (!sid)
        return bad_params(err, "sessionId must be a string");
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
