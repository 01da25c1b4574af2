/* src/server: `asb serve`'s server side, the asb-server binary (docs/architecture.md).
 *
 * Contract: asb_serve parses the flags, takes $ASB_STATE_DIR's lock and starts, in this order,
 * the store (local/store), the API server (local/apiserver), the Sandbox reconciler
 * (local/reconcile), the claim controller (local/controller), the snapshotter (local/snapshot)
 * and the data-plane router (src/router); $ASB_STATE_DIR/server, which clients wait for, is
 * written last. A step that fails says why on stderr and everything started before it is
 * stopped, in the reverse order, by one teardown (serve_stop); SIGTERM/SIGINT take the same
 * path after removing the URL files. The client side of the verb is src/cli/asb-serve-exec.c,
 * which execs asb-server with the same arguments. */
#pragma once

/* `asb serve ARGS` (argv[0] = "serve"): the process exit code (0, 1 on a failed start, 2 on a
 * usage error). Returns only at shutdown. */
int asb_serve(int argc, char **argv);
