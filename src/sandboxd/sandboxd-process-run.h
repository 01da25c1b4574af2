/* A spawned child bound to its Start or Execute call: output pumps (raw chunks for Start, whole
 * capture for Execute) with flow control, the stdin write queue used by WriteStdin, exit
 * handling with the bounded output drain, and cancellation (kill the whole process group). */
#pragma once

#include "sandboxd/sandboxd-grpc-server.h"
#include "sandboxd/sandboxd-process-spawn.h"

typedef struct proc proc;

/* Wraps a freshly spawned child (takes the fds in *sp) and tracks it. `id` > 0 registers it for
 * WriteStdin/SendSignal/ResizeTTY. Returns NULL on ENOMEM (the child is then killed). */
proc *proc_new(grpc_server *s, grpc_call *call, spawned *sp, bool pty, bool execute, int32_t id);
/* Arms or stops each output pump of the process for its current state (first after init was
 * sent for Start). */
void proc_update(proc *p);
/* The call went away: forget it and SIGKILL the process group. */
void proc_cancel(proc *p);
/* The call's output queue drained: resume reading. */
void proc_resume(proc *p);

/* Registered Start process by id, or NULL. */
proc *proc_find(grpc_server *s, int32_t id);
bool proc_exited(const proc *p);
int proc_signal(proc *p, int sig);
/* TIOCSWINSZ on the pty; -ENOTTY without an active pty. */
int proc_resize(proc *p, unsigned cols, unsigned rows);

/* WriteStdin: queue `len` bytes (copied) or an EOF; the call is answered once written/closed.
 * On immediate failure fills *err and returns -1 (the call is not kept). */
int proc_stdin_write(proc *p, grpc_call *call, const uint8_t *data, size_t len, bool eof,
                     api_error *err);
/* The WriteStdin call went away. */
void proc_stdin_cancel(grpc_call *call);
