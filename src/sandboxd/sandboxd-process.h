/* The process registry: every child sandboxd spawned (Start and Execute) until it is reaped,
 * the daemon-wide Start id counter, and SIGCHLD reaping (sandboxd may be PID 1, so unknown
 * children are reaped too). Loop thread only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

typedef struct child child;

typedef struct child_ops {
    /* The child was reaped; `status` as from waitpid. */
    void (*on_exit)(child *c, int status);
    /* Hard stop: the child was SIGKILLed and reaped synchronously; release everything (close
     * handles; free from their close callbacks). */
    void (*destroy)(child *c);
} child_ops;

struct child {
    const child_ops *ops;
    pid_t pid;    /* also the process group id */
    int32_t id;   /* Start process id while registered for lookups, 0 otherwise */
    bool reaped;
    bool tracked; /* on the table's list */
    child *next, *prev;
};

typedef struct process_table {
    uv_loop_t *loop;
    uv_signal_t sigchld;
    child *head;
    unsigned live;   /* tracked children not yet reaped */
    int32_t next_id; /* next Start id; starts at 1 */
    /* Groups of finished children that may still have members (a background grandchild):
     * shutdown signals them too, so nothing we started outlives sandboxd. Pruned as they empty. */
    pid_t *lingering;
    size_t n_lingering, cap_lingering;
} process_table;

int process_table_init(process_table *t, uv_loop_t *loop);
/* Allocates the next Start id (1, 2, 3, ...). */
int32_t process_table_next_id(process_table *t);
/* Tracks a freshly spawned child (call right after spawn, before returning to the loop). */
void process_table_add(process_table *t, child *c);
/* Stops tracking (the child must be reaped or the caller takes care of it); its process group
 * is remembered while it has members. */
void process_table_remove(process_table *t, child *c);
/* The live-or-draining Start process with id `id` (c->id set), or NULL. */
child *process_table_find_id(process_table *t, int32_t id);
/* Sends `sig` to the process group of every unreaped child (falls back to the pid). */
void process_table_signal_all(process_table *t, int sig);
/* kill(-pgid, sig), falling back to kill(pid, sig). Returns 0 or -errno. */
int child_signal(const child *c, int sig);
/* Hard stop: SIGKILL every group, reap synchronously, destroy every child, stop SIGCHLD. */
void process_table_close(process_table *t, uv_close_cb closed);
/* Converts a waitpid status to the exit code of the API: exit status, or -1 for a signal. */
int process_exit_code(int status);
