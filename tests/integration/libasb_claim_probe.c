/* Test driver for tests/integration/test_libasb_claims.py: libasb's claim client against a real
 * `asb serve` (found through ASB_STATE_DIR). Prints `key value` lines; exits 0 unless a step
 * that must succeed failed.
 *   probe create POOL TIMEOUT_MS FLAGS     FLAGS: letters, any order:
 *       c close at the end (else disconnect), x run `echo` through the handle, f write and
 *       read a file through it,
 *       n no_connect, r data plane through the router, t ttl 3600 s, e ttl 1 s, a auto_cleanup
 *   probe attach NAME TIMEOUT_MS FLAGS     same flags (t, a ignored)
 *   probe extend KIND NAME TTL             asb_lifecycle_extend
 *   probe burst POOL N                     N threads, each with its own client, claim at once
 *                                          (auto_cleanup, no_connect); prints `got SANDBOX`
 *                                          lines, then closes every claim
 *   probe hold POOL                        claim with auto_cleanup + the signal handler, print
 *                                          the claim, then wait for a signal */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <asb/asb.h>

static int fail(const char *what, int r)
{
    const asb_error *e = asb_error_last();
    printf("error %s %d %s | %s | %s\n", what, r, asb_strerror(r), e ? e->reason : "",
           e ? e->message : "");
    fflush(stdout);
    return r;
}

static int use(asb_claim *cl, asb_client *c, const char *flags)
{
    printf("claim %s\nsandbox %s\nready_usec %lld\n", asb_claim_name(cl),
           asb_claim_sandbox_name(cl), asb_claim_ready_usec(cl));
    printf("has_handle %d\n", asb_claim_handle(cl) != NULL);
    if (strchr(flags, 'x')) {
        const char *argv[] = {"/bin/sh", "-c", "echo hello-$((6*7))", NULL};
        asb_sandbox_result *res = NULL;
        int r = asb_handle_execute(&res, asb_claim_handle(cl), argv, NULL);
        if (r != ASB_OK)
            return fail("exec", r);
        printf("exec %d %s", res->exit_code, res->out_data);
        asb_sandbox_result_free(res);
    }
    if (strchr(flags, 'f')) {
        int r = asb_handle_file_write(asb_claim_handle(cl), "probe.txt", 0, "via-handle", 10);
        if (r != ASB_OK)
            return fail("write", r);
        char *buf = NULL;
        r = asb_sandbox_file_read_buffer(&buf, NULL, asb_claim_sandbox(cl), "probe.txt");
        if (r != ASB_OK)
            return fail("read", r);
        printf("read %s\n", buf);
        asb_free(buf);
    }
    if (strchr(flags, 'c')) {
        int r = asb_claim_close(cl, c);
        printf("close %d\n", r);
    } else {
        asb_claim_disconnect(cl);
        printf("disconnect\n");
    }
    return 0;
}

static void set_opts(asb_claim_options *o, const char *flags, const char *timeout)
{
    o->ready_timeout_ms = atol(timeout);
    o->no_connect = strchr(flags, 'n') != NULL;
    o->data_plane = strchr(flags, 'r') ? ASB_DATA_PLANE_ROUTER : ASB_DATA_PLANE_LOCAL;
    o->ttl_seconds = strchr(flags, 't') ? 3600 : strchr(flags, 'e') ? 1 : 0;
    o->auto_cleanup = strchr(flags, 'a') != NULL;
}

typedef struct burst_arg {
    const char *pool;
    pthread_barrier_t *barrier;
    asb_claim *claim;
    asb_client *client;
    int r;
} burst_arg;

static void *burst_one(void *p)
{
    burst_arg *a = p;
    a->r = asb_client_new(&a->client, NULL);
    pthread_barrier_wait(a->barrier);
    if (a->r == ASB_OK) {
        asb_claim_options o = ASB_CLAIM_OPTIONS_INIT;
        o.no_connect = 1;
        o.auto_cleanup = 1;
        o.ready_timeout_ms = 30000;
        a->r = asb_claim_create(&a->claim, a->client, NULL, a->pool, &o);
        if (a->r != ASB_OK)
            fail("burst-create", a->r);
    }
    return NULL;
}

static int burst(const char *pool, int n)
{
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, (unsigned)n);
    burst_arg *a = calloc((size_t)n, sizeof(*a));
    pthread_t *t = calloc((size_t)n, sizeof(*t));
    int failed = 0;
    for (int i = 0; i < n; i++) {
        a[i].pool = pool;
        a[i].barrier = &b;
        pthread_create(&t[i], NULL, burst_one, &a[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++) {
        if (a[i].r == ASB_OK)
            printf("got %s\n", asb_claim_sandbox_name(a[i].claim));
        else
            failed++;
    }
    /* Half closed one by one, the rest by the cleanup registry. */
    for (int i = 0; i < n / 2; i++)
        if (a[i].claim && asb_claim_close(a[i].claim, a[i].client) != ASB_OK)
            failed++;
    printf("cleanup_failed %d\n", asb_claims_cleanup_run());
    for (int i = n / 2; i < n; i++)
        asb_claim_disconnect(a[i].claim); /* already deleted: frees only */
    for (int i = 0; i < n; i++)
        asb_client_free(a[i].client);
    pthread_barrier_destroy(&b);
    free(a);
    free(t);
    return failed;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3)
        return 2;
    asb_client *c = NULL;
    int r = asb_client_new(&c, NULL);
    if (r != ASB_OK)
        return fail("client", r);
    asb_claim *cl = NULL;
    asb_claim_options o = ASB_CLAIM_OPTIONS_INIT;
    int ret = 0;
    if (strcmp(argv[1], "create") == 0 && argc == 5) {
        set_opts(&o, argv[4], argv[3]);
        r = asb_claim_create(&cl, c, NULL, argv[2], &o);
        ret = r != ASB_OK ? fail("create", r) : use(cl, c, argv[4]);
    } else if (strcmp(argv[1], "attach") == 0 && argc == 5) {
        set_opts(&o, argv[4], argv[3]);
        r = asb_claim_attach(&cl, c, NULL, argv[2], &o);
        ret = r != ASB_OK ? fail("attach", r) : use(cl, c, argv[4]);
    } else if (strcmp(argv[1], "extend") == 0 && argc == 5) {
        r = asb_lifecycle_extend(c, argv[2], NULL, argv[3], atol(argv[4]), NULL);
        printf("extend %d\n", r);
        ret = r != ASB_OK ? fail("extend", r) : 0;
    } else if (strcmp(argv[1], "burst") == 0 && argc == 4) {
        ret = burst(argv[2], atoi(argv[3]));
    } else if (strcmp(argv[1], "hold") == 0) {
        if (asb_claims_cleanup_install() != ASB_OK)
            return fail("install", ASB_ERROR);
        o.auto_cleanup = 1;
        o.no_connect = 1;
        r = asb_claim_create(&cl, c, NULL, argv[2], &o);
        if (r != ASB_OK)
            return fail("create", r);
        printf("claim %s\n", asb_claim_name(cl));
        for (;;)
            pause(); /* the cleanup thread deletes the claim and re-raises the signal */
    } else {
        return 2;
    }
    asb_client_free(c);
    return ret < 0 ? 1 : ret;
}
