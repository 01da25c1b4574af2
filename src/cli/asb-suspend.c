/* `asb suspend NAME` / `asb resume NAME`: merge-patch spec.operatingMode of the Sandbox (NAME a
 * sandbox or a claim) to Suspended / Running. The reconciler does the rest; follow it with
 * `asb wait --for=condition=Suspended sandbox/NAME` or `--for=condition=Ready`. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"

static int set_mode(int argc, char **argv, const char *verb, const char *mode, const char *done)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, CLI_GLOBAL_LONG, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c != 'h')
            return cli_usage_option(c, argv, NULL);
        FILE *f = c == 'h' ? stdout : stderr;
        fprintf(f, "Usage: asb %s NAME\n\nSet spec.operatingMode of the sandbox NAME (or of the "
                   "sandbox of the claim NAME) to %s.\n\nOptions:\n"
                   "  -h, --help      show this help\n" CLI_GLOBAL_HELP,
                verb, mode);
        return c == 'h' ? 0 : 2;
    }
    if (argc - optind != 1 || !*argv[optind]) {
        fprintf(stderr, "error: expected one sandbox name: asb %s NAME\n", verb);
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    _cleanup_free_ char *sn = NULL;
    ret = cli_sandbox_resolve(cl, argv[optind], &sn, NULL);
    if (!ret) {
        char patch[128];
        snprintf(patch, sizeof(patch), "{\"spec\":{\"operatingMode\":\"%s\"}}", mode);
        if (asb_object_patch(NULL, cl, "sandbox", cli_namespace(), sn, patch, 0) != ASB_OK)
            ret = cli_print_error(NULL);
        else
            printf("sandbox.agents.x-k8s.io/%s %s\n", sn, done);
    }
    asb_client_free(cl);
    return ret;
}

int asb_suspend(int argc, char **argv)
{
    return set_mode(argc, argv, "suspend", "Suspended", "suspended");
}

int asb_resume(int argc, char **argv)
{
    return set_mode(argc, argv, "resume", "Running", "resumed");
}
