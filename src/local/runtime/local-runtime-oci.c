/* runc driver. See local-runtime-oci.h. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/runtime/local-runtime-exec.h"
#include "local/runtime/local-runtime-oci.h"
#include "local/runtime/local-runtime-spawn.h"

int oci_runtime_init(oci_runtime *rt, const char *binary, const char *root)
{
    rt->binary = strdup(binary);
    rt->root = strdup(root);
    return rt->binary && rt->root ? 0 : -ENOMEM;
}

void oci_runtime_done(oci_runtime *rt)
{
    free(rt->binary);
    free(rt->root);
    rt->binary = rt->root = NULL;
}

static int wait_child(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Reads fd to EOF (or to its first error: a non-blocking fd stops when empty) into an owned
 * string ("" when nothing; NULL on ENOMEM). */
static char *read_all(int fd)
{
    _cleanup_buf_ buf out = BUF_INIT;
    if (buf_append_fd(&out, fd) == -ENOMEM)
        return NULL;
    return buf_steal(&out, NULL);
}

/* Spawns argv (local-runtime-spawn.h): stdout+stderr to out_fd, fd3..fd6 (if >= 0, each above 6)
 * as 3..6; exec_fd >= 0: the image to exec (local-runtime-exec.h), argv[0] when that fails. */
static int spawn(char *const argv[], int exec_fd, int out_fd, int fd3, int fd4, int fd5, int fd6,
                 pid_t *ret_pid)
{
    const int extra[4] = {fd3, fd4, fd5, fd6};
    return local_runtime_spawn(argv, exec_fd, out_fd, extra, ret_pid);
}

static int spawn_capture(char *const argv[], int exec_fd, char **ret_output)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = -1;
    int r = spawn(argv, exec_fd, p[1], -1, -1, -1, -1, &pid);
    close(p[1]);
    if (r < 0) {
        close(p[0]);
        if (r == -ENOMEM || r == -EAGAIN || r == -EBADF)
            return r;
        /* The program could not be executed: the status a shell gives for it, as callers read
         * statuses (the forked child of before reported it with _exit(127)). */
        if (ret_output && !(*ret_output = strdup("")))
            return -ENOMEM;
        return 127;
    }
    char *out = read_all(p[0]);
    close(p[0]);
    r = wait_child(pid);
    if (ret_output)
        *ret_output = out;
    else
        free(out);
    return r;
}

int local_spawn_capture(char *const argv[], char **ret_output)
{
    return spawn_capture(argv, -1, ret_output);
}

/* What this driver knows of runc's own behaviour
 * (its delete --force polling, its re-exec from a sealed memfd) is used for runc only. */
bool oci_is_runc(const oci_runtime *rt)
{
    return strcmp(oci_runtime_program(rt), "runc") == 0;
}

const char *oci_runtime_program(const oci_runtime *rt)
{
    const char *base = strrchr(rt->binary, '/');
    return base ? base + 1 : rt->binary;
}

bool oci_runtime_is_runsc(const oci_runtime *rt)
{
    return strcmp(oci_runtime_program(rt), "runsc") == 0;
}

/* The image rt's binary is executed from (-1: the binary itself). */
static int exec_fd_of(const oci_runtime *rt)
{
    return oci_is_runc(rt) ? local_runtime_exec_fd(rt->binary) : -1;
}

