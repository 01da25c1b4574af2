/* sandboxd's configuration and the state shared by its REST and gRPC halves. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "basic/time-util.h"

#define SANDBOXD_VERSION "0.1.0"

typedef struct sandboxd_config {
    char *listen_host;          /* default "0.0.0.0" */
    int grpc_port;              /* default 9090 */
    int rest_port;              /* default 8080 */
    char *root_dir;             /* as given; default "/workspace" */
    char *metadata_env_prefix;  /* default "SANDBOX_"; empty means the default */
    usec_t shutdown_timeout;    /* default 10s */
    usec_t http_idle_timeout;   /* default 60s */
    int stream_chunk_size;      /* <=0 means 4096 */
    usec_t header_timeout;      /* REST request head deadline; default 10s, 0: none */
    int max_connections;        /* open REST connections, all listeners; <=0: the default */
    int max_execute_output;     /* Execute stdout+stderr bytes kept; <=0: the default */
    char *rest_socket;          /* optional unix socket path for REST */
    char *grpc_socket;          /* optional unix socket path for gRPC */
    int rest_fd;                /* inherited listening socket for REST, -1 if none */
    int grpc_fd;                /* inherited listening socket for gRPC, -1 if none */
    bool log_json;              /* --zap-encoder=json */
    char **main_command;        /* argv after `--` (or the first non-flag), NULL-terminated; may be empty */
    char *main_dir;             /* $ASB_MAIN_DIR (main process log/exit dir), taken out of the
                                   environment in main() before any thread starts; may be NULL */
    char *main_workdir;         /* $ASB_MAIN_WORKDIR (the main process's cwd: the container's
                                   workingDir), taken out likewise; NULL = the root dir */
    int main_output_fd;         /* $ASB_MAIN_OUTPUT_FD (an inherited pipe for the main process's
                                   stdout/stderr, kept open and close-on-exec), taken out
                                   likewise; -1: none (then $ASB_MAIN_DIR/log) */
} sandboxd_config;

/* Shared runtime state. Owned by main; REST threads and the gRPC loop borrow it. */
typedef struct sandboxd {
    const sandboxd_config *config;
    char *root_path;   /* the root with symlinks resolved (R' of the path rules) */
    int root_fd;       /* O_DIRECTORY|O_PATH fd of root_path, for *at() confinement */
    usec_t started_at; /* CLOCK_MONOTONIC at construction */
    atomic_bool ready; /* false once shutdown begins: health answers 503 */
} sandboxd;

/* Parses argv with Go `flag` semantics. On error or -h prints to stderr and returns the exit
 * code to use (>=0); returns -1 when the daemon should run. *cfg is filled with owned strings. */
int sandboxd_config_parse(sandboxd_config *cfg, int argc, char **argv);
void sandboxd_config_done(sandboxd_config *cfg);

/* A gRPC client's default receive limit is 4 MiB per message; an ExecuteResponse carrying this
 * much stdout+stderr stays under it (field tags and lengths take at most 18 bytes). */
#define SANDBOXD_DEFAULT_MAX_EXECUTE_OUTPUT (4 * 1024 * 1024 - 64)
#define SANDBOXD_DEFAULT_MAX_CONNECTIONS 512

static inline size_t sandboxd_max_execute_output(const sandboxd_config *cfg)
{
    return cfg->max_execute_output > 0 ? (size_t)cfg->max_execute_output
                                       : SANDBOXD_DEFAULT_MAX_EXECUTE_OUTPUT;
}

static inline unsigned sandboxd_max_connections(const sandboxd_config *cfg)
{
    return cfg->max_connections > 0 ? (unsigned)cfg->max_connections
                                    : SANDBOXD_DEFAULT_MAX_CONNECTIONS;
}

/* Effective chunk size for Start output reads. */
static inline int sandboxd_chunk_size(const sandboxd_config *cfg)
{
    return cfg->stream_chunk_size > 0 ? cfg->stream_chunk_size : 4096;
}
