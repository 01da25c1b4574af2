/* `asb snapshot create|ls|rm` and `asb fork` (docs/cli.md, docs/snapshots.md): SandboxSnapshots
 * through libasb (include/asb/snapshot.h). Names go to stdout one per line, like `asb claim`,
 * so `snap=$(asb snapshot create sbx --wait)` and `for s in $(asb fork sbx --count 3)` work. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asb/snapshot.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void snapshot_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb snapshot create SANDBOX [--name NAME] [--wait] [--timeout DURATION]\n"
            "       asb snapshot ls [asb get options]\n"
            "       asb snapshot rm NAME...\n\n"
            "Capture a sandbox's workspace and volumes as a SandboxSnapshot (the sandbox keeps\n"
            "running; it is paused only for the consistent part of the capture). create prints\n"
            "the snapshot name; start sandboxes from it with image snapshot:NAME or `asb fork`.\n\n"
            "Options of create:\n"
            "      --name NAME          snapshot name (default: generated SANDBOX-snap-xxxxx)\n"
            "  -w, --wait               wait until it is Ready (captured)\n"
            "      --timeout DURATION   how long --wait waits (default 180s)\n"
            "  -h, --help               show this help\n" CLI_GLOBAL_HELP);
}

static void fork_usage(FILE *f)
{
    fprintf(f, "Usage: asb fork SANDBOX [--count K] [--name NAME] [--timeout DURATION]\n"
               "       asb fork --from-snapshot SNAPSHOT [--count K] [--name NAME]\n\n"
               "Snapshot SANDBOX and start K new sandboxes from it (each with its own copy of the\n"
               "workspace and volumes); print their names, one per line, once all are Ready.\n\n"
               "Options:\n"
               "  -c, --count K            how many sandboxes (default 1)\n"
               "      --name NAME          their name (K = 1) or prefix: NAME-1 .. NAME-K\n"
               "                           (default: generated SANDBOX-fork-xxxxx)\n"
               "      --from-snapshot S    fork from the existing SandboxSnapshot S\n"
               "      --timeout DURATION   how long to wait for Ready (default 180s)\n"
               "  -h, --help               show this help\n" CLI_GLOBAL_HELP);
}

/* What a Ready snapshot holds, for a person (stderr). */
static void report(const char *text)
{
    json_t *o = json_loads(text, 0, NULL), *st = json_object_get(o, "status");
    if (json_object_get(st, "files"))
        fprintf(stderr,
                "snapshot %s: %lld entries, %lld bytes, %lld bytes newly stored, sandbox paused "
                "%.1f ms\n",
                json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                (long long)json_integer_value(json_object_get(st, "files")),
                (long long)json_integer_value(json_object_get(st, "size")),
                (long long)json_integer_value(json_object_get(st, "storedBytes")),
                (double)json_integer_value(json_object_get(st, "pauseMicroseconds")) / 1000.0);
    json_decref(o);
}

