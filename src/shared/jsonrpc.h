/* JSON-RPC 2.0 framing shared by the protocols we speak over it: ACP (src/agent/acp-*.c) and MCP
 * (src/mcp/asb-mcp*.c). One message is one compact JSON object (a line on stream transports, a
 * body over HTTP). Pure functions over jansson values; fuzzed by fuzz/fuzz-acp-jsonrpc.c and
 * fuzz/fuzz-mcp-jsonrpc.c. Never logs. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Error codes of JSON-RPC 2.0. */
#define JSONRPC_ERR_PARSE -32700
#define JSONRPC_ERR_INVALID_REQUEST -32600
#define JSONRPC_ERR_METHOD_NOT_FOUND -32601
#define JSONRPC_ERR_INVALID_PARAMS -32602
#define JSONRPC_ERR_INTERNAL -32603

/* Longest message accepted from a peer; longer input ends the connection (or is refused). */
#define JSONRPC_MAX_LINE (8u * 1024u * 1024u)

typedef enum jsonrpc_msg_kind {
    JSONRPC_MSG_REQUEST,
    JSONRPC_MSG_NOTIFICATION,
    JSONRPC_MSG_RESPONSE,
} jsonrpc_msg_kind;

typedef struct jsonrpc_msg {
    jsonrpc_msg_kind kind;
    json_t *root;       /* owned: the whole message */
    json_t *id;         /* borrowed from root; NULL for notifications */
    const char *method; /* borrowed; NULL for responses */
    json_t *params;     /* borrowed; NULL when absent */
    json_t *result;     /* borrowed; responses only, NULL on error */
    json_t *error;      /* borrowed; responses only */
} jsonrpc_msg;

/* Parses one message (a line without its newline). Returns 0 and fills *ret (release with
 * jsonrpc_msg_done), or a JSON-RPC error code (<0) and sets *ret_error to the error response to
 * send (owned by the caller; NULL when nothing must be sent, e.g. a broken response from the
 * peer). Batches (arrays) are refused as invalid requests. */
int jsonrpc_parse(const char *line, size_t len, jsonrpc_msg *ret, json_t **ret_error);
void jsonrpc_msg_done(jsonrpc_msg *m);

/* Builders. Each returns a new reference (NULL on ENOMEM). `id` is copied by reference, so the
 * reply carries the very JSON type the peer sent. `data` (may be NULL) is stolen. */
json_t *jsonrpc_error(json_t *id, int code, const char *message, json_t *data);
/* `result` is stolen; NULL means JSON null. */
json_t *jsonrpc_result(json_t *id, json_t *result);
/* `params` is stolen. */
json_t *jsonrpc_request(json_int_t id, const char *method, json_t *params);
json_t *jsonrpc_notification(const char *method, json_t *params);

/* Serialises `msg` as one compact line ending in '\n'. Returns a malloc'd string owned by the
 * caller, its length in *ret_len; NULL on ENOMEM. */
char *jsonrpc_dump(const json_t *msg, size_t *ret_len);
