/* libasb: the sandbox client. Talks to one sandbox's sandboxd over its unix sockets: files over
 * REST (`/v1/files/...`), processes over gRPC (`process.v1.ProcessService`).
 *
 * An asb_sandbox is immutable once opened and safe to use from several threads at once: every
 * call makes its own connection. That is what lets asb_sandbox_write_stdin(),
 * asb_sandbox_signal() and asb_sandbox_resize() run while another thread is inside
 * asb_sandbox_start().
 *
 * Errors: sandboxd's REST `{"code","message"}` bodies and gRPC statuses map to the public enum
 * (NOT_FOUND -> ASB_ENOTFOUND, PERMISSION_DENIED -> ASB_EFORBIDDEN, INVALID_ARGUMENT ->
 * ASB_EBADREQUEST, CONFLICT/FAILED_PRECONDITION/ABORTED -> ASB_ECONFLICT, INTERNAL/UNAVAILABLE ->
 * ASB_ESERVER, DEADLINE_EXCEEDED -> ASB_ETIMEOUT, ...); asb_error_last() keeps the server's
 * message, its code name in `reason` ("PERMISSION_DENIED") and the HTTP status for REST.
 *
 * Retries (as upstream's Go SDK): file operations are retried on connection failures and on
 * 500/502/503/504, up to max_attempts with exponential backoff (base doubling, capped 8 s,
 * +-25 % jitter). Streamed reads are retried only while no byte was delivered, streamed writes
 * never (the body cannot be replayed); buffer writes are. Process calls are never retried. */
#ifndef ASB_SANDBOX_H
#define ASB_SANDBOX_H

#include <stdint.h>

#include "asb/client.h"
#include "asb/common.h"
#include "asb/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct asb_sandbox asb_sandbox;

typedef struct asb_sandbox_options {
    unsigned int version;    /* ASB_SANDBOX_OPTIONS_VERSION */
    long timeout_ms;         /* per file request attempt; 0: no limit */
    long connect_timeout_ms; /* 0: 10000 */
    int max_attempts;        /* file operations; 0: 6, 1: no retry */
    long retry_delay_ms;     /* backoff before the 2nd attempt, doubled each time; 0: 500 */
} asb_sandbox_options;

#define ASB_SANDBOX_OPTIONS_VERSION 1
/* clang-format off */
#define ASB_SANDBOX_OPTIONS_INIT {ASB_SANDBOX_OPTIONS_VERSION, 0, 0, 0, 0}
/* clang-format on */

/* Opens a handle on a sandboxd serving REST on rest_socket and gRPC on grpc_socket (unix socket
 * paths). No connection is made yet. opts may be NULL. *out is owned by the caller
 * (asb_sandbox_free). Returns ASB_OK, ASB_EINVAL or ASB_ENOMEM. */
ASB_PUBLIC int asb_sandbox_open_sockets(asb_sandbox **out, const char *rest_socket,
                                        const char *grpc_socket, const asb_sandbox_options *opts);

/* What a Sandbox object says about reaching its sandboxd (asb_sandbox_phase_of()). */
typedef enum asb_sandbox_phase {
    ASB_SANDBOX_PENDING = 0,       /* being started, resumed or re-observed: may become Ready */
    ASB_SANDBOX_READY = 1,         /* Ready=True at the current generation */
    ASB_SANDBOX_FINISHED = 2,      /* Finished=True (main process exited) and its container still
                                      exists (status.selector set): a local sandboxd keeps serving
                                      files and exec until the Sandbox is deleted */
    ASB_SANDBOX_SUSPENDED = 3,     /* spec.operatingMode Suspended: Ready only after a resume */
    ASB_SANDBOX_STOPPED = 4,       /* will not become Ready as it is: a terminal Ready reason at the
                                      current generation (ImageNotSupported, ImageNotFound,
                                      ImageUnpackFailed, ReconcilerError, SandboxExpired, ...) or
                                      being deleted */
    ASB_SANDBOX_FINISHED_GONE = 5, /* Finished=True but its container is gone (expired, torn
                                      down): nothing serves it any more */
} asb_sandbox_phase;

/* Classifies the Sandbox object `object` (JSON text, as asb_object_get() returns it). why (may
 * be NULL) receives "Reason: message" of the condition that decided ("PodSucceeded: main process
 * exited with code 0", "ImageNotSupported: image ...", "" when there is none), owned by the
 * caller (asb_free). Returns ASB_OK, ASB_EPROTOCOL (not a JSON object) or ASB_ENOMEM. */
