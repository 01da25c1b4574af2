/* Test driver for tests/integration/test_libasb_sandbox.py: drives libasb's sandbox client
 * against a real sandboxd on unix sockets and prints one line per result.
 *   libasb_sandbox_probe REST GRPC files        write/read/list/exists/delete + errors
 *   libasb_sandbox_probe REST GRPC big MIB      stream a MIB MiB file in and out
 *   libasb_sandbox_probe REST GRPC procs        execute, start, stdin, signal, pty, errors
 *   libasb_sandbox_probe REST GRPC down         retries against a dead socket
 *   libasb_sandbox_probe - - byname NAME        asb_sandbox_open through the control plane */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <asb/asb.h>

static void report(const char *what, int r)
{
    const asb_error *e = asb_error_last();
    printf("%s %d %s", what, r, asb_strerror(r));
    if (r != ASB_OK && e)
        printf(" | %s | %d | %s", e->reason, e->http_status, e->message);
    printf("\n");
    fflush(stdout);
}

static int files(asb_sandbox *s)
{
    const char *text = "hello, sandbox\n";
    report("write", asb_sandbox_file_write_buffer(s, "dir/sub/a b.txt", 0600, text, strlen(text)));
    char *buf = NULL;
    size_t len = 0;
    int r = asb_sandbox_file_read_buffer(&buf, &len, s, "dir/sub/a b.txt");
    report("read", r);
    if (r == ASB_OK)
        printf("content %zu %s", len, buf);
    asb_free(buf);
    report("write2", asb_sandbox_file_write_buffer(s, "dir/x.bin", 0, "", 0));
    asb_sandbox_file_entry *e = NULL;
    size_t n = 0;
    r = asb_sandbox_file_list(&e, &n, s, "dir");
    report("list", r);
    for (size_t i = 0; i < n; i++)
        printf("entry %s %lld %s %04o %d\n", e[i].name, (long long)e[i].size,
               e[i].type == ASB_SANDBOX_DIRECTORY ? "directory" : "file", e[i].mode,
               e[i].modified_at > time(NULL) - 3600 && e[i].modified_at <= time(NULL) + 5);
    asb_sandbox_file_entries_free(e, n);
    r = asb_sandbox_file_list(&e, &n, s, "/dir/sub/");
    report("list2", r);
    for (size_t i = 0; i < n; i++)
        printf("entry %s %lld %04o\n", e[i].name, (long long)e[i].size, e[i].mode);
    asb_sandbox_file_entries_free(e, n);
    r = asb_sandbox_file_list(&e, &n, s, "dir/x.bin");
    report("list-file", r);
    int ex = -1;
    report("exists", asb_sandbox_file_exists(&ex, s, "dir/sub/a b.txt"));
    printf("exists= %d\n", ex);
    report("exists-missing", asb_sandbox_file_exists(&ex, s, "nope"));
    printf("exists= %d\n", ex);
    report("read-missing", asb_sandbox_file_read_buffer(&buf, &len, s, "missing.txt"));
    report("read-escape", asb_sandbox_file_read_buffer(&buf, &len, s, "../../etc/passwd"));
    report("read-dotdot", asb_sandbox_file_read_buffer(&buf, &len, s, ".."));
    report("delete-nonempty", asb_sandbox_file_delete(s, "dir", 0));
    report("delete-file", asb_sandbox_file_delete(s, "dir/x.bin", 0));
    report("delete-missing", asb_sandbox_file_delete(s, "dir/x.bin", 0));
    report("delete-recursive", asb_sandbox_file_delete(s, "dir", 1));
    report("exists-after", asb_sandbox_file_exists(&ex, s, "dir"));
    printf("exists= %d\n", ex);
    report("write-dir", asb_sandbox_file_write_buffer(s, "", 0644, "x", 1));
    report("write-mode", asb_sandbox_file_write_buffer(s, "m", 01777, "x", 1));
    return 0;
}

