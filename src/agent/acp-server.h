/* acp-server: the agent loop (agent-loop.h) served over the Agent Client Protocol on TCP.
 *
 * Threads: one accept thread; one reader thread per connection, which answers initialize,
 * authenticate, session/new, session/load and session/cancel itself and routes the client's
 * responses to waiting permission requests; one worker thread per running session/prompt.
 * Every write of a line goes through the connection's write lock, so lines never interleave. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "agent/acp-jsonrpc.h"
#include "agent/agent-loop.h"

#define ACP_AUTH_METHOD_ID "asb-token"
#define ACP_DEFAULT_LISTEN "127.0.0.1:8090"
/* Connections served at once; further ones are closed right after accept. */
#define ACP_MAX_CONNECTIONS 256
/* Seconds a connection may stay unauthenticated and idle, and a blocked write may take, before
 * the connection is closed. */
#define ACP_IO_TIMEOUT_SEC 60

typedef struct acp_server_config {
    const char *listen;         /* HOST:PORT; NULL: ACP_DEFAULT_LISTEN */
    bool allow_unauthenticated; /* only honoured when listening on loopback */
    const char *token;          /* expected bearer token; NULL: nobody can authenticate */
    agent_config agent;         /* used for every session */
} acp_server_config;

typedef struct acp_server acp_server;
typedef struct acp_conn acp_conn;
typedef struct acp_session acp_session;

/* Binds the listening socket. *ret owned by the caller. Returns 0 or -errno with *err. */
int acp_server_new(acp_server **ret, const acp_server_config *cfg, api_error *err);
/* The bound address as "HOST:PORT" (borrowed). */
const char *acp_server_address(const acp_server *s);
/* Accepts connections until acp_server_stop(), then closes every connection (cancelling running
 * turns) and waits for them; returns 0 or -errno. */
int acp_server_run(acp_server *s);
/* Async-signal-safe: makes acp_server_run() return. */
void acp_server_stop(acp_server *s);
acp_server *acp_server_free(acp_server *s);

/* --- internal, shared by acp-conn.c and acp-session.c --- */

struct acp_server {
    acp_server_config cfg;
    int listen_fd;
    int stop_pipe[2];
    char *address;
    bool loopback;
    pthread_mutex_t lock; /* guards open_names, n_conns, conns, stopping */
    pthread_cond_t cond;  /* n_conns dropping */
    unsigned n_conns;
    acp_conn *conns; /* live connections, for shutdown */
    bool stopping;
    char **open_names; /* session names open on some connection */
    size_t n_open;
};

typedef struct acp_pending {
    json_int_t id;
    bool done;
    json_t *result; /* owned */
    json_t *error;  /* owned */
    struct acp_pending *next;
} acp_pending;

struct acp_session {
    acp_conn *conn;
    char *id;
    char *cwd;
    agent_session *agent;
    volatile int cancel; /* set by session/cancel or a closing connection */
    bool busy;           /* a prompt is running (guarded by conn->lock) */
    unsigned seq;        /* tool call counter, for unique toolCallIds */
    /* Model call id -> toolCallId of the current turn (prompt thread only). */
    char **call_map;
    size_t n_call_map;
    acp_session *next;
};

struct acp_conn {
    acp_server *server;
    int fd;
    pthread_mutex_t lock;       /* everything below */
    pthread_mutex_t write_lock; /* one line at a time */
    pthread_cond_t cond;        /* pending answers, cancels, workers ending */
    bool closed;
    bool initialized;
    bool authenticated;
    json_int_t next_id;
    acp_pending *pending;
    acp_session *sessions;
    unsigned workers;
    acp_conn *next_conn; /* in server->conns */
};

/* Sends one message (stolen). Returns 0 or -EPIPE once the connection is gone. */
int acp_conn_send(acp_conn *c, json_t *msg);
/* Sends a request and blocks until its answer, the connection closing, or *cancel turning
 * non-zero. Returns 0 with *ret_result / *ret_error (owned; one of them non-NULL), -ECANCELED or
 * -EPIPE. `params` is stolen. */
int acp_conn_call(acp_conn *c, const char *method, json_t *params, const volatile int *cancel,
                  json_t **ret_result, json_t **ret_error);
/* Runs the connection until EOF; frees it. Takes ownership of fd. */
void acp_conn_serve(acp_server *s, int fd);

/* Request handlers (acp-session.c). Each sends its own reply. */
void acp_session_handle_new(acp_conn *c, json_t *id, const json_t *params);
void acp_session_handle_load(acp_conn *c, json_t *id, const json_t *params);
void acp_session_handle_prompt(acp_conn *c, json_t *id, const json_t *params);
void acp_session_handle_cancel(acp_conn *c, const json_t *params);
/* Cancels and frees every session of a closing connection (workers already gone). */
void acp_session_free_all(acp_conn *c);
