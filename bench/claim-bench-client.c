/* Timing client for bench/bench-claim-exec.py, on libasb (what an agent would use). Prints one
 * latency in microseconds per line on stdout.
 *   claim-bench-client seq POOL N      N sequential claims: wait (untimed) until the pool has
 *                                      $BENCH_POOL_FULL (1) Ready members and $BENCH_SETTLE_MS
 *                                      more, then time claim -> first Execute(`true`) result
 *                                      (second column: claim -> Ready alone; third: the spawn
 *                                      floor, posix_spawn + waitpid of /bin/true, right after;
 *                                      fourth and fifth with BENCH_IDLE_FLOOR=1, else -1: see
 *                                      there); close (untimed)
 *   claim-bench-client burst POOL N    N threads claim at once (each: claim -> first result;
 *                                      third column: claim -> Ready alone); the claims are
 *                                      closed once all are timed
 * BENCH_EXEC=0: no Execute, the time is claim -> Ready (what bench-claims.py measures).
 * BENCH_ROUTER=1: the claims' data plane goes through the router instead of the sockets.
 *   claim-bench-client cold N          baseline: Sandbox create -> Ready (watch) -> first
 *                                      Execute result (second column: create -> Ready alone;
 *                                      third: the spawn floor right after); then delete it
 *                                      (untimed) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asb/asb.h>

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *const TRUE_ARGV[] = {"true", NULL};
extern char **environ;

/* The spawn floor issue 16's targets are stated against: posix_spawn + waitpid of /bin/true. */
static long long spawn_floor_us(void)
{
    char *argv[] = {"/bin/true", NULL};
    long long t0 = now_us();
    pid_t pid;
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
        return -1;
    waitpid(pid, NULL, 0);
    return now_us() - t0;
}

/* utime and stime (clock ticks) of /proc/PID/stat: fields 14 and 15, after the command's ')'. */
static int cpu_ticks(const char *path, unsigned long long *user, unsigned long long *sys)
{
    char buf[1024];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", user,
                       sys) == 2
               ? 0
               : -1;
}

/* A 4 KiB append and fdatasync of a file in $ASB_STATE_DIR (removed again): the disk's own time
 * for a durable write, beside the store's WAL. */
static long long sync_floor_us(void)
{
    const char *dir = getenv("ASB_STATE_DIR");
    char path[4096], buf[4096];
    snprintf(path, sizeof(path), "%s/bench-sync-floor", dir && *dir ? dir : "/tmp");
    memset(buf, 'x', sizeof(buf));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    long long t0 = now_us();
    bool ok = write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) && fdatasync(fd) == 0;
    long long us = now_us() - t0;
    close(fd);
    unlink(path);
    return ok ? us : -1;
}

static int die(const char *what, int r)
{
    const asb_error *e = asb_error_last();
    fprintf(stderr, "%s: %s: %s\n", what, asb_strerror(r), e ? e->message : "");
    exit(1);
}

static int first_exec(asb_sandbox *s)
{
    asb_sandbox_result *res = NULL;
    int r = asb_sandbox_execute(&res, s, TRUE_ARGV, NULL);
    if (r == ASB_OK && res->exit_code != 0)
        r = ASB_ERROR;
    asb_sandbox_result_free(res);
    return r;
}

/* Ready members of the pool right now: Sandboxes matching the pool's status.selector (the
 * warm-pool label goes in the same write as the adoption, so this never counts an adopted one)
 * with Ready=True. The pool's readyReplicas lags behind adoptions. */