ASB_PUBLIC int asb_sandbox_phase_of(asb_sandbox_phase *out, char **why, const char *object);

/* Waits, on a watch, until the Sandbox `name` in ns is no longer ASB_SANDBOX_PENDING (at once
 * when it is not): Ready, Finished (with or without its container), suspended or stopped. *out (may
 * be NULL) is that object, owned by the caller (asb_free); classify it with asb_sandbox_phase_of().
 * Returns ASB_OK, ASB_ENOTFOUND (does not exist, or deleted while waiting), ASB_ETIMEOUT,
 * ASB_ECANCELLED or another error of the get/watch. */
ASB_PUBLIC int asb_sandbox_wait_settled(char **out, asb_client *client, const char *ns,
                                        const char *name, const asb_wait_options *opts);

/* Opens the Sandbox `name` in namespace ns (NULL: "default") known to client: gets the object,
 * requires it to be ASB_SANDBOX_READY or ASB_SANDBOX_FINISHED (else ASB_ECONFLICT, "sandbox ...
 * is not ready (Reason: message)", at once) and uses the sockets
 * $STATE/run/<metadata.uid>/{rest,grpc}.sock, STATE being the state directory the client was
 * configured from. A Ready=True about an older generation is waited for (up to 10 s) with
 * asb_sandbox_wait_settled(). The client is not kept. Errors of the get (ASB_ENOTFOUND, ...) are
 * returned as they are. */
ASB_PUBLIC int asb_sandbox_open(asb_sandbox **out, asb_client *client, const char *ns,
                                const char *name, const asb_sandbox_options *opts);

/* Opens the Sandbox `name` in ns (NULL: "default") of the `asb serve` whose state directory the
 * client was configured from, by the names that server keeps there for its Ready sandboxes
 * ($STATE/names/<ns>/<name>), without an API request: what `asb exec` tries first. Returns
 * ASB_ENOTFOUND when the client's server is not that state directory's (its `server` file), no
 * Ready sandbox has that name there, or
 * nothing answers on its socket (gone, stopped or suspended since): asb_sandbox_open() then
 * reads the object and says why. The sandbox is held by its uid, never by the name, so a name
 * taken over later by another Sandbox does not move this handle. */
ASB_PUBLIC int asb_sandbox_open_local(asb_sandbox **out, asb_client *client, const char *ns,
                                      const char *name, const asb_sandbox_options *opts);

/* asb_sandbox_open() on a Sandbox object already read (its JSON text, as asb_object_get() gives
 * it), so that a caller which has just read it does not read it again; the same checks, waits and
 * errors, plus ASB_EINVAL when sandbox_json is not JSON or has no metadata.name. */
ASB_PUBLIC int asb_sandbox_open_object(asb_sandbox **out, asb_client *client, const char *ns,
                                       const char *sandbox_json, const asb_sandbox_options *opts);

/* Opens a handle that reaches the sandbox `name` in ns (NULL: "default") through a router at
 * router_url ("http://HOST:PORT"): file calls are REST requests to router_url with the headers
 * X-Sandbox-ID, X-Sandbox-Namespace and X-Sandbox-Port: 8080, process calls gRPC over a TCP h2c
 * connection with X-Sandbox-Port: 9090; token (may be NULL) is sent as a bearer token. No
 * connection is made yet and the sandbox is not looked up. Returns ASB_OK, ASB_EINVAL (NULL
 * argument, or a URL that is not plain http://) or ASB_ENOMEM. */
ASB_PUBLIC int asb_sandbox_open_router(asb_sandbox **out, const char *router_url,
                                       const char *token, const char *ns, const char *name,
                                       const asb_sandbox_options *opts);

/* The router URL for client: $ASB_ROUTER, else the first line of <state>/router (written by
 * `asb serve`). *out is owned by the caller (asb_free). ASB_ECONFIG when neither exists. */
ASB_PUBLIC int asb_client_router(char **out, asb_client *client);

