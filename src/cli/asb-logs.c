/* `asb logs NAME [-f]`: the output of the sandbox's main process (the container `command`, run
 * by sandboxd; docs/local-sandboxes.md), through asb_sandbox_logs(). NAME is a sandbox or a
 * claim. -f follows until the main process has finished or the sandbox is deleted. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    while (len) {
        ssize_t n = write(STDOUT_FILENO, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 1; /* stdout closed (e.g. `| head`): stop quietly */
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

int asb_logs(int argc, char **argv)
{
    static const struct option opts[] = {
        {"follow", no_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'}, CLI_GLOBAL_LONG, {0}};
    int c, follow = 0;
    while ((c = getopt_long(argc, argv, "fh" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == 'f') {
            follow = 1;
            continue;
        }
        if (c != 'h')
            return cli_usage_option(c, argv, NULL);
        FILE *f = c == 'h' ? stdout : stderr;
        fprintf(f, "Usage: asb logs NAME [-f]\n\nPrint the output (stdout and stderr) of the main "
                   "process of the sandbox NAME (or of the sandbox of the claim NAME).\n\n"
                   "Options:\n"
                   "  -f, --follow    keep printing new output until the main process has finished "
                   "or the sandbox is deleted\n"
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
    if (ret) {
        asb_client_free(cl);
        return ret;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    asb_sandbox_logs_options lo = ASB_SANDBOX_LOGS_OPTIONS_INIT;
    lo.follow = follow;
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