static long pool_ready(asb_client *c, const char *pool)
{
    char *text = NULL;
    if (asb_object_get(&text, c, "SandboxWarmPool", NULL, pool) != ASB_OK)
        return -1;
    json_t *j = json_loads(text, 0, NULL);
    asb_free(text);
    const char *sel = json_string_value(json_object_get(json_object_get(j, "status"), "selector"));
    long n = 0;
    asb_list_options lo = ASB_LIST_OPTIONS_INIT;
    lo.label_selector = sel;
    if (sel && asb_object_list(&text, c, "Sandbox", NULL, &lo) == ASB_OK) {
        json_t *l = json_loads(text, 0, NULL);
        asb_free(text);
        json_t *it;
        size_t i;
        json_array_foreach(json_object_get(l, "items"), i, it)
        {
            json_t *cs = json_object_get(json_object_get(it, "status"), "conditions"), *cd;
            size_t k;
            json_array_foreach(cs, k, cd)
            {
                if (strcmp(json_string_value(json_object_get(cd, "type")) ?: "", "Ready") == 0 &&
                    strcmp(json_string_value(json_object_get(cd, "status")) ?: "", "True") == 0)
                    n++;
            }
        }
        json_decref(l);
    }
    json_decref(j);
    return n;
}

static long long claim_once(asb_client *c, const char *pool, asb_claim **ret)
{
    long long t0 = now_us();
    asb_claim_options o = ASB_CLAIM_OPTIONS_INIT;
    o.ready_timeout_ms = 120000;
    if (getenv("BENCH_ROUTER") && *getenv("BENCH_ROUTER") == '1')
        o.data_plane = ASB_DATA_PLANE_ROUTER; /* $ASB_STATE_DIR/router */
    int r = asb_claim_create(ret, c, NULL, pool, &o);
    if (r != ASB_OK)
        die("claim", r);
    if (getenv("BENCH_EXEC") && strcmp(getenv("BENCH_EXEC"), "0") == 0)
        return now_us() - t0;
    r = first_exec(asb_claim_sandbox(*ret));
    if (r != ASB_OK)
        die("execute", r);
    return now_us() - t0;
}

typedef struct burst_arg {
    const char *pool;
    pthread_barrier_t *barrier;
    long long us;
    asb_claim *claim;
    asb_client *client;
} burst_arg;

