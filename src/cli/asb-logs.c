/* `asb logs NAME [-f] [--tail N] [--since D] [--timestamps] [-c CONTAINER] [-p]`: the output of
 * the sandbox's main process (the container `command`, run by sandboxd;
 * docs/local-sandboxes.md), or sandboxd's own (-c sandboxd), through asb_sandbox_logs(). NAME is
 * a sandbox or a claim. -f follows until the main process has finished or the sandbox is
 * deleted. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/io-util.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"

static volatile int cancelled;

static void on_signal(int sig)
{
    (void)sig;
    cancelled = 1;
}

static int write_out(const char *data, size_t len, void *payload)
{
    (void)payload;
    /* stdout closed (e.g. `| head`): stop quietly */
    return loop_write(STDOUT_FILENO, data, len) < 0 ? 1 : 0;
}

static void logs_usage(FILE *f)
{
    fprintf(
        f, "Usage: asb logs NAME [-f] [--tail N] [--since DURATION] [--timestamps] [-c CONTAINER]\n"
           "                [-p]\n\n"
           "Print the output (stdout and stderr) of the main process of the sandbox NAME (or of "
           "the sandbox of the claim NAME).\n\n"
           "Options:\n"
           "  -f, --follow          keep printing new output until the main process has "
           "finished or the sandbox is deleted\n"
           "      --tail N          only the last N lines (-1: all)\n"
           "      --since DURATION  only lines written in the last DURATION (5s, 2m, 1h)\n"
           "      --timestamps      start each line with the time it was written (RFC 3339)\n"
           "  -c, --container NAME  the sandbox's container (its main process), or sandboxd for "
           "sandboxd's own output\n"
           "  -p, --previous        the output of the run before the container's last restart\n"
           "  -h, --help            show this help\n" CLI_GLOBAL_HELP);
}

/* The options into lo; -1 to go on, else the exit code. */
static int parse_logs_args(int argc, char **argv, asb_sandbox_logs_options *lo)
{
    enum { OPT_TAIL = 0x2001, OPT_SINCE, OPT_TIMESTAMPS };
    static const struct option opts[] = {{"follow", no_argument, NULL, 'f'},
                                         {"tail", required_argument, NULL, OPT_TAIL},
                                         {"since", required_argument, NULL, OPT_SINCE},
                                         {"timestamps", no_argument, NULL, OPT_TIMESTAMPS},
                                         {"container", required_argument, NULL, 'c'},
                                         {"previous", no_argument, NULL, 'p'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    int c;
    while ((c = getopt_long(argc, argv, "fc:ph" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        char *end = NULL;
        long long ms;
        switch (c) {
        case 'f':
            lo->follow = 1;
            break;
        case 'c':
            lo->container = optarg;
            break;
        case 'p':
            lo->previous = 1;
            break;
        case OPT_TIMESTAMPS:
            lo->timestamps = 1;
            break;
        case OPT_TAIL:
            errno = 0;
            lo->tail_lines = strtoll(optarg, &end, 10);
            if (errno || !*optarg || *end || lo->tail_lines < -1) {
                fprintf(stderr,
                        "error: invalid argument \"%s\" for \"--tail\" flag: a number of "
                        "lines (-1: all) is expected\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_SINCE:
            ms = cli_parse_timeout(optarg);
            if (ms <= 0) {
                fprintf(stderr,
                        "error: invalid argument \"%s\" for \"--since\" flag: a positive "
                        "duration (5s, 2m, 1h) is expected\n",
                        optarg);
                return 2;
            }
            lo->since_seconds = (ms + 999) / 1000;
            break;
        case 'h':
            logs_usage(stdout);
            return 0;
        default:
            return cli_usage_option(c, argv, NULL);
        }
    }
    if (argc - optind != 1 || !*argv[optind]) {
        fprintf(stderr, "error: expected one sandbox name: asb logs NAME\n");
        return 2;
    }
    return -1;
}

int asb_logs(int argc, char **argv)
{
    asb_sandbox_logs_options lo = ASB_SANDBOX_LOGS_OPTIONS_INIT;
    int ret = parse_logs_args(argc, argv, &lo);
    if (ret >= 0)
        return ret;
    asb_client *cl = NULL;
    ret = cli_client(&cl);
    if (ret)
        return ret;
    _cleanup_free_ char *sn = NULL;
    ret = cli_sandbox_resolve(cl, argv[optind], &sn, NULL);
    if (ret) {
        asb_client_free(cl);
        return ret;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    lo.cancel = &cancelled;
    int r = asb_sandbox_logs(cl, cli_namespace(), sn, &lo, write_out, NULL);
    asb_client_free(cl);
    if (r == ASB_OK || r == 1)
        return 0;
    if (r == ASB_ECANCELLED)
        return 130;
    const asb_error *e = asb_error_last();
    if (r == ASB_ENOTFOUND && e && e->reason &&
        (strcmp(e->reason, "NoMainProcess") == 0 || strcmp(e->reason, "NoLog") == 0)) {
        fprintf(stderr, "error: logs of sandbox \"%s\" are not available: %s\n", sn,
                strcmp(e->reason, "NoMainProcess") == 0
                    ? "its container has no command, so there is no main process (use `asb exec "
                      "NAME -- CMD`)"
                    : "its main process has not started yet (try again, or use -f)");
        return 1;
    }
    return cli_print_error(NULL);
}