/* A URL a person opens in a browser to reach the server on `port` inside the sandbox `name` of
 * ns (NULL: "default"): "http://PORT-NAME.NS.localhost:P/?asb-preview=...", signed by the router
 * of asb_client_router() (asked with the client's token) and valid for ttl_seconds (0: a day).
 * The link admits that port of that sandbox only (docs/router.md, "Preview hosts"). *out is owned
 * by the caller (asb_free). The sandbox is not looked up. Returns ASB_OK, ASB_EINVAL,
 * ASB_ECONFIG (no router), ASB_ECONNECT, ASB_EUNAUTHORIZED, ASB_EBADREQUEST (a port of
 * sandboxd: 8080, 9090, 8888) or ASB_ENOMEM. */
ASB_PUBLIC int asb_preview_url(char **out, asb_client *client, const char *ns, const char *name,
                               unsigned port, long ttl_seconds);

/* A connected byte stream to 127.0.0.1:port inside the sandbox `name` of ns (NULL: "default"),
 * through the router of asb_client_router() (an HTTP CONNECT with the client's token and the
 * X-Sandbox-* headers; the router connects inside the sandbox's network namespace). *out is a
 * blocking socket, the caller's to close; whatever the sandbox's server sends comes first on it.
 * Returns ASB_OK, ASB_EINVAL, ASB_ECONFIG (no router), ASB_ECONNECT, ASB_EUNAUTHORIZED,
 * ASB_ENOTFOUND (no such sandbox), ASB_ESERVER (nothing listens on port: the router's 502; the
 * message is the router's detail), ASB_ETIMEOUT, ASB_EPROTOCOL or ASB_ENOMEM. */
ASB_PUBLIC int asb_port_connect(int *out, asb_client *client, const char *ns, const char *name,
                                unsigned port);

/* asb_sandbox_open_router() with the URL of asb_client_router() and the client's token. */
ASB_PUBLIC int asb_sandbox_open_via_router(asb_sandbox **out, asb_client *client, const char *ns,
                                           const char *name, const asb_sandbox_options *opts);

/* Frees a handle. Accepts NULL. */
ASB_PUBLIC void asb_sandbox_free(asb_sandbox *sandbox);

/* The socket paths of a handle (NULL for a handle through a router). Borrowed, valid while the
 * handle lives. */
ASB_PUBLIC const char *asb_sandbox_rest_socket(const asb_sandbox *sandbox);
ASB_PUBLIC const char *asb_sandbox_grpc_socket(const asb_sandbox *sandbox);

/* ---- Files. `path` is relative to the sandbox root (a leading '/' is the root too). ---- */

/* Receives a chunk of file content. Return 0 to go on; any other value stops the read, which then
 * returns that value. */
typedef int (*asb_sandbox_data_cb)(const char *data, size_t len, void *payload);

/* Streams the file at path to cb, chunk by chunk (memory stays bounded whatever the size). */
ASB_PUBLIC int asb_sandbox_file_read(asb_sandbox *sandbox, const char *path,
                                     asb_sandbox_data_cb cb, void *payload);

/* Reads the whole file into *out (owned by the caller, asb_free; NUL-terminated for convenience,
 * the terminator not counted in *out_len). */
ASB_PUBLIC int asb_sandbox_file_read_buffer(char **out, size_t *out_len, asb_sandbox *sandbox,
                                            const char *path);

/* Supplies file content for a write: fill at most `size` bytes of buf and return how many;
 * return 0 at the end of the content and a negative value to abort the write (which then returns
 * ASB_ECANCELLED). */
typedef long (*asb_sandbox_source_cb)(char *buf, size_t size, void *payload);

/* Writes (atomically replaces) the file at path with permission bits `mode` (0: 0644), parents
 * created as needed, streaming the content from cb. Not retried. */
ASB_PUBLIC int asb_sandbox_file_write(asb_sandbox *sandbox, const char *path, unsigned int mode,
                                      asb_sandbox_source_cb cb, void *payload);

/* Writes the file at path from a buffer (retried like the other file operations). */
ASB_PUBLIC int asb_sandbox_file_write_buffer(asb_sandbox *sandbox, const char *path,
                                             unsigned int mode, const void *data, size_t len);

#define ASB_SANDBOX_FILE 0
#define ASB_SANDBOX_DIRECTORY 1

