/* JSON-RPC 2.0 framing (see jsonrpc.h). */
#include "shared/jsonrpc.h"

#include <stdlib.h>
#include <string.h>

#include "shared/json-util.h"

void jsonrpc_msg_done(jsonrpc_msg *m)
{
    if (!m)
        return;
    json_decref(m->root);
    memset(m, 0, sizeof(*m));
}

json_t *jsonrpc_error(json_t *id, int code, const char *message, json_t *data)
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

json_t *jsonrpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
                     result ? result : json_null());
}

json_t *jsonrpc_request(json_int_t id, const char *method, json_t *params)
{
    return json_pack("{s:s,s:I,s:s,s:o}", "jsonrpc", "2.0", "id", id, "method", method, "params",
                     params ? params : json_object());
}

json_t *jsonrpc_notification(const char *method, json_t *params)
{
    return json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", method, "params",
                     params ? params : json_object());
}

char *jsonrpc_dump(const json_t *msg, size_t *ret_len)
{
    /* Compact output escapes every control character, so the line holds no raw newline. */
    return json_dumps_line(msg, JSON_COMPACT | JSON_ENSURE_ASCII, ret_len);
}

static bool id_valid(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id) || json_is_null(id) || json_is_real(id);
}

static int fail(json_t **ret_error, json_t *id, int code, const char *message)
{
    *ret_error = jsonrpc_error(id, code, message, NULL);
    return code;
}

int jsonrpc_parse(const char *line, size_t len, jsonrpc_msg *ret, json_t **ret_error)
{
    *ret_error = NULL;
    memset(ret, 0, sizeof(*ret));
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root)
        return fail(ret_error, NULL, JSONRPC_ERR_PARSE, "Parse error");
    if (!json_is_object(root)) {
        json_decref(root);
        /* Batches are not supported (ACP never had them; MCP dropped them in 2025-06-18). */
        return fail(ret_error, NULL, JSONRPC_ERR_INVALID_REQUEST,
                    "Invalid Request: not a JSON object");
    }
    json_t *id = json_object_get(root, "id");
    json_t *reply_id = id_valid(id) ? id : NULL;
    json_t *ver = json_object_get(root, "jsonrpc");
    json_t *method = json_object_get(root, "method");
    int r;
    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0) {
        r = fail(ret_error, reply_id, JSONRPC_ERR_INVALID_REQUEST,
                 "Invalid Request: jsonrpc must be \"2.0\"");
        goto bad;
    }
    if (id && !id_valid(id)) {
        r = fail(ret_error, NULL, JSONRPC_ERR_INVALID_REQUEST, "Invalid Request: bad id type");
        goto bad;
    }
    if (method) {
        if (!json_is_string(method) || json_string_length(method) == 0 ||
            strlen(json_string_value(method)) != json_string_length(method)) {
            r = fail(ret_error, id, JSONRPC_ERR_INVALID_REQUEST,
                     "Invalid Request: method must be a string");
            goto bad;
        }
        json_t *params = json_object_get(root, "params");
        if (params && !json_is_object(params) && !json_is_array(params) && !json_is_null(params)) {
            r = fail(ret_error, id, JSONRPC_ERR_INVALID_REQUEST,
                     "Invalid Request: params must be an object or an array");
            goto bad;
        }
        ret->kind = id ? JSONRPC_MSG_REQUEST : JSONRPC_MSG_NOTIFICATION;
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
        ret->kind = JSONRPC_MSG_RESPONSE;
        ret->root = root;
        ret->id = id;
        ret->result = result;
        ret->error = error;
        return 0;
    }
    if (result || error) {
        /* A broken response: answering it could start a ping-pong of errors. */
        r = JSONRPC_ERR_INVALID_REQUEST;
        goto bad;
    }
    r = fail(ret_error, reply_id, JSONRPC_ERR_INVALID_REQUEST, "Invalid Request: no method");
bad:
    json_decref(root);
    return r;
}
