/* `asb preview NAME PORT [--ttl DURATION]`: prints a URL a person opens in a browser to reach the
 * server on PORT inside the sandbox NAME (or the sandbox of the claim NAME), signed by the router
 * (asb_preview_url, docs/router.md "Preview hosts"). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"

static void preview_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb preview NAME PORT [--ttl DURATION]\n\n"
            "Print a browser URL for the server on PORT inside the sandbox NAME (or the sandbox\n"
            "of the claim NAME): http://PORT-NAME.NAMESPACE.localhost:ROUTERPORT/?asb-preview=...\n"
            "The link admits that port of that sandbox only, until it expires.\n\n"
            "Options:\n"
            "      --ttl DURATION  how long the link is valid (default 24h)\n"
            "  -h, --help          show this help\n" CLI_GLOBAL_HELP);
}

int asb_preview(int argc, char **argv)
{
    enum { OPT_TTL = 1000 };
    static const struct option opts[] = {{"ttl", required_argument, NULL, OPT_TTL},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    long long ttl_ms = 24LL * 3600 * 1000;
    int c;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == OPT_TTL) {
            if ((ttl_ms = cli_positive_duration_arg(optarg)) < 0)
                return 2;
            continue;
        }
        return cli_usage_option(c, argv, preview_usage);
    }
    if (argc - optind != 2 || !*argv[optind]) {
        fprintf(stderr, "error: expected a sandbox name and a port: asb preview NAME PORT\n");
        return 2;
    }
    char *end;
    long port = strtol(argv[optind + 1], &end, 10);
    if (*end || end == argv[optind + 1] || port < 1 || port > 65535) {
        fprintf(stderr, "error: invalid port \"%s\": want 1-65535\n", argv[optind + 1]);
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    _cleanup_free_ char *sn = NULL;
    char *url = NULL;
    ret = cli_sandbox_resolve(cl, argv[optind], &sn, NULL);
    if (!ret) {
        long secs = (long)((ttl_ms + 999) / 1000);
        if (asb_preview_url(&url, cl, cli_namespace(), sn, (unsigned)port, secs) != ASB_OK)
            ret = cli_print_error(NULL);
        else
            printf("%s\n", url);
    }
    asb_free(url);
    asb_client_free(cl);
    return ret;
}
