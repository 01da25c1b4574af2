/* The sandbox's main process: `sandboxd [flags] -- CMD...` starts CMD at startup in its own
 * process group (cwd = the root dir, stdin /dev/null), as a pod's container command. sandboxd
 * keeps serving while it runs and after it exits. With $ASB_MAIN_OUTPUT_FD set (asb serve: the
 * write end of a pipe it reads into a capped log on the host) its stdout/stderr are that fd;
 * else with $ASB_MAIN_DIR set they go to $ASB_MAIN_DIR/log (standalone use); else it shares
 * sandboxd's stdout/stderr. With $ASB_MAIN_DIR its exit is recorded in $ASB_MAIN_DIR/exit
 * (written atomically: "<code>\n", 128+N for signal N, after the output pipe is read empty or
 * 1 s); otherwise the exit is only logged. The variables are removed from the environment so
 * neither the main process nor Start/Execute children see them. */
#pragma once

#include "sandboxd/sandboxd-process.h"
#include "sandboxd/sandboxd.h"

/* Starts argv[0] (looked up in PATH without a '/') and tracks it in t, so shutdown signals it.
 * A spawn failure is logged and recorded as exit code 127 (126: not executable); returns 0
 * unless out of memory. */
int main_process_start(process_table *t, sandboxd *sd, char *const argv[]);
