/* Names of the files in an `asb serve` state directory that the server and its clients agree on.
 * Header only: libasb uses it without linking src/basic. */
#pragma once

/* The API URL, one line; written last at startup (whoever sees it also finds STATE_FILE_ROUTER)
 * and removed at a clean shutdown. */
#define STATE_FILE_SERVER "server"
/* The router URL, one line. */
#define STATE_FILE_ROUTER "router"
/* The bearer token (0600). */
#define STATE_FILE_TOKEN "token"
/* Held with flock(LOCK_EX) by the one `asb serve` of the directory for its whole life; holds its
 * pid as text. A client that finds no STATE_FILE_SERVER while this lock is held knows a server is
 * starting and waits for it. */
#define STATE_FILE_LOCK "serve.lock"
/* Directory of the names of Ready sandboxes: SANDBOX_NAMES_DIR/<namespace>/<name> is a symbolic
 * link to SANDBOX_NAMES_TARGET<uid>, the run/<uid> directory of that Sandbox's sockets, kept by
 * `asb serve` while the Sandbox is Ready (removed before it is frozen), so that a client on the
 * same machine reaches a sandbox by name without an API request. A uid is one Sandbox for good:
 * a stale link leads to a directory that is gone, never to another sandbox. */
#define SANDBOX_NAMES_DIR "names"
#define SANDBOX_NAMES_TARGET "../../run/"
/* A local sandbox's container: its cgroup is SANDBOX_CGROUP_PARENT<uid> (every hierarchy), and
 * runc writes its first process's pid to sandboxes/<uid>/SANDBOX_PID_FILE. */
#define SANDBOX_CGROUP_PARENT "/asb/"
#define SANDBOX_PID_FILE "bundle/pid"
