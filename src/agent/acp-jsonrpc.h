/* The Agent Client Protocol (AGENT.md §1.1) over JSON-RPC 2.0, one compact JSON object per line:
 * the ACP parameter checks over the shared framing (src/shared/jsonrpc.h). Pure
 * functions over jansson values; the fuzz target fuzz/fuzz-acp-jsonrpc.c drives them. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "shared/jsonrpc.h"
#include "shared/status.h"

#define ACP_PROTOCOL_VERSION 1

/* The framing (parse, replies, the JSONRPC_ERR_* codes) is the shared JSON-RPC layer,
 * src/shared/jsonrpc.h. Errors of the ACP SDK's RequestError: */
#define ACP_ERR_AUTH_REQUIRED -32000
#define ACP_ERR_RESOURCE_NOT_FOUND -32002

/* ACP parameter checks shared by the server and the fuzzer. On failure they return -EINVAL (the
 * caller answers JSONRPC_ERR_INVALID_PARAMS with err's message) or -ENOMEM, and fill *err. */
int acp_params_initialize(const json_t *params, json_int_t *ret_version, api_error *err);
int acp_params_authenticate(const json_t *params, const char **ret_method_id,
                            const char **ret_token, api_error *err);
/* session/new and session/load: cwd (absolute) and mcpServers (array of objects) required;
 * session/load also requires sessionId (NULL ret_session_id for session/new). */
int acp_params_session(const json_t *params, bool need_session_id, const char **ret_session_id,
                       const char **ret_cwd, api_error *err);
/* session/prompt: sessionId and a ContentBlock array; the text of text blocks, resource_link uris
 * and embedded text resources is joined into *ret_text (malloc'd, owned by the caller). */
int acp_params_prompt(const json_t *params, const char **ret_session_id, char **ret_text,
                      api_error *err);
/* session/cancel. */
int acp_params_cancel(const json_t *params, const char **ret_session_id, api_error *err);

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