typedef struct gen {
    unsigned long long left, total;
    unsigned int x;
} gen;

static long gen_source(char *buf, size_t size, void *payload)
{
    gen *g = payload;
    size_t n = size < g->left ? size : (size_t)g->left;
    for (size_t i = 0; i < n; i++) {
        g->x = g->x * 1103515245u + 12345u;
        buf[i] = (char)(g->x >> 16);
    }
    g->left -= n;
    return (long)n;
}

typedef struct check {
    unsigned long long got;
    unsigned int x;
    int bad;
} check;

static int check_sink(const char *data, size_t len, void *payload)
{
    check *c = payload;
    for (size_t i = 0; i < len; i++) {
        c->x = c->x * 1103515245u + 12345u;
        if (data[i] != (char)(c->x >> 16))
            c->bad = 1;
    }
    c->got += len;
    return 0;
}

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static int big(asb_sandbox *s, unsigned long long mib)
{
    long before = maxrss_kib();
    gen g = {mib << 20, mib << 20, 42};
    report("bigwrite", asb_sandbox_file_write(s, "big.bin", 0644, gen_source, &g));
    check c = {0, 42, 0};
    report("bigread", asb_sandbox_file_read(s, "big.bin", check_sink, &c));
    printf("bigsize %llu ok %d\n", c.got, !c.bad && c.got == (mib << 20));
    printf("rss-growth-kib %ld\n", maxrss_kib() - before);
    return 0;
}

/* ---- processes ---- */

typedef struct stream {
    asb_sandbox *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pid;
    char out[65536];
    size_t out_len;
    char err[4096];
    size_t err_len;
    int exit_code, exits;
    int stop_after_init;
} stream;

static int st_init(int pid, void *p)
{
    stream *st = p;
    pthread_mutex_lock(&st->mu);
    st->pid = pid;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return st->stop_after_init ? 77 : 0;
}

static int st_out(const char *d, size_t n, void *p)
{
    stream *st = p;
    pthread_mutex_lock(&st->mu);
    if (st->out_len + n < sizeof(st->out)) {
        memcpy(st->out + st->out_len, d, n);
        st->out_len += n;
    }
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return 0;
}

static int st_err(const char *d, size_t n, void *p)
{
    stream *st = p;
    if (st->err_len + n < sizeof(st->err)) {
        memcpy(st->err + st->err_len, d, n);
        st->err_len += n;
    }
    return 0;
}

static int st_exit(int code, void *p)
{
    stream *st = p;
    st->exit_code = code;
    st->exits++;
    return 0;
}

static int wait_pid(stream *st)
{
    pthread_mutex_lock(&st->mu);
    while (st->pid == 0)
        pthread_cond_wait(&st->cv, &st->mu);
    int pid = st->pid;
    pthread_mutex_unlock(&st->mu);
    return pid;
}

static void wait_output(stream *st, const char *needle)
{
    pthread_mutex_lock(&st->mu);
    for (;;) {
        st->out[st->out_len] = '\0';
        if (strstr(st->out, needle))
            break;
        pthread_cond_wait(&st->cv, &st->mu);
    }
    pthread_mutex_unlock(&st->mu);
}

static void *feeder(void *p)
{
    stream *st = p;
    int pid = wait_pid(st);
    report("stdin", asb_sandbox_write_stdin(st->s, pid, "piped-", 6, 0));
    report("stdin-eof", asb_sandbox_write_stdin(st->s, pid, "through", 7, 1));
    return NULL;
}

static void *killer(void *p)
{
    stream *st = p;
    int pid = wait_pid(st);
    wait_output(st, "started");
    report("signal-bad", asb_sandbox_signal(st->s, pid, 1));
    report("resize-nopty", asb_sandbox_resize(st->s, pid, 10, 10));
    report("signal", asb_sandbox_signal(st->s, pid, SIGTERM));
    return NULL;
}

