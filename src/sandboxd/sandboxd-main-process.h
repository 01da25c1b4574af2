/* The sandbox's main process: `sandboxd [flags] -- CMD...` starts CMD at startup in its own
 * process group (cwd = the root dir, stdin /dev/null), as a pod's container command. sandboxd
 * keeps serving while it runs and after it exits. With $ASB_MAIN_DIR set (asb serve sets it to a
 * bind-mounted host directory) its stdout/stderr go to $ASB_MAIN_DIR/log and its exit is recorded
 * in $ASB_MAIN_DIR/exit (written atomically: "<code>\n", 128+N for signal N); otherwise it
 * shares sandboxd's stdout/stderr and the exit is only logged. ASB_MAIN_DIR is removed from the
 * environment so neither the main process nor Start/Execute children see it. */
#pragma once

#include "sandboxd/sandboxd-process.h"
#include "sandboxd/sandboxd.h"

/* Starts argv[0] (looked up in PATH without a '/') and tracks it in t, so shutdown signals it.
 * A spawn failure is logged and recorded as exit code 127 (126: not executable); returns 0
 * unless out of memory. */
int main_process_start(process_table *t, sandboxd *sd, char *const argv[]);