static void *burst_one(void *p)
{
    burst_arg *a = p;
    if (asb_client_new(&a->client, NULL) != ASB_OK)
        die("client", ASB_ERROR);
    pthread_barrier_wait(a->barrier);
    a->us = claim_once(a->client, a->pool, &a->claim);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    asb_client *c = NULL;
    int r = asb_client_new(&c, NULL);
    if (r != ASB_OK)
        die("client", r);
    if (strcmp(argv[1], "seq") == 0 && argc == 4) {
        int n = atoi(argv[3]);
        long full = atol(getenv("BENCH_POOL_FULL") ?: "1");
        long settle_us = atol(getenv("BENCH_SETTLE_MS") ?: "0") * 1000;
        /* BENCH_IDLE_FLOOR=1: what the machine adds after the same idle spell, timed before each
         * claim (then the settle again): an Execute of a sandbox claimed at the start and used
         * since (the four wake-ups of an Execute, without a fresh sandboxd), and a 4 KiB append
         * + fdatasync in $ASB_STATE_DIR (the disk's part of a durable commit). */
        bool idle_floor = getenv("BENCH_IDLE_FLOOR") && strcmp(getenv("BENCH_IDLE_FLOOR"), "1") == 0;
        asb_claim *held = NULL;
        if (idle_floor)
            claim_once(c, argv[2], &held);
        for (int i = 0; i < n; i++) {
            /* Kept warm: the pool full again (and the server done with the last refill). */
            while (pool_ready(c, argv[2]) < full)
                usleep(5000);
            usleep(settle_us);
            long long idle_exec = -1, idle_sync = -1;
            if (held) {
                long long t0 = now_us();
                if ((r = first_exec(asb_claim_sandbox(held))) != ASB_OK)
                    die("execute (held)", r);
                idle_exec = now_us() - t0;
                idle_sync = sync_floor_us();
                usleep(settle_us);
            }
            asb_claim *cl = NULL;
            long long us = claim_once(c, argv[2], &cl);
            printf("%lld %lld %lld %lld %lld\n", us, asb_claim_ready_usec(cl), spawn_floor_us(),
                   idle_exec, idle_sync);
            fflush(stdout);
            if ((r = asb_claim_close(cl, c)) != ASB_OK)
                die("close", r);
        }
        if (held && (r = asb_claim_close(held, c)) != ASB_OK)
            die("close", r);
    } else if (strcmp(argv[1], "burst") == 0 && argc == 4) {
        int n = atoi(argv[3]);
        pthread_barrier_t b;
        pthread_barrier_init(&b, NULL, (unsigned)n);
        burst_arg *a = calloc((size_t)n, sizeof(*a));
        pthread_t *t = calloc((size_t)n, sizeof(*t));
        for (int i = 0; i < n; i++) {
            a[i].pool = argv[2];
            a[i].barrier = &b;
            pthread_create(&t[i], NULL, burst_one, &a[i]);
        }
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
        /* BENCH_TIMED_FILE: written once every claim is timed (before the closes): the CPU
         * ticks (user, system) of $BENCH_SERVER_PID and of this process, so a caller gets the
         * burst's own CPU without polling for the moment (its polling took CPU from the burst). */
        const char *mark = getenv("BENCH_TIMED_FILE"), *server = getenv("BENCH_SERVER_PID");
        FILE *mf = mark && *mark ? fopen(mark, "w") : NULL;
        if (mf) {
            char path[64];
            snprintf(path, sizeof(path), "/proc/%s/stat", server && *server ? server : "self");
            unsigned long long su = 0, ss = 0, cu = 0, cs = 0;
            int ok = cpu_ticks(path, &su, &ss) == 0 && cpu_ticks("/proc/self/stat", &cu, &cs) == 0;
            if (ok)
                fprintf(mf, "%llu %llu %llu %llu\n", su, ss, cu, cs);
            fclose(mf);
        }
        for (int i = 0; i < n; i++) {
            printf("%lld %s %lld\n", a[i].us, asb_claim_sandbox_name(a[i].claim),
                   asb_claim_ready_usec(a[i].claim));
            asb_claim_close(a[i].claim, c);
            asb_client_free(a[i].client);
        }
        free(a);
        free(t);
    } else if (strcmp(argv[1], "cold") == 0) {
        int n = atoi(argv[2]);
        for (int i = 0; i < n; i++) {
            char name[64], body[512];
            snprintf(name, sizeof(name), "bench-cold-%d-%d", (int)getpid(), i);
            snprintf(body, sizeof(body),
                     "{\"apiVersion\":\"agents.x-k8s.io/v1beta1\",\"kind\":\"Sandbox\","
                     "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"podTemplate\":{\"spec\":"
                     "{\"containers\":[{\"name\":\"main\",\"image\":\"host\"}]}}}}",
                     name);
            long long t0 = now_us();
            if ((r = asb_object_create(NULL, c, "Sandbox", NULL, body)) != ASB_OK)
                die("create", r);
            asb_wait_options wo = ASB_WAIT_OPTIONS_INIT;
            wo.timeout_ms = 60000;
            if ((r = asb_object_wait_condition(NULL, c, "Sandbox", NULL, name, "Ready", NULL,
                                               &wo)) != ASB_OK)
                die("wait", r);
            long long ready = now_us() - t0;
            asb_sandbox *s = NULL;
            if ((r = asb_sandbox_open(&s, c, NULL, name, NULL)) != ASB_OK)
                die("open", r);
            if ((r = first_exec(s)) != ASB_OK)
                die("execute", r);
            long long total = now_us() - t0;
            printf("%lld %lld %lld\n", total, ready, spawn_floor_us());
            fflush(stdout);
            asb_sandbox_free(s);
            asb_object_delete(NULL, c, "Sandbox", NULL, name);
            asb_object_wait_deleted(c, "Sandbox", NULL, name, &wo);
        }
    } else {
        return 2;
    }
    asb_client_free(c);
    return 0;
}
