/* sandboxd entry point: flags, root directory, both servers, and the shutdown sequence of
 * shared/spec/UPSTREAM.md §1.6, driven by a libuv loop on the main thread. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <uv.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-grpc-server.h"
#include "sandboxd/sandboxd-grpc.h"
#include "sandboxd/sandboxd-main-process.h"
#include "sandboxd/sandboxd-rest.h"
#include "sandboxd/sandboxd.h"
#include "shared/log.h"

#define SHUTDOWN_TICK_MS 20
#define PROCESS_GRACE_MAX (2 * USEC_PER_SEC)

typedef enum { RUNNING, PROCESS_GRACE, DRAINING } shutdown_phase;

typedef struct daemon_ctx {
    sandboxd sd;
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    uv_timer_t tick;
    rest_server *rest;
    grpc_server *grpc;
    shutdown_phase phase;
    usec_t shutdown_started;
} daemon_ctx;

/* mkdir -p with mode 0755 (umask applies), as Go's os.MkdirAll. */
static int mkdir_parents(const char *path)
{
    _cleanup_free_ char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return negative_errno();
        *s = c;
        if (c == '\0')
            break;
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return negative_errno();
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int sandboxd_open_root(sandboxd *sd, const sandboxd_config *cfg)
{
    int r = mkdir_parents(cfg->root_dir);
    if (r < 0) {
        fprintf(stderr, "root dir \"%s\": mkdir %s: %s\n", cfg->root_dir, cfg->root_dir, strerror(-r));
        return r;
    }
    sd->root_path = realpath(cfg->root_dir, NULL);
    if (!sd->root_path) {
        fprintf(stderr, "root dir \"%s\": %s\n", cfg->root_dir, strerror(errno));
        return negative_errno();
    }
    sd->root_fd = open(sd->root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (sd->root_fd < 0) {
        fprintf(stderr, "root dir \"%s\": %s\n", cfg->root_dir, strerror(errno));
        return negative_errno();
    }
    return 0;
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void finish_shutdown(daemon_ctx *d)
{
    d->rest = rest_server_free(d->rest);
    grpc_server_close(d->grpc);
    d->grpc = NULL;
    close_handle((uv_handle_t *)&d->tick);
    close_handle((uv_handle_t *)&d->sigterm);
    close_handle((uv_handle_t *)&d->sigint);
    /* Closing the libuv signal handles restores the default dispositions; a second signal
     * during the last moments of teardown must not kill the daemon with a signal status. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    log_info("sandboxd stopped");
}

static void on_shutdown_tick(uv_timer_t *t)
{
    daemon_ctx *d = t->data;
    usec_t elapsed = now_usec(CLOCK_MONOTONIC) - d->shutdown_started;
    usec_t timeout = d->sd.config->shutdown_timeout;

    if (d->phase == PROCESS_GRACE) {
        if (grpc_server_live_processes(d->grpc) > 0 && elapsed < MIN(PROCESS_GRACE_MAX, timeout))
            return;
        grpc_server_signal_processes(d->grpc, SIGKILL);
        rest_server_stop_accepting(d->rest);
        grpc_server_stop_accepting(d->grpc);
        d->phase = DRAINING;
    }
    bool drained = rest_server_active_requests(d->rest) == 0 && grpc_server_active_calls(d->grpc) == 0;
    if (drained || elapsed >= timeout) {
        if (!drained)
            log_warn("shutdown timeout reached; closing remaining connections");
        finish_shutdown(d);
    }
}

static void on_signal(uv_signal_t *h, int signum)
{
    daemon_ctx *d = h->data;
    if (d->phase != RUNNING)
        return;
    log_info("shutting down", "signal", strsignal(signum));
    atomic_store(&d->sd.ready, false);
    d->phase = PROCESS_GRACE;
    d->shutdown_started = now_usec(CLOCK_MONOTONIC);
    grpc_server_signal_processes(d->grpc, SIGTERM);
    uv_timer_start(&d->tick, on_shutdown_tick, 0, SHUTDOWN_TICK_MS);
}

static char *join_host_port(const char *host, int port)
{
    char *s = NULL;
    bool v6 = strchr(host, ':') != NULL;
    if (asprintf(&s, v6 ? "[%s]:%d" : "%s:%d", host, port) < 0)
        return NULL;
    return s;
}

static int run(daemon_ctx *d)
{
    const sandboxd_config *cfg = d->sd.config;
    int r = uv_loop_init(&d->loop);
    if (r < 0)
        return r;
    uv_signal_init(&d->loop, &d->sigterm);
    uv_signal_init(&d->loop, &d->sigint);
    uv_timer_init(&d->loop, &d->tick);
    d->sigterm.data = d->sigint.data = d->tick.data = d;

    r = rest_server_new(&d->rest, &d->sd);
    if (r >= 0)
        r = grpc_server_new(&d->grpc, &d->loop, &d->sd);
    if (r < 0) {
        d->rest = rest_server_free(d->rest);
        finish_shutdown(d);
        uv_run(&d->loop, UV_RUN_DEFAULT);
        uv_loop_close(&d->loop);
        return r;
    }
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    uv_signal_start(&d->sigint, on_signal, SIGINT);

    _cleanup_free_ char *grpc_addr = join_host_port(cfg->listen_host, cfg->grpc_port);
    _cleanup_free_ char *rest_addr = join_host_port(cfg->listen_host, cfg->rest_port);
    log_info("sandboxd listening", "version", SANDBOXD_VERSION, "grpc", grpc_addr, "rest", rest_addr,
             "grpcSocket", cfg->grpc_socket, "restSocket", cfg->rest_socket, "rootDir",
             d->sd.root_path);

    /* `-- CMD...`: the sandbox's main process (nothing changes without one). */
    if (cfg->main_command && cfg->main_command[0] &&
        main_process_start(grpc_server_procs(d->grpc), &d->sd, cfg->main_command) < 0)
        log_warn("cannot start the main process", "error", "out of memory");

    uv_run(&d->loop, UV_RUN_DEFAULT);
    return uv_loop_close(&d->loop) == 0 ? 0 : -EBUSY;
}

/* In a local sandbox stdout/stderr are a pipe that asb serve reads (and that nobody reads while
 * asb serve restarts): a log line that does not fit is dropped (EAGAIN, or EPIPE with SIGPIPE
 * ignored) rather than blocking the daemon. Files and terminals are left as they are. */
static void nonblocking_log_pipes(void)
{
    for (int fd = 1; fd <= 2; fd++) {
        struct stat st;
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))
            (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
}

/* The inherited fd named by var, made close-on-exec and taken out of the environment; -1 when
 * absent or unusable. $ASB_MAIN_OUTPUT_FD: the write end of the pipe the host reads the main
 * process's output from (runc --preserve-fds), kept open for sandboxd's lifetime at the same
 * number, so a restarted asb serve finds it again in /proc/<pid>/fd; close-on-exec, so only the
 * main process gets it (as its stdout and stderr), not Start/Execute children. */
static int main_output_fd(const char *var)
{
    const char *v = getenv(var);
    char *end = NULL;
    long n = v && *v ? strtol(v, &end, 10) : -1;
    if (v && *v && (*end || n < 3 || n > 1024 || fcntl((int)n, F_SETFD, FD_CLOEXEC) < 0)) {
        log_warn("ignoring an fd variable", "name", var, "value", v);
        n = -1;
    }
    unsetenv(var);
    return (int)n;
}

/* The code sandboxd runs shares its uid, so without this it could open /proc/1/mem (and environ,
 * maps, fd/, cwd, root, exe) and read or rewrite the daemon that answers the host: /proc checks
 * ptrace access, which for the same uid passes unless the target is non-dumpable; then it needs
 * CAP_SYS_PTRACE in the daemon's user namespace, which nothing in a sandbox has. Set before
 * anything else runs. Children inherit it until they exec, and exec makes them dumpable again
 * (their own /proc stays theirs). */
static int make_undumpable(void)
{
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
        return 0;
    int k = negative_errno();
    fprintf(stderr, "sandboxd: prctl(PR_SET_DUMPABLE): %s\n", strerror(-k));
    return k;
}

int main(int argc, char **argv)
{
    if (make_undumpable() < 0)
        return 1;
    sandboxd_config cfg;
    int code = sandboxd_config_parse(&cfg, argc, argv);
    if (code >= 0) {
        sandboxd_config_done(&cfg);
        return code;
    }
    log_setup("sandboxd", cfg.log_json, LOG_LEVEL_INFO);
    /* Read and drop ASB_MAIN_DIR/ASB_MAIN_WORKDIR while single-threaded: unsetenv() must not
     * race the REST threads reading the environment (/v1/metadata) or children inheriting it. */
    const char *main_dir = getenv("ASB_MAIN_DIR"), *main_wd = getenv("ASB_MAIN_WORKDIR");
    if ((main_dir && *main_dir && !(cfg.main_dir = strdup(main_dir))) ||
        (main_wd && *main_wd && !(cfg.main_workdir = strdup(main_wd)))) {
        sandboxd_config_done(&cfg);
        return 1;
    }
    unsetenv("ASB_MAIN_DIR");
    unsetenv("ASB_MAIN_WORKDIR");
    cfg.main_output_fd = main_output_fd("ASB_MAIN_OUTPUT_FD");
    /* The pipe's read end: only held (never read), so the pipe keeps a reader while no asb
     * serve does, and only made close-on-exec here. */
    (void)main_output_fd("ASB_MAIN_OUTPUT_KEEP_FD");
    signal(SIGPIPE, SIG_IGN);
    nonblocking_log_pipes();

    daemon_ctx d = {.sd = {.config = &cfg, .root_fd = -1}};
    d.sd.started_at = now_usec(CLOCK_MONOTONIC);
    atomic_init(&d.sd.ready, true);

    int r = sandboxd_open_root(&d.sd, &cfg);
    if (r >= 0)
        r = run(&d);
    safe_close(d.sd.root_fd);
    free(d.sd.root_path);
    sandboxd_config_done(&cfg);
    return r < 0 ? 1 : 0;
}