static void *resizer(void *p)
{
    stream *st = p;
    int pid = wait_pid(st);
    wait_output(st, "first");
    report("resize", asb_sandbox_resize(st->s, pid, 100, 40));
    report("stdin-pty", asb_sandbox_write_stdin(st->s, pid, "go\n", 3, 0));
    return NULL;
}

static void run_stream(asb_sandbox *s, const char *name, const char *const *argv,
                       asb_sandbox_process_options *o, void *(*helper)(void *), int stop)
{
    stream *st = calloc(1, sizeof(*st));
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    st->s = s;
    st->stop_after_init = stop;
    asb_sandbox_callbacks cb = ASB_SANDBOX_CALLBACKS_INIT;
    cb.init_cb = st_init;
    cb.stdout_cb = st_out;
    cb.stderr_cb = st_err;
    cb.exit_cb = st_exit;
    cb.payload = st;
    pthread_t t;
    if (helper)
        pthread_create(&t, NULL, helper, st);
    int code = -99;
    int r = asb_sandbox_start(&code, s, argv, o, &cb);
    if (helper)
        pthread_join(t, NULL);
    report(name, r);
    st->out[st->out_len] = '\0';
    st->err[st->err_len] = '\0';
    char *o1 = st->out;
    for (char *q = o1; *q; q++)
        if (*q == '\n' || *q == '\r')
            *q = '|';
    printf("%s-result pid>0:%d exit %d exits %d out [%s] err [%s]\n", name, st->pid > 0, code,
           st->exits, st->out, st->err);
    fflush(stdout);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st);
}

static int procs(asb_sandbox *s)
{
    asb_sandbox_result *res = NULL;
    const char *const ex3[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    int r = asb_sandbox_execute(&res, s, ex3, NULL);
    report("execute", r);
    if (r == ASB_OK)
        printf("execute-result %d [%s] [%s]\n", res->exit_code, res->out_data, res->err_data);
    asb_sandbox_result_free(res);

    asb_sandbox_process_options o = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    const char *env[] = {"SANDBOX_TEST_VAR=sentinel", NULL};
    o.env = env;
    o.cwd = "sub";
    const char *const ex_env[] = {"sh", "-c", "printf %s \"$SANDBOX_TEST_VAR\"; pwd", NULL};
    r = asb_sandbox_execute(&res, s, ex_env, &o);
    report("execute-env", r);
    if (r == ASB_OK)
        printf("execute-env-result %d [%s]\n", res->exit_code, res->out_data);
    asb_sandbox_result_free(res);

    asb_sandbox_process_options esc = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    esc.cwd = "../..";
    const char *const echo[] = {"echo", "hi", NULL};
    report("execute-escape", asb_sandbox_execute(&res, s, echo, &esc));
    const char *const nocmd[] = {"no-such-command-xyz", NULL};
    report("execute-notfound", asb_sandbox_execute(&res, s, nocmd, NULL));
    asb_sandbox_process_options tmo = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    tmo.timeout_ms = 300;
    const char *const slp[] = {"sleep", "5", NULL};
    report("execute-timeout", asb_sandbox_execute(&res, s, slp, &tmo));

    const char *const streamed[] = {"sh", "-c", "echo one; echo two >&2; echo three", NULL};
    run_stream(s, "start", streamed, NULL, NULL, 0);
    const char *const cat[] = {"cat", NULL};
    run_stream(s, "stdin", cat, NULL, feeder, 0);
    const char *const sleeper[] = {"sh", "-c", "echo started; exec sleep 30", NULL};
    run_stream(s, "signal", sleeper, NULL, killer, 0);
    asb_sandbox_process_options pty = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    pty.pty = 1;
    pty.pty_cols = 80;
    pty.pty_rows = 24;
    const char *const stty[] = {"sh", "-c", "stty size; echo first; read x; stty size", NULL};
    run_stream(s, "pty", stty, &pty, resizer, 0);
    run_stream(s, "cancel", sleeper, NULL, NULL, 1);
    /* close_stdin: the EOF goes out on the Start's connection; `read` sees it at once. */
    asb_sandbox_process_options closed = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    closed.close_stdin = 1;
    closed.timeout_ms = 10000;
    const char *const reader[] = {"sh", "-c", "read x || echo eof", NULL};
    run_stream(s, "closed", reader, &closed, NULL, 0);
    /* Version-1 options have no close_stdin: the field is not read, stdin stays open. */
    asb_sandbox_process_options v1 = closed;
    v1.version = 1;
    v1.timeout_ms = 500;
    run_stream(s, "closed-v1", reader, &v1, NULL, 0);

    report("stdin-unknown", asb_sandbox_write_stdin(s, 999999, "x", 1, 0));
    report("signal-unknown", asb_sandbox_signal(s, 999999, SIGTERM));
    report("resize-unknown", asb_sandbox_resize(s, 999999, 1, 1));
    const char *const empty[] = {NULL};
    report("execute-empty", asb_sandbox_execute(&res, s, empty, NULL));
    return 0;
}

static int down(asb_sandbox *s)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int ex;
    report("exists-down", asb_sandbox_file_exists(&ex, s, "x"));
    clock_gettime(CLOCK_MONOTONIC, &b);
    long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    printf("elapsed-ms %ld\n", ms);
    asb_sandbox_result *res = NULL;
    const char *const echo[] = {"echo", "hi", NULL};
    report("execute-down", asb_sandbox_execute(&res, s, echo, NULL));
    return 0;
}

