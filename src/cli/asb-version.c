/* `asb version [--client] [-o json]`: kubectl's version: this client's version, then the
 * server's (its /version document; `asb serve` says which asb it is). */
#include <getopt.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void version_usage(FILE *f)
{
    fprintf(f, "Usage: asb version [--client] [-o json]\n\n"
               "Options:\n"
               "      --client        only the client's version (no server needed)\n"
               "  -o, --output json   print both as JSON\n"
               "  -h, --help          show this help\n" CLI_GLOBAL_HELP);
}

int asb_version_main(int argc, char **argv)
{
    static const struct option opts[] = {{"client", no_argument, NULL, 'c'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    bool client_only = false, json = false;
    int c;
    while ((c = getopt_long(argc, argv, "o:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'c':
            client_only = true;
            break;
        case 'o':
            if (strcmp(optarg, "json") != 0) {
                fprintf(stderr, "error: --output must be 'json'\n");
                return 2;
            }
            json = true;
            break;
        default:
            return cli_usage_option(c, argv, version_usage);
        }
    }
    if (optind < argc)
        return main_usage_error(version_usage);
    json_t *server = NULL;
    int ret = 0;
    if (!client_only) {
        asb_client *cl = NULL;
        if ((ret = cli_client(&cl)))
            return ret;
        _cleanup_free_ char *s = NULL;
        if (asb_server_version(&s, cl) != ASB_OK)
            ret = cli_print_error(NULL);
        else
            server = json_loads(s, 0, NULL);
        asb_client_free(cl);
    }
    const char *sv = json_string_value(json_object_get(server, "asbVersion"));
    if (!sv)
        sv = json_string_value(json_object_get(server, "gitVersion"));
    if (json) {
        json_t *out = json_pack("{s:{s:s}}", "clientVersion", "asbVersion", asb_version());
        if (out && server)
            json_object_set(out, "serverVersion", server);
        _cleanup_free_ char *text = out ? json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(out);
        if (!text) {
            json_decref(server);
            return 1;
        }
        printf("%s\n", text);
    } else {
        printf("Client Version: v%s\n", asb_version());
        if (sv)
            printf("Server Version: %s%s\n", sv[0] == 'v' ? "" : "v", sv);
    }
    json_decref(server);
    return ret;
}
