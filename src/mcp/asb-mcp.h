/* `asb mcp`: a Model Context Protocol server over libasb. The protocol core (asb-mcp.c) turns one
 * JSON-RPC message into one reply; the transports (asb-mcp-stdio.c, asb-mcp-http.c) move messages
 * and run requests on threads of their own so that a notifications/cancelled can reach a running
 * tools/call; the tools (asb-mcp-tools.c) and resources (asb-mcp-resources.c) talk to the
 * control plane and the sandboxes with one asb_client per call (clients are not thread-safe).
 *
 * src/mcp is this server's folder: its one entry is the `asb mcp` verb (asb_mcp, in the table of
 * src/cli/asb.c); it uses libasb and src/cli's shared flags (cli/asb-cli.h), and src/cli uses
 * nothing of it but that entry. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "shared/jsonrpc.h"
#include "asb/asb.h"

/* MCP's error codes beyond JSON-RPC's own. */
#define MCP_ERR_RESOURCE_NOT_FOUND -32002
#define MCP_ERR_UNAUTHORIZED -32000 /* body of a 401 */

/* Protocol revisions we speak, newest first; an initialize asking for another gets the newest. */
#define MCP_LATEST_VERSION "2025-11-25"
extern const char *const mcp_versions[];

/* One MCP session: stdio has exactly one, HTTP one per Mcp-Session-Id. */
typedef struct mcp_session {
    char id[33];      /* hex id sent as Mcp-Session-Id ("" on stdio) */
    char version[16]; /* negotiated protocol revision ("" before initialize) */
    bool initialized;
} mcp_session;

typedef struct mcp_call mcp_call;

/* Sends a notification tied to a running request (progress). `notification` is stolen. Returns 0
 * or a negative errno (the peer is gone). */
typedef int (*mcp_notify_fn)(mcp_call *call, json_t *notification);

/* One request while it runs. Built by the transport, registered in the server while it runs so
 * notifications/cancelled can find it by (session, id). */
struct mcp_call {
    mcp_session *session;
    json_t *id;             /* the request id (a reference held by the call) */
    json_t *progress_token; /* params._meta.progressToken (a reference) or NULL */
    volatile int cancel;    /* set by notifications/cancelled or a transport that lost its peer */
    mcp_notify_fn notify;   /* may be NULL: no way to send notifications */
    void *transport;        /* the transport's own state */
    mcp_call *next;
};

typedef struct mcp_server {
    pthread_mutex_t lock;
    mcp_call *running; /* in-flight calls, under lock */
} mcp_server;

void mcp_server_init(mcp_server *s);
void mcp_server_done(mcp_server *s);

/* Handles one message. A request returns its response (owned by the caller; never NULL unless out
 * of memory); a notification or a response from the peer returns NULL. call->session must be set;
 * call->id and progress_token are filled from the message here. Blocks while a tool runs. */
json_t *mcp_handle(mcp_server *s, mcp_call *call, const jsonrpc_msg *m);

/* Sets cancel on every running call of `session` whose id equals `id`. */
void mcp_cancel(mcp_server *s, const mcp_session *session, const json_t *id);

/* Whether a session negotiated at least `version` (revisions compare as dates). */
bool mcp_version_at_least(const mcp_session *session, const char *version);

/* Releases the references a call took (id, progress token). */
void mcp_call_done(mcp_call *call);

/* ---- tools (asb-mcp-tools.c) ---- */

/* The tools/list result. */
json_t *mcp_tools_list(const mcp_session *session);
/* Runs tools/call. Returns the CallToolResult (tool failures are results with isError), or NULL
 * with *ret_code and *ret_why set for a protocol error (unknown tool: -32602). */
json_t *mcp_tools_call(mcp_call *call, const json_t *params, int *ret_code, const char **ret_why);

/* ---- resources (asb-mcp-resources.c) ---- */

json_t *mcp_resources_list(mcp_call *call, int *ret_code, const char **ret_why);
json_t *mcp_resource_templates_list(void);
/* resources/read; NULL with *ret_code (-32002 unknown resource, -32602 bad params) and *ret_why
 * (static) or *ret_message (owned) set. */
json_t *mcp_resources_read(mcp_call *call, const json_t *params, int *ret_code, char **ret_message);

/* ---- control plane and sandboxes (asb-mcp-sandbox.c) ---- */

/* A client from the global flags and the usual discovery. On failure *ret_error (owned) says
 * why in words an agent can act on. */
int mcp_client_new(asb_client **ret, char **ret_error);
/* NAME is a SandboxClaim bound to a sandbox (looked up first), or a Sandbox: *ret_sandbox (owned)
 * is the Sandbox's name. On failure *ret_error (owned) says what is wrong and what to do. */
int mcp_sandbox_resolve(asb_client *cl, const char *ns, const char *name, char **ret_sandbox,
                        char **ret_error);
/* Resolves NAME and opens its data plane (Ready or Finished). */
int mcp_sandbox_open(asb_sandbox **ret, asb_client *cl, const char *ns, const char *name,
                     char **ret_error);

/* Runs op on the sandbox NAME in ns. Handles are cached by (ns, NAME): an asb_sandbox is
 * immutable and thread-safe, so after the first call a tool goes straight to the data plane
 * without asking the control plane again. When the cached handle cannot connect (the sandbox was
 * deleted, re-created or suspended) it is dropped and op runs once more on a freshly resolved
 * one. Returns op's result, or ASB_ENOTFOUND with *ret_error (owned) set when the sandbox cannot
 * be opened. */
typedef int (*mcp_sandbox_op)(asb_sandbox *sandbox, void *payload);
int mcp_with_sandbox(const char *ns, const char *name, mcp_sandbox_op op, void *payload,
                     char **ret_error);
/* Drops the cached handle of (ns, NAME), e.g. after deleting it. */
void mcp_sandbox_forget(const char *ns, const char *name);
/* Frees every cached handle (at exit). */
void mcp_sandbox_cache_clear(void);
/* "message" of the last libasb error, prefixed by context, owned. NULL only when out of memory. */
char *mcp_error_text(const char *context);

/* ---- request threads (asb-mcp-threads.c) ---- */

/* Runs fn(arg) on a new joinable thread. 0 or a negative errno (fn not run). */
int mcp_thread_start(void *(*fn)(void *), void *arg);
/* Joins every thread started, waiting for those still running. */
void mcp_threads_join_all(void);

/* ---- transports ---- */

int mcp_serve_stdio(mcp_server *s);
typedef struct mcp_http_options {
    const char *listen; /* HOST:PORT */
    const char *token;  /* required bearer token; NULL: none required */
} mcp_http_options;
int mcp_serve_http(mcp_server *s, const mcp_http_options *o);

/* --via-router: the data plane goes through the router (asb_sandbox_open_via_router: $ASB_ROUTER,
 * else <state>/router), as it must against a cluster; otherwise the sandbox's local sockets. */
extern bool mcp_via_router;

/* Set by SIGINT/SIGTERM: the transports stop. */
extern volatile int mcp_stop;