static int byname(const char *name)
{
    asb_client *c = NULL;
    int r = asb_client_new(&c, NULL);
    report("client", r);
    if (r != ASB_OK)
        return 1;
    asb_sandbox *s = NULL;
    r = asb_sandbox_open(&s, c, NULL, name, NULL);
    report("open", r);
    if (r == ASB_OK) {
        printf("rest %s\ngrpc %s\n", asb_sandbox_rest_socket(s), asb_sandbox_grpc_socket(s));
        asb_sandbox_result *res = NULL;
        const char *const echo[] = {"echo", "by-name", NULL};
        r = asb_sandbox_execute(&res, s, echo, NULL);
        report("execute", r);
        if (r == ASB_OK)
            printf("out %s", res->out_data);
        asb_sandbox_result_free(res);
    }
    asb_sandbox_free(s);
    s = NULL;
    /* The same from an object already read. */
    char *text = NULL;
    if (asb_object_get(&text, c, "Sandbox", NULL, name) == ASB_OK) {
        r = asb_sandbox_open_object(&s, c, NULL, text, NULL);
        report("open-object", r);
        if (r == ASB_OK)
            printf("object-grpc %s\n", asb_sandbox_grpc_socket(s));
        asb_sandbox_free(s);
        s = NULL;
        asb_free(text);
    }
    report("open-object-notjson", asb_sandbox_open_object(&s, c, NULL, "{not json", NULL));
    report("open-object-noname", asb_sandbox_open_object(&s, c, NULL, "{\"metadata\":{}}", NULL));
    asb_client_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    if (strcmp(argv[3], "byname") == 0)
        return byname(argc > 4 ? argv[4] : "");
    asb_sandbox_options o = ASB_SANDBOX_OPTIONS_INIT;
    if (strcmp(argv[3], "down") == 0) {
        o.max_attempts = 3;
        o.retry_delay_ms = 100;
    }
    asb_sandbox *s = NULL;
    int r = asb_sandbox_open_sockets(&s, argv[1], argv[2], &o);
    report("open", r);
    if (r != ASB_OK)
        return 1;
    if (strcmp(argv[3], "files") == 0)
        files(s);
    else if (strcmp(argv[3], "big") == 0)
        big(s, argc > 4 ? strtoull(argv[4], NULL, 10) : 64);
    else if (strcmp(argv[3], "procs") == 0)
        procs(s);
    else if (strcmp(argv[3], "down") == 0)
        down(s);
    asb_sandbox_free(s);
    return 0;
}
