/* asb-server: the server side of `asb serve` (control plane, router, reconcilers) in a binary of
 * its own, so that the client verbs of `asb` do not load SQLite, nftables, libmicrohttpd and the
 * rest at every start. `asb serve ARGS` execs `asb-server ARGS` (src/cli/asb-serve-exec.c): same
 * process, same argv after the verb, same signals and exit codes. */
#include "server/server.h"

int main(int argc, char **argv)
{
    /* getopt's messages name argv[0]: keep them as `asb serve` printed them ("serve: ..."). */
    argv[0] = (char *)"serve";
    return asb_serve(argc, argv);
}