typedef struct asb_sandbox_file_entry {
    char *name;          /* entry name (no directory part) */
    int64_t size;        /* bytes (directories: their inode size) */
    int type;            /* ASB_SANDBOX_FILE or ASB_SANDBOX_DIRECTORY */
    int64_t modified_at; /* mtime, seconds since the epoch (UTC) */
    unsigned int mode;   /* permission bits, e.g. 0644 */
} asb_sandbox_file_entry;

/* Lists the directory at path: *out is an array of *out_count entries sorted by name, owned by
 * the caller (asb_sandbox_file_entries_free). A file path gives ASB_EBADREQUEST. */
ASB_PUBLIC int asb_sandbox_file_list(asb_sandbox_file_entry **out, size_t *out_count,
                                     asb_sandbox *sandbox, const char *path);

/* Frees a listing. Accepts NULL. */
ASB_PUBLIC void asb_sandbox_file_entries_free(asb_sandbox_file_entry *entries, size_t count);

/* *out = 1 when path exists (file or directory), 0 when it does not. */
ASB_PUBLIC int asb_sandbox_file_exists(int *out, asb_sandbox *sandbox, const char *path);

/* Deletes the file or empty directory at path; with `recursive`, a directory and everything in
 * it. A non-empty directory without `recursive` gives ASB_ECONFLICT. */
ASB_PUBLIC int asb_sandbox_file_delete(asb_sandbox *sandbox, const char *path, int recursive);

/* ---- Processes ---- */

typedef struct asb_sandbox_process_options {
    unsigned int version;    /* ASB_SANDBOX_PROCESS_OPTIONS_VERSION */
    const char *const *env;  /* "NAME=VALUE" strings, NULL-terminated, added to (overriding) the
                                daemon's environment; NULL: none */
    const char *cwd;         /* working directory relative to the sandbox root; NULL: the root */
    long timeout_ms;         /* gRPC deadline (the process is killed when it passes); 0: none */
    int pty;                 /* asb_sandbox_start only: run on a pseudo-terminal (output arrives
                                as stdout) */
    unsigned int pty_cols, pty_rows; /* initial size when both are non-zero */
    const volatile int *cancel;      /* when *cancel becomes non-zero (any thread) the call ends
                                        with ASB_ECANCELLED within ~100 ms; may be NULL */
    /* version 2: */
    int close_stdin; /* asb_sandbox_start only: close the process's stdin as soon as it has
                        started (`kubectl exec` without -i), on the Start call's own connection;
                        what asb_sandbox_write_stdin(.., eof 1) from init_cb does, one
                        connection cheaper */
} asb_sandbox_process_options;

#define ASB_SANDBOX_PROCESS_OPTIONS_VERSION 2
/* clang-format off */
#define ASB_SANDBOX_PROCESS_OPTIONS_INIT \
    {ASB_SANDBOX_PROCESS_OPTIONS_VERSION, NULL, NULL, 0, 0, 0, 0, NULL, 0}
/* clang-format on */

typedef struct asb_sandbox_result {
    int exit_code;    /* the exit status; -1 when killed by a signal */
    char *out_data;   /* standard output (NUL-terminated, terminator not counted) */
    size_t out_len;
    char *err_data;   /* standard error (NUL-terminated, terminator not counted) */
    size_t err_len;
} asb_sandbox_result;

/* Runs argv (NULL-terminated; argv[0] looked up in the daemon's PATH) to completion with stdin
 * on /dev/null. A non-zero exit is not an error: *out has it. *out is owned by the caller
 * (asb_sandbox_result_free). Never retried. */
ASB_PUBLIC int asb_sandbox_execute(asb_sandbox_result **out, asb_sandbox *sandbox,
                                   const char *const *argv, const asb_sandbox_process_options *opts);

/* Frees a result. Accepts NULL. */
ASB_PUBLIC void asb_sandbox_result_free(asb_sandbox_result *result);

/* Events of a started process, delivered in order on the thread of asb_sandbox_start(): init
 * once, output chunks, exit once. Each callback may be NULL; returning non-zero cancels the
 * process (the daemon kills it) and asb_sandbox_start() returns that value. */
typedef struct asb_sandbox_callbacks {
    unsigned int version; /* ASB_SANDBOX_CALLBACKS_VERSION */
    int (*init_cb)(int process_id, void *payload);
    int (*stdout_cb)(const char *data, size_t len, void *payload);
    int (*stderr_cb)(const char *data, size_t len, void *payload);
    int (*exit_cb)(int exit_code, void *payload);
    void *payload;
} asb_sandbox_callbacks;

