/* Command construction and spawning for Start and Execute (shared/spec/UPSTREAM.md §1.5):
 * PATH lookup in the daemon's PATH, env overrides, confined cwd, posix_spawn into a new process
 * group (or a new session on a pty), pipes or a pty for stdio. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "process.pb-c.h"
#include "sandboxd/sandboxd.h"
#include "shared/status.h"

typedef struct spawn_cmd {
    char *path;   /* owned: what to exec */
    char **argv;  /* owned array; strings borrowed from the request */
    char **envp;  /* owned array when env_owned, else `environ` */
    char **env_owned; /* owned "k=v" strings */
    size_t n_env_owned;
    bool env_built;
    int cwd_fd;     /* owned O_PATH dir fd, or -1 for the root */
    int cwd_errno;  /* >0: cwd does not exist; the spawn fails with it */
    const char *cwd; /* borrowed: the request's cwd, for messages */
} spawn_cmd;

#define SPAWN_CMD_INIT {.cwd_fd = -1}

typedef enum spawn_mode { SPAWN_PIPES, SPAWN_PTY, SPAWN_EXECUTE } spawn_mode;

typedef struct spawned {
    pid_t pid;
    int in_fd;  /* owned; -1 for Execute; the master for a pty */
    int out_fd; /* owned; the same fd as in_fd for a pty */
    int err_fd; /* owned; -1 for a pty */
} spawned;

/* Resolves `name` (no '/') against the ':'-separated `path_env` like Go's exec.LookPath.
 * Returns a newly allocated path, or NULL (errno ENOENT / ENOMEM). */
char *path_lookup(const char *name, const char *path_env);

/* Validates and builds the command. On error fills *err (INVALID_ARGUMENT, NOT_FOUND,
 * PERMISSION_DENIED, INTERNAL) and returns -1. */
int spawn_cmd_build(spawn_cmd *ret, sandboxd *sd, const Process__V1__ProcessConfig *cfg,
                    api_error *err);
void spawn_cmd_done(spawn_cmd *c);

/* Spawns. `verb` is "start" or "execute" for messages. pty size applied when cols and rows > 0. */
int spawn_cmd_run(const spawn_cmd *c, sandboxd *sd, spawn_mode mode, unsigned cols, unsigned rows,
                  const char *verb, spawned *ret, api_error *err);
