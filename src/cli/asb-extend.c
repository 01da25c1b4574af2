/* `asb extend NAME --ttl DURATION [--policy POLICY]`: moves the shutdown time to now + DURATION
 * through asb_lifecycle_extend(): of the SandboxClaim NAME (spec.lifecycle.shutdownTime; a claim
 * owns its sandbox's lifecycle), else of the Sandbox NAME (spec.shutdownTime). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void extend_usage(FILE *f)
{
    fprintf(f, "Usage: asb extend NAME --ttl DURATION [--policy POLICY]\n\n"
               "Set the shutdown time of the claim NAME (else of the sandbox NAME) to now +\n"
               "DURATION (30s, 10m, 1h or seconds).\n\nOptions:\n"
               "      --ttl DURATION     required\n"
               "      --policy POLICY    also set the shutdown policy (Delete, Retain; claims:\n"
               "                         DeleteForeground too)\n"
               "  -h, --help             show this help\n" CLI_GLOBAL_HELP);
}

int asb_extend(int argc, char **argv)
{
    enum { OPT_TTL = 0x2101, OPT_POLICY };
    static const struct option opts[] = {{"ttl", required_argument, NULL, OPT_TTL},
                                         {"policy", required_argument, NULL, OPT_POLICY},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    long long ms = -1;
    const char *policy = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case OPT_TTL:
            ms = cli_parse_timeout(optarg);
            if (ms < 0) {
                fprintf(stderr, "error: invalid duration \"%s\"\n", optarg);
                return 2;
            }
            break;
        case OPT_POLICY:
            policy = optarg;
            break;
        default:
            return cli_usage_option(c, argv, extend_usage);
        }
    }
    if (argc - optind != 1 || ms < 0) {
        fprintf(stderr, "error: expected NAME and --ttl DURATION\n");
        return main_usage_error(extend_usage);
    }
    const char *name = argv[optind];
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    long ttl = (long)((ms + 999) / 1000);
    const char *kind = "SandboxClaim", *ref = "sandboxclaim.extensions.agents.x-k8s.io";
    int r = asb_lifecycle_extend(cl, kind, cli_namespace(), name, ttl, policy);
    if (r == ASB_ENOTFOUND) {
        kind = "Sandbox";
        ref = "sandbox.agents.x-k8s.io";
        r = asb_lifecycle_extend(cl, kind, cli_namespace(), name, ttl, policy);
    }
    if (r != ASB_OK)
        ret = cli_print_error(NULL);
    else
        printf("%s/%s extended by %lds\n", ref, name, ttl);
    asb_client_free(cl);
    return ret;
}
