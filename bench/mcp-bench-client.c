/* Baseline client for bench/bench-mcp.py: the Execute that `asb mcp`'s execute_command makes,
 * straight through libasb. Prints one latency in microseconds per line on stdout.
 *   mcp-bench-client exec SANDBOX N   N times asb_sandbox_execute(sh -c true) on one handle
 *   mcp-bench-client open SANDBOX N   N times open the sandbox (control-plane GET) + the same
 *                                     Execute, as execute_command does per call
 * The control plane comes from $ASB_STATE_DIR as for every asb client. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <asb/asb.h>

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *const SH_TRUE[] = {"/bin/sh", "-c", "true", NULL};

static void die(const char *what, int r)
{
    const asb_error *e = asb_error_last();
    fprintf(stderr, "%s: %s: %s\n", what, asb_strerror(r), e ? e->message : "");
    exit(1);
}

static void execute(asb_sandbox *s)
{
    asb_sandbox_result *res = NULL;
    int r = asb_sandbox_execute(&res, s, SH_TRUE, NULL);
    if (r != ASB_OK || res->exit_code != 0)
        die("execute", r ? r : ASB_ERROR);
    asb_sandbox_result_free(res);
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "exec") != 0 && strcmp(argv[1], "open") != 0)) {
        fprintf(stderr, "usage: mcp-bench-client exec|open SANDBOX N\n");
        return 2;
    }
    bool reopen = strcmp(argv[1], "open") == 0;
    int n = atoi(argv[3]);
    asb_client *cl = NULL;
    int r = asb_client_new(&cl, NULL);
    if (r != ASB_OK)
        die("client", r);
    asb_sandbox *s = NULL;
    if (!reopen && (r = asb_sandbox_open(&s, cl, NULL, argv[2], NULL)) != ASB_OK)
        die("open", r);
    for (int i = 0; i < n; i++) {
        long long t = now_us();
        if (reopen && (r = asb_sandbox_open(&s, cl, NULL, argv[2], NULL)) != ASB_OK)
            die("open", r);
        execute(s);
        if (reopen) {
            asb_sandbox_free(s);
            s = NULL;
        }
        printf("%lld\n", now_us() - t);
    }
    asb_sandbox_free(s);
    asb_client_free(cl);
    return 0;
}