#define ASB_SANDBOX_CALLBACKS_VERSION 1
/* clang-format off */
#define ASB_SANDBOX_CALLBACKS_INIT {ASB_SANDBOX_CALLBACKS_VERSION, NULL, NULL, NULL, NULL, NULL}
/* clang-format on */

/* Starts argv and streams its events to cbs until the process ends; *out_exit_code (may be NULL)
 * gets its exit code. The process id given to init_cb is what asb_sandbox_write_stdin(),
 * asb_sandbox_signal() and asb_sandbox_resize() take, from any thread, while this call runs. */
ASB_PUBLIC int asb_sandbox_start(int *out_exit_code, asb_sandbox *sandbox, const char *const *argv,
                                 const asb_sandbox_process_options *opts,
                                 const asb_sandbox_callbacks *cbs);

/* Writes len bytes to the process's stdin (len 0: nothing), then closes it when eof is non-zero.
 * In PTY mode closing stdin closes the terminal (sandboxd semantics). */
ASB_PUBLIC int asb_sandbox_write_stdin(asb_sandbox *sandbox, int process_id, const void *data,
                                       size_t len, int eof);

/* Sends a signal to the process group: SIGINT (2), SIGTERM (15) or SIGKILL (9); others give
 * ASB_EBADREQUEST from the daemon. */
ASB_PUBLIC int asb_sandbox_signal(asb_sandbox *sandbox, int process_id, int signal);

/* Resizes the process's terminal (ASB_ECONFLICT when it has none). */
ASB_PUBLIC int asb_sandbox_resize(asb_sandbox *sandbox, int process_id, unsigned int cols,
                                  unsigned int rows);

/* ---- Main process output ---- */

typedef struct asb_sandbox_logs_options {
    unsigned int version;       /* ASB_SANDBOX_LOGS_OPTIONS_VERSION */
    int follow;                 /* non-zero: keep delivering new output until the main process has
                                   finished (its exit recorded) or the Sandbox is deleted */
    const volatile int *cancel; /* follow: when *cancel becomes non-zero the call ends with
                                   ASB_ECANCELLED within ~100 ms; may be NULL */
    /* version 2 */
    const char *container;   /* NULL or the container's name: its main process; "sandboxd":
                                sandboxd's own output (followed until the Sandbox is deleted) */
    int previous;            /* non-zero: the output of the run before the container's last
                                (re)start; no follow */
    long long tail_lines;    /* >= 0: only the last N lines of what is there, then what follows;
                                -1: everything */
    long long since_seconds; /* > 0: only lines written in the last N seconds */
    int timestamps;          /* non-zero: each line starts with the time it was written (RFC 3339,
                                nanoseconds, UTC) and a space */
} asb_sandbox_logs_options;

#define ASB_SANDBOX_LOGS_OPTIONS_VERSION 2
/* clang-format off */
#define ASB_SANDBOX_LOGS_OPTIONS_INIT {ASB_SANDBOX_LOGS_OPTIONS_VERSION, 0, NULL, NULL, 0, -1, 0, 0}
/* clang-format on */

/* Streams the output (stdout and stderr interleaved, as written) of the main process of the
 * Sandbox `name` in ns (NULL: "default") to cb, from the start; or sandboxd's own output
 * (opts->container "sandboxd"). The log is read from the host,
 * $STATE/sandboxes/<metadata.uid>/{main,sandboxd}.log, STATE being the client's state directory,
 * so it stays readable after the main process ended; the sandbox need not be Ready. opts may be
 * NULL (no follow). Errors: those of the get (ASB_ENOTFOUND for an unknown sandbox); ASB_ENOTFOUND
 * with reason "NoMainProcess" when the container has no command, "NoLog" (without follow) when the
 * main process has not started yet (with follow: waits for it), "NoContainer" for a container
 * name that is neither the sandbox's container nor "sandboxd", "NoPrevious" when there was no
 * earlier run; ASB_ECONFIG without a state directory; cb's non-zero value stops the read and is
 * returned. */
ASB_PUBLIC int asb_sandbox_logs(asb_client *client, const char *ns, const char *name,
                                const asb_sandbox_logs_options *opts, asb_sandbox_data_cb cb,
                                void *payload);

#ifdef __cplusplus
}
#endif
#endif
