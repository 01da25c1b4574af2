/* JSON-RPC 2.0 framing for the Agent Client Protocol (AGENT.md §1.1): one compact JSON object per
 * line. Pure functions over jansson values; the fuzz target fuzz/fuzz-acp-jsonrpc.c drives them. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define ACP_PROTOCOL_VERSION 1

/* Error codes of JSON-RPC 2.0 and of the ACP SDK's RequestError. */
#define ACP_ERR_PARSE -32700
#define ACP_ERR_INVALID_REQUEST -32600
#define ACP_ERR_METHOD_NOT_FOUND -32601
#define ACP_ERR_INVALID_PARAMS -32602
#define ACP_ERR_INTERNAL -32603
#define ACP_ERR_AUTH_REQUIRED -32000
#define ACP_ERR_RESOURCE_NOT_FOUND -32002

/* Longest line accepted from a peer; longer input ends the connection. */
#define ACP_MAX_LINE (8u * 1024u * 1024u)

typedef enum acp_msg_kind {
    ACP_MSG_REQUEST,
    ACP_MSG_NOTIFICATION,
    ACP_MSG_RESPONSE,
} acp_msg_kind;

typedef struct acp_msg {
    acp_msg_kind kind;
    json_t *root;       /* owned: the whole message */
    json_t *id;         /* borrowed from root; NULL for notifications */
    const char *method; /* borrowed; NULL for responses */
    json_t *params;     /* borrowed; NULL when absent */
    json_t *result;     /* borrowed; responses only, NULL on error */
    json_t *error;      /* borrowed; responses only */
} acp_msg;

/* Parses one line (without its newline). Returns 0 and fills *ret (release with acp_msg_done), or
 * a JSON-RPC error code (<0) and sets *ret_error to the error response to send (owned by the
 * caller; NULL when nothing must be sent, e.g. a broken response from the peer). */
int acp_jsonrpc_parse(const char *line, size_t len, acp_msg *ret, json_t **ret_error);
void acp_msg_done(acp_msg *m);

/* Builders. Each returns a new reference (NULL on ENOMEM). `id` is copied by reference, so the
 * reply carries the very JSON type the peer sent. `data` (may be NULL) is stolen. */
json_t *acp_jsonrpc_error(json_t *id, int code, const char *message, json_t *data);
/* `result` is stolen; NULL means JSON null. */
json_t *acp_jsonrpc_result(json_t *id, json_t *result);
/* `params` is stolen. */
json_t *acp_jsonrpc_request(json_int_t id, const char *method, json_t *params);
json_t *acp_jsonrpc_notification(const char *method, json_t *params);

/* Serialises `msg` as one compact line ending in '\n'. Returns a malloc'd string owned by the
 * caller, its length in *ret_len; NULL on ENOMEM. */
char *acp_jsonrpc_dump(const json_t *msg, size_t *ret_len);

/* ACP parameter checks shared by the server and the fuzzer. On failure they return
 * ACP_ERR_INVALID_PARAMS and set *ret_why to a static description. */
int acp_params_initialize(const json_t *params, json_int_t *ret_version, const char **ret_why);
int acp_params_authenticate(const json_t *params, const char **ret_method_id,
                            const char **ret_token, const char **ret_why);
/* session/new and session/load: cwd (absolute) and mcpServers (array of objects) required;
 * session/load also requires sessionId (NULL ret_session_id for session/new). */
int acp_params_session(const json_t *params, bool need_session_id, const char **ret_session_id,
                       const char **ret_cwd, const char **ret_why);
/* session/prompt: sessionId and a ContentBlock array; the text of text blocks, resource_link uris
 * and embedded text resources is joined into *ret_text (malloc'd, owned by the caller). */
int acp_params_prompt(const json_t *params, const char **ret_session_id, char **ret_text,
                      const char **ret_why);
/* session/cancel. */
int acp_params_cancel(const json_t *params, const char **ret_session_id, const char **ret_why);

/* Permission outcome of a session/request_permission response. */
typedef enum acp_permission {
    ACP_PERMISSION_ALLOW_ONCE,
    ACP_PERMISSION_ALLOW_ALWAYS,
    ACP_PERMISSION_REJECT_ONCE,
    ACP_PERMISSION_REJECT_ALWAYS,
    ACP_PERMISSION_CANCELLED,
} acp_permission;

/* Option ids offered by the server (equal to their kinds). */
json_t *acp_permission_options(void);
/* Maps a response message (result or error; may be NULL for "no answer") to an outcome; anything
 * unexpected is a reject, never an allow. */
acp_permission acp_permission_from_response(const json_t *result, const json_t *error);