/* Trims trailing whitespace in place. */
static char *trim(char *s)
{
    if (!s)
        return s;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* The runtime's message from its output: the last line, with the `time=... level=error
 * msg="..."` logrus framing removed when present, after the name of the program that failed
 * (runc, runsc, ...: never another's). Owned. */
static char *runtime_message(const oci_runtime *rt, const char *out, int status)
{
    _cleanup_free_ char *copy = out ? strdup(out) : NULL;
    trim(copy);
    const char *line = copy ? strrchr(copy, '\n') : NULL;
    line = line ? line + 1 : copy;
    _cleanup_free_ char *un = NULL;
    const char *msg = line ? strstr(line, "msg=\"") : NULL;
    if (msg) {
        msg += 5;
        size_t n = strlen(msg);
        if (n > 0 && msg[n - 1] == '"')
            n--;
        /* logrus escapes quotes inside msg="..." */
        un = strndup(msg, n);
        size_t j = 0;
        for (size_t i = 0; un && un[i]; i++) {
            if (un[i] == '\\' && un[i + 1] == '"')
                i++;
            un[j++] = un[i];
        }
        if (!un)
            return NULL;
        un[j] = '\0';
    }
    char *m = NULL;
    if (asprintf(&m, "%s exited with status %d: %s", oci_runtime_program(rt), status,
                 un ? un : line && *line ? line : "(no output)") < 0)
        m = NULL;
    return m;
}

/* The global flags rt takes before every command (argv from *k, at most 3). */
static void global_flags(const oci_runtime *rt, char **argv, size_t *k)
{
    if (!oci_runtime_is_runsc(rt))
        return;
    /* gVisor (docs/local-sandboxes.md, "gVisor"): its own loopback-only network stack, so
     * nothing of the host's network is reached through the Sentry; sandboxd binds its two
     * sockets itself on the host directory bound at /.asb/run (runsc of 2022 cannot pass
     * listening fds), which --host-uds=create allows; config.json's seccomp profile applied
     * inside the Sentry, on top of runsc's own host filters. */
    argv[(*k)++] = (char *)"--network=none";
    argv[(*k)++] = (char *)"--host-uds=create";
    argv[(*k)++] = (char *)"--oci-seccomp";
}

static int runc(const oci_runtime *rt, const char *const *args, size_t n, char **ret_out)
{
    char *argv[16];
    size_t k = 0;
    argv[k++] = rt->binary;
    argv[k++] = (char *)"--root";
    argv[k++] = rt->root;
    global_flags(rt, argv, &k);
    for (size_t i = 0; i < n && k < ELEMENTSOF(argv) - 1; i++)
        argv[k++] = (char *)args[i];
    argv[k] = NULL;
    return spawn_capture(argv, exec_fd_of(rt), ret_out);
}

/* Whether the runtime knows a container `id` (`runc list`, so no error text is ever parsed):
 * 1, 0, or a negative errno when the list itself failed. */
static int container_exists(const oci_runtime *rt, const char *id)
{
    _cleanup_(json_decrefp) json_t *list = NULL;
    int r = oci_list(rt, &list);
    if (r < 0)
        return r;
    size_t i;
    json_t *c;
    json_array_foreach (list, i, c) {
        const char *cid = json_string_value(json_object_get(c, "id"));
        if (cid && strcmp(cid, id) == 0)
            return 1;
    }
    return 0;
}

int oci_run_detached(const oci_runtime *rt, const char *id, const char *bundle, int rest_fd,
                     int grpc_fd, const int main_fds[2], int out_fd, int out_read_fd,
                     char **ret_error)
{
    *ret_error = NULL;
    /* runsc has no --preserve-fds (its sandboxd binds its sockets itself, local-bundle.h). */
    bool pass_fds = !oci_runtime_is_runsc(rt);
    /* Move the fds above 6 so dup2 onto 3..6 cannot clobber one with another. */
    _cleanup_close_ int r3 = pass_fds ? fcntl(rest_fd, F_DUPFD_CLOEXEC, 10) : -1;
    _cleanup_close_ int g4 = pass_fds ? fcntl(grpc_fd, F_DUPFD_CLOEXEC, 10) : -1;
    bool with_main = pass_fds && main_fds && main_fds[0] >= 0 && main_fds[1] >= 0;
    _cleanup_close_ int m5 = with_main ? fcntl(main_fds[0], F_DUPFD_CLOEXEC, 10) : -1;
    _cleanup_close_ int m6 = with_main ? fcntl(main_fds[1], F_DUPFD_CLOEXEC, 10) : -1;
    _cleanup_close_ int log = fcntl(out_fd, F_DUPFD_CLOEXEC, 10);
    if ((pass_fds && (r3 < 0 || g4 < 0)) || log < 0 || (with_main && (m5 < 0 || m6 < 0)))
        return -errno;
    _cleanup_free_ char *pidfile = NULL;
    if (asprintf(&pidfile, "%s/pid", bundle) < 0)
        return -ENOMEM;
    char *argv[16];
    size_t k = 0;
    argv[k++] = rt->binary;
    argv[k++] = (char *)"--root";
    argv[k++] = rt->root;
    global_flags(rt, argv, &k);
    argv[k++] = (char *)"run";
    argv[k++] = (char *)"--detach";
    if (pass_fds) {
        argv[k++] = (char *)"--preserve-fds";
        argv[k++] = (char *)(with_main ? "4" : "2");
    }
    const char *const rest[] = {"--bundle", bundle, "--pid-file", pidfile, id};
    for (size_t i = 0; i < ELEMENTSOF(rest); i++)
        argv[k++] = (char *)rest[i];
    argv[k] = NULL;
    pid_t pid = -1;
    int r = spawn(argv, exec_fd_of(rt), log, r3, g4, m5, m6, &pid);
    if (r < 0) {
        if (asprintf(ret_error, "cannot run %s: %s", oci_runtime_program(rt), strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    r = wait_child(pid);
    if (r == 0)
        return 0;
    /* runc's error is the last thing in the pipe (the container never started, so no one else
     * wrote to it). Read without blocking: a process runc left behind may hold the write end. */
    _cleanup_free_ char *out = NULL;
    int fl = fcntl(out_read_fd, F_GETFL);
    if (fl >= 0 && fcntl(out_read_fd, F_SETFL, fl | O_NONBLOCK) == 0)
        out = read_all(out_read_fd);
    *ret_error = runtime_message(rt, out, r);
    /* runc removes what a failed run created: a container still listed was there before. */
    return container_exists(rt, id) > 0 ? -EEXIST : -EIO;
}

int oci_state(const oci_runtime *rt, const char *id, char **ret_status, pid_t *ret_pid)
{
    const char *args[] = {"state", id};
    _cleanup_free_ char *out = NULL;
    int r = runc(rt, args, ELEMENTSOF(args), &out);
    if (r < 0)
        return r;
    if (r != 0)
        return container_exists(rt, id) == 0 ? -ENOENT : -EIO;
    json_t *j = json_loads(out, 0, NULL);
    const char *status = json_string_value(json_object_get(j, "status"));
    if (!status) {
        json_decref(j);
        return -EIO;
    }
    *ret_status = strdup(status);
    *ret_pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
    json_decref(j);
    return *ret_status ? 0 : -ENOMEM;
}

int oci_list(const oci_runtime *rt, json_t **ret)
{
    const char *args[] = {"list", "--format", "json"};
    _cleanup_free_ char *out = NULL;
    int r = runc(rt, args, ELEMENTSOF(args), &out);
    if (r < 0)
        return r;
    if (r != 0)
        return -EIO;
    json_t *j = json_loads(out ? out : "null", JSON_DECODE_ANY, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        j = json_array();
    }
    *ret = j;
    return j ? 0 : -ENOMEM;
}

int oci_kill_wait(const oci_runtime *rt, int pidfd, int timeout_ms)
{
    if (pidfd < 0 || !oci_is_runc(rt))
        return -EOPNOTSUPP;
    if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
        return -errno;
    /* A pidfd polls readable once its process has exited; killing the first process of a PID
     * namespace kills every other process in it first. */
    usec_t deadline = now_usec(CLOCK_MONOTONIC) + (usec_t)timeout_ms * USEC_PER_MSEC;
    for (;;) {
        struct pollfd p = {pidfd, POLLIN, 0};
        usec_t now = now_usec(CLOCK_MONOTONIC);
        if (now >= deadline)
            return -ETIMEDOUT;
        int n = poll(&p, 1, (int)((deadline - now + 999) / 1000));
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int oci_delete(const oci_runtime *rt, const char *id, char **ret_error)
{
    *ret_error = NULL;
    const char *args[] = {"delete", "--force", id};
    _cleanup_free_ char *out = NULL;
    int r = runc(rt, args, ELEMENTSOF(args), &out);
    if (r < 0)
        return r;
    if (r == 0 || container_exists(rt, id) == 0)
        return 0;
    *ret_error = runtime_message(rt, out, r);
    return -EIO;
}

static int simple(const oci_runtime *rt, const char *verb, const char *id, char **ret_error)
{
    *ret_error = NULL;
    const char *args[] = {verb, id};
    _cleanup_free_ char *out = NULL;
    int r = runc(rt, args, ELEMENTSOF(args), &out);
    if (r < 0)
        return r;
    if (r == 0)
        return 0;
    *ret_error = runtime_message(rt, out, r);
    return container_exists(rt, id) == 0 ? -ENOENT : -EIO;
}

int oci_pause(const oci_runtime *rt, const char *id, char **ret_error)
{
    return simple(rt, "pause", id, ret_error);
}

int oci_resume(const oci_runtime *rt, const char *id, char **ret_error)
{
    return simple(rt, "resume", id, ret_error);
}
