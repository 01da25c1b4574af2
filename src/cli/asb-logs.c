/* `asb logs NAME`: the main process's output. The local control plane does not run a container
 * `command` as a main process yet (docs/local-sandboxes.md), so there is no log to show: say so
 * after resolving NAME (so an unknown sandbox still reads as one). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"

int asb_logs(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, CLI_GLOBAL_LONG, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        FILE *f = c == 'h' ? stdout : stderr;
        fprintf(f, "Usage: asb logs NAME\n\nPrint the output of the main process of the sandbox "
                   "NAME (or of the sandbox of the claim NAME).\n\nOptions:\n"
                   "  -h, --help      show this help\n" CLI_GLOBAL_HELP);
        return c == 'h' ? 0 : 2;
    }
    if (argc - optind != 1 || !*argv[optind]) {
        fprintf(stderr, "error: expected one sandbox name: asb logs NAME\n");
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    _cleanup_free_ char *sn = NULL;
    ret = cli_sandbox_resolve(cl, argv[optind], &sn, NULL);
    asb_client_free(cl);
    if (ret)
        return ret;
    fprintf(stderr, "error: logs of sandbox \"%s\" are not available: this control plane does not "
                    "run a container command as the sandbox's main process yet, so there is no "
                    "main-process output to show (use `asb exec %s -- CMD`)\n",
            sn, sn);
    return 1;
}
