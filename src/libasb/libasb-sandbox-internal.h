/* libasb sandbox client internals (hidden): the handle, the pure helpers the unit tests reach
 * (path encoding, error mapping, gRPC framing) and the small gRPC-over-HTTP/2 client. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "asb/sandbox.h"
#include "basic/buf.h"

struct asb_sandbox {
    char *rest_socket, *grpc_socket; /* local mode (NULL through the router) */
    /* router mode: base URL "http://host:port" (no trailing slash), its host and port for the
     * gRPC h2c connection, the X-Sandbox-ID / X-Sandbox-Namespace values and the bearer token */
    char *router_url, *router_host, *router_port;
    char *sandbox_id, *sandbox_ns, *token;
    long timeout_ms, connect_timeout_ms;
    int max_attempts;
    long retry_delay_ms;
};

/* "/v1/files/" + every byte outside A-Za-z0-9-_.~ percent-encoded ('/' as %2F), a bare "." or
 * ".." segment as %2E / %2E%2E (Go SDK). Owned by the caller; NULL on ENOMEM. */
char *asbi_sandbox_files_path(const char *path);

/* asb_sandbox_phase_of() on a parsed object: *ret the phase, *ret_explanation (when not NULL)
 * "Reason: message" of the deciding condition, owned by the caller. Returns ASB_OK or ASB_ENOMEM.
 */
int asbi_sandbox_phase(const json_t *obj, asb_sandbox_phase *ret, char **ret_explanation);

/* Whether a Sandbox whose Ready is False with this reason stays so until its spec changes
 * (ImageNotSupported, SandboxExpired, ...: waits for Ready stop on them). */
bool asbi_sandbox_reason_terminal(const char *reason);

/* <state_dir>/run/<uid>/{rest,grpc}.sock (DESIGN.md), both owned by the caller. A uid that is
 * empty, ".", ".." or holds a '/' gives ASB_EPROTOCOL. */
int asbi_sandbox_socket_paths(const char *state_dir, const char *uid, char **ret_rest,
                              char **ret_grpc);

/* sandboxd's error code name ("NOT_FOUND", as in REST bodies and gRPC status names) -> public
 * enum; unknown names fall back to the HTTP status. */
int asbi_sandbox_code_from_name(const char *name, int http_status);
/* gRPC status number -> its canonical name ("PERMISSION_DENIED"); "UNKNOWN" when out of range. */
const char *asbi_grpc_status_name(int status);
/* Sets the last error from a REST error reply (`{"code","message"}` or text) and returns it. */
int asbi_sandbox_error_from_rest(int http_status, const char *body, size_t len);
/* Sets the last error from a gRPC status + (already decoded) message and returns it. */
int asbi_sandbox_error_from_grpc(int status, const char *message);
/* Percent-decodes a grpc-message header value. Owned by the caller; NULL on ENOMEM. */
char *asbi_grpc_message_decode(const char *value, size_t len);
/* Backoff before attempt `attempt` (>= 1) in ms: base * 2^(attempt-1), capped 8000, no jitter. */
long asbi_sandbox_backoff_ms(long base_ms, int attempt);

/* gRPC length-prefixed message reassembly from arbitrary DATA chunks. */
typedef int (*asbi_grpc_msg_cb)(const uint8_t *msg, size_t len, void *payload);
typedef struct asbi_grpc_reader {
    buf pending;        /* bytes of the message not yet complete */
    size_t max_message; /* 0: 64 MiB */
} asbi_grpc_reader;
/* Appends data and calls cb for every complete message. Returns 0, cb's non-zero value, or
 * ASB_EPROTOCOL (compressed or oversized message) / ASB_ENOMEM. */
int asbi_grpc_reader_feed(asbi_grpc_reader *r, const uint8_t *data, size_t len,
                          asbi_grpc_msg_cb cb, void *payload);
void asbi_grpc_reader_done(asbi_grpc_reader *r);

/* Splits "http://HOST:PORT[/]" (HOST may be [v6]) into host and port (default 80), both owned
 * by the caller. Other schemes and malformed URLs give ASB_EINVAL. */
int asbi_router_url_split(const char *url, char **ret_host, char **ret_port);
/* TCP connection to the router at host:port (blocking connect bounded by the kernel's timeout,
 * then non-blocking like the unix socket): the fd, or an error code (set). */
int asbi_router_connect(const char *host, const char *port);

/* A second unary request a call may carry on its own connection (at most one): the message
 * callback fills method/req/req_len and sets ready, and the request goes out as a new stream on
 * the next turn of the call's loop (unless the call has ended by then). Its reply and status are
 * read and dropped: it is for a best-effort step such as closing a started process's stdin. */
typedef struct asbi_grpc_followup {
    const char *method;
    const uint8_t *req; /* unframed protobuf, the callback's */
    size_t req_len;
    int ready; /* set by the message callback */
    int sent;  /* set once submitted */
} asbi_grpc_followup;

/* One gRPC call on a fresh connection to the sandbox's gRPC unix socket, or to the router over
 * TCP (h2c prior knowledge, X-Sandbox-* headers) in router mode: sends one request message
 * (unframed protobuf bytes), delivers every response message to cb, and maps the final status.
 * `follow` (may be NULL) is a follow-up request for the same connection (above). Returns ASB_OK,
 * cb's non-zero value (the call is cancelled), ASB_ECANCELLED (*cancel), ASB_ETIMEOUT,
 * ASB_ECONNECT, ASB_EPROTOCOL or the mapped gRPC status (error set). */
int asbi_grpc_call(const asb_sandbox *s, const char *method, const uint8_t *req, size_t req_len,
                   long timeout_ms, const volatile int *cancel, asbi_grpc_msg_cb cb, void *payload,
                   asbi_grpc_followup *follow);