static int snapshot_create(int argc, char **argv)
{
    enum { OPT_NAME = 0x2001, OPT_TIMEOUT };
    static const struct option opts[] = {{"name", required_argument, NULL, OPT_NAME},
                                         {"wait", no_argument, NULL, 'w'},
                                         {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    asb_snapshot_options so = ASB_SNAPSHOT_OPTIONS_INIT;
    long timeout = 180000;
    bool wait = false;
    int c;
    while ((c = getopt_long(argc, argv, "wh" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == OPT_NAME)
            so.name = optarg;
        else if (c == 'w')
            wait = true;
        else if (c == OPT_TIMEOUT) {
            if ((timeout = (long)cli_positive_duration_arg(optarg)) <= 0)
                return 2;
        } else
            return cli_usage_option(c, argv, snapshot_usage);
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "error: expected one sandbox: asb snapshot create SANDBOX\n");
        return main_usage_error(snapshot_usage);
    }
    so.wait_ms = wait ? timeout : 0;
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    char *text = NULL;
    if (asb_snapshot_create(&text, cl, cli_namespace(), argv[optind], &so) != ASB_OK)
        ret = cli_print_error(NULL);
    else {
        json_t *o = json_loads(text, 0, NULL);
        printf("%s\n", json_string_value(json_object_get(json_object_get(o, "metadata"), "name")));
        fflush(stdout);
        json_decref(o);
        report(text);
    }
    asb_free(text);
    asb_client_free(cl);
    return ret;
}

static int snapshot_rm(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, CLI_GLOBAL_LONG, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1)
        if (!cli_global_option(c, optarg))
            return cli_usage_option(c, argv, snapshot_usage);
    if (optind >= argc) {
        fprintf(stderr, "error: expected snapshot names: asb snapshot rm NAME...\n");
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    for (int i = optind; i < argc; i++) {
        if (asb_snapshot_delete(cl, cli_namespace(), argv[i]) != ASB_OK)
            ret |= cli_print_error(NULL);
        else
            printf("sandboxsnapshot.extensions.agents.x-k8s.io \"%s\" deleted\n", argv[i]);
    }
    asb_client_free(cl);
    return ret;
}

int asb_snapshot_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        snapshot_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "create") == 0)
        return snapshot_create(argc - 1, argv + 1);
    if (strcmp(sub, "rm") == 0 || strcmp(sub, "delete") == 0)
        return snapshot_rm(argc - 1, argv + 1);
    if (strcmp(sub, "ls") == 0 || strcmp(sub, "list") == 0) {
        /* `asb get sandboxsnapshots` with the same options: the kind's printer columns. */
        char **v = calloc((size_t)argc + 1, sizeof(char *));
        if (!v)
            return 1;
        v[0] = "get";
        v[1] = "sandboxsnapshots";
        for (int i = 2; i < argc; i++)
            v[i] = argv[i];
        int r = asb_get(argc, v);
        free(v);
        return r;
    }
    fprintf(stderr, "error: unknown subcommand \"%s\" (create, ls, rm)\n", sub);
    return main_usage_error(snapshot_usage);
}

int asb_fork_main(int argc, char **argv)
{
    enum { OPT_NAME = 0x2001, OPT_TIMEOUT, OPT_FROM };
    static const struct option opts[] = {{"count", required_argument, NULL, 'c'},
                                         {"name", required_argument, NULL, OPT_NAME},
                                         {"from-snapshot", required_argument, NULL, OPT_FROM},
                                         {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    asb_fork_options fo = ASB_FORK_OPTIONS_INIT;
    int c;
    while ((c = getopt_long(argc, argv, "c:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == 'c') {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 1000) {
                fprintf(stderr, "error: --count wants a number from 1 to 1000, not \"%s\"\n",
                        optarg);
                return 2;
            }
            fo.count = (unsigned)n;
        } else if (c == OPT_NAME)
            fo.name = optarg;
        else if (c == OPT_FROM)
            fo.snapshot = optarg;
        else if (c == OPT_TIMEOUT) {
            if ((fo.ready_timeout_ms = (long)cli_positive_duration_arg(optarg)) <= 0)
                return 2;
        } else
            return cli_usage_option(c, argv, fork_usage);
    }
    const char *sandbox = optind < argc ? argv[optind] : NULL;
    if (optind + (fo.snapshot ? 0 : 1) < argc || (!sandbox && !fo.snapshot)) {
        fprintf(stderr, "error: %s\n",
                sandbox || fo.snapshot ? "unexpected arguments"
                                       : "expected a sandbox: asb fork SANDBOX");
        return main_usage_error(fork_usage);
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    char **names = NULL;
    size_t n = 0;
    if (asb_fork(&names, &n, cl, cli_namespace(), sandbox, &fo) != ASB_OK)
        ret = cli_print_error(NULL);
    for (size_t i = 0; i < n; i++) {
        printf("%s\n", names[i]);
        asb_free(names[i]);
    }
    asb_free(names);
    asb_client_free(cl);
    return ret;
}
