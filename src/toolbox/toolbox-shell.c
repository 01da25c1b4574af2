/* run_shell_command (spec/AGENT.md §2.1): `bash -c COMMAND` (sh when the image has no bash),
 * stdout and stderr merged, the tool returning when bash exits (not when background children
 * close the output). bash runs in the toolbox's own process group, so the group sandboxd kills
 * on a deadline or cancel takes the whole command with it; processes left in that group after
 * bash exits are the background PIDs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "toolbox/toolbox.h"

#define OUTPUT_CAP (8u << 20) /* keep at most the last 8 MiB of output */
#define BACKGROUND_DELAY_MS 200

static int sigchld_pipe[2] = {-1, -1};

static void on_sigchld(int sig)
{
    int saved = errno;
    if (sigchld_pipe[1] >= 0)
        (void)!write(sigchld_pipe[1], "c", 1);
    errno = saved;
}

/* fork + exec bash (or sh). out_fd becomes stdout and stderr. Returns pid or negative errno. */
static pid_t spawn(const char *command, const char *cwd, int out_fd)
{
    int errp[2];
    if (pipe2(errp, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(errp[0]);
        close(errp[1]);
        return -e;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGCHLD, SIG_DFL);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC); /* dup2 clears it on fd 0 */
        if (null >= 0 && null != 0) {
            dup2(null, 0);
            close(null);
        }
        if (dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0 || (cwd && chdir(cwd) < 0)) {
            int e = errno;
            (void)!write(errp[1], &e, sizeof(e));
            _exit(127);
        }
        if (out_fd > 2)
            close(out_fd);
        execlp("bash", "bash", "-c", command, (char *)NULL);
        if (errno == ENOENT)
            execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        int e = errno;
        (void)!write(errp[1], &e, sizeof(e));
        _exit(127);
    }
    close(errp[1]);
    int e = 0;
    ssize_t k;
    do
        k = read(errp[0], &e, sizeof(e));
    while (k < 0 && errno == EINTR);
    close(errp[0]);
    if (k == (ssize_t)sizeof(e)) {
        waitpid(pid, NULL, 0);
        return -e;
    }
    return pid;
}

/* Processes still in our process group, other than ourselves: the background PIDs. */
static void background_pids(buf *b, pid_t exclude)
{
    pid_t self = getpid(), pgrp = getpgrp();
    _cleanup_closedir_ DIR *d = opendir("/proc");
    if (!d)
        return;
    pid_t *v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == self || pid == exclude)
            continue;
        char path[64], stat_line[1024];
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, stat_line, sizeof(stat_line) - 1);
        close(fd);
        if (k <= 0)
            continue;
        stat_line[k] = '\0';
        /* "pid (comm) state ppid pgrp ...": comm may contain anything, so parse after ')'. */
        char *rp = strrchr(stat_line, ')');
        char state;
        long ppid, pg;
        if (!rp || sscanf(rp + 1, " %c %ld %ld", &state, &ppid, &pg) != 3)
            continue;
        if (pg != pgrp || state == 'Z')
            continue;
        pid_t *t = realloc(v, (n + 1) * sizeof(*t));
        if (!t)
            break;
        v = t;
        v[n++] = (pid_t)pid;
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            pid_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++)
        toolbox_buf_printf(b, "%s%d", i ? ", " : "", (int)v[i]);
    free(v);
}

static void keep_tail(buf *out, size_t *dropped)
{
    if (out->len <= OUTPUT_CAP)
        return;
    size_t cut = out->len - OUTPUT_CAP / 2;
    buf_consume(out, cut);
    *dropped += cut;
}

static void format_result(toolbox_result *res, buf *out, size_t dropped, int status, pid_t bash)
{
    while (out->len > 0 && (out->data[out->len - 1] == '\n' || out->data[out->len - 1] == '\r'))
        out->data[--out->len] = '\0';
    buf b = BUF_INIT;
    toolbox_buf_puts(&b, "Output: ");
    if (dropped)
        toolbox_buf_printf(&b, "[... first %zu bytes of output dropped ...]\n", dropped);
    toolbox_buf_puts(&b, out->len || dropped ? out->data : "(empty)");
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        toolbox_buf_printf(&b, "\nExit Code: %d", WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        toolbox_buf_printf(&b, "\nSignal: %d", WTERMSIG(status));
    buf bg = BUF_INIT;
    background_pids(&bg, bash);
    if (bg.len)
        toolbox_buf_printf(&b, "\nBackground PIDs: %s", bg.data);
    free(bg.data);
    toolbox_buf_printf(&b, "\nProcess Group PGID: %d", (int)getpgrp());
    res->llm = toolbox_buf_steal(&b);
    if (out->len)
        toolbox_set_display(res, "%s", out->data);
    else if (WIFSIGNALED(status))
        toolbox_set_display(res, "Command terminated by signal: %d", WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        toolbox_set_display(res, "Command exited with code: %d", WEXITSTATUS(status));
    else
        toolbox_set_display(res, "%s", "");
}

/* Reads fd into out until child exits (then drains what is already there), or until the
 * deadline (deadline_ms < 0: none). Returns 1 when the child exited (*status set), 0 on
 * deadline. */
static int pump(int fd, pid_t child, int *status, long long deadline_ms, buf *out, size_t *dropped)
{
    for (;;) {
        pid_t w = waitpid(child, status, WNOHANG);
        if (w == child) {
            if (fd >= 0) {
                char chunk[65536];
                ssize_t k;
                int fl = fcntl(fd, F_GETFL);
                fcntl(fd, F_SETFL, fl | O_NONBLOCK);
                /* bounded: a background writer must not keep us here */
                for (int i = 0; i < 64 && (k = read(fd, chunk, sizeof(chunk))) > 0; i++) {
                    toolbox_buf_add(out, chunk, (size_t)k);
                    keep_tail(out, dropped);
                }
            }
            return 1;
        }
        int timeout = -1;
        if (deadline_ms >= 0) {
            long long left = deadline_ms - now_msec(CLOCK_MONOTONIC);
            if (left <= 0)
                return 0;
            timeout = (int)MIN(left, 1000LL);
        }
        struct pollfd p[2] = {{.fd = sigchld_pipe[0], .events = POLLIN},
                              {.fd = fd, .events = POLLIN}};
        int k = poll(p, fd >= 0 ? 2 : 1, timeout);
        if (k < 0 && errno != EINTR)
            return 0;
        if (p[0].revents & POLLIN) {
            char c[64];
            (void)!read(sigchld_pipe[0], c, sizeof(c));
        }
        if (fd >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
            char chunk[65536];
            ssize_t r = read(fd, chunk, sizeof(chunk));
            if (r > 0) {
                toolbox_buf_add(out, chunk, (size_t)r);
                keep_tail(out, dropped);
            } else if (r == 0) {
                fd = -1; /* EOF: everyone closed it; keep waiting for bash */
            }
        }
    }
}

int toolbox_shell(const toolbox_ctx *ctx, json_t *args, toolbox_result *res)
{
    const char *command, *description, *dir_path;
    bool is_background, has_delay;
    long long delay_ms = BACKGROUND_DELAY_MS;
    if (toolbox_arg_string(args, "command", true, &command, res) < 0 ||
        toolbox_arg_string(args, "description", false, &description, res) < 0 ||
        toolbox_arg_string(args, "dir_path", false, &dir_path, res) < 0 ||
        toolbox_arg_bool(args, "is_background", false, &is_background, res) < 0 ||
        toolbox_arg_int(args, "delay_ms", 0, &delay_ms, &has_delay, res) < 0)
        return 0;
    if (!command[strspn(command, " \t\r\n")])
        return toolbox_invalid(res, "Command cannot be empty.");
    if (!has_delay)
        delay_ms = BACKGROUND_DELAY_MS;
    bool inside;
    _cleanup_free_ char *cwd =
        toolbox_resolve(ctx, dir_path && *dir_path ? dir_path : ".", &inside);
    if (!cwd)
        return -ENOMEM;
    if (!inside)
        return toolbox_outside(ctx, res, cwd);
    struct stat st;
    if (stat(cwd, &st) < 0 || !S_ISDIR(st.st_mode))
        return toolbox_invalid(res, "Directory '%s' does not exist or is not a directory.", cwd);

    /* Lead a process group of our own (under sandboxd we already do). */
    if (getpgrp() != getpid())
        (void)setpgid(0, 0);
    if (pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    struct sigaction sa = {.sa_handler = on_sigchld, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    buf out = BUF_INIT;
    toolbox_buf_add(&out, "", 0);
    size_t dropped = 0;
    int status = 0;
    if (is_background) {
        /* Output goes to a log file the background process keeps writing to. */
        const char *tmp = getenv("TMPDIR");
        _cleanup_free_ char *log = NULL;
        if (asprintf(&log, "%s/geminicli-shell-XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0)
            return -ENOMEM;
        int lfd = mkostemp(log, O_CLOEXEC | O_APPEND);
        if (lfd < 0)
            return toolbox_fail(res, "shell_execute_error",
                                "Output: (empty)\nError: cannot create the output log: %s",
                                strerror(errno));
        pid_t pid = spawn(command, cwd, lfd);
        close(lfd);
        if (pid < 0)
            return toolbox_fail(res, "shell_execute_error",
                                "Output: (empty)\nError: spawn bash: %s", strerror((int)-pid));
        if (pump(-1, pid, &status, now_msec(CLOCK_MONOTONIC) + delay_ms, &out, &dropped) == 1) {
            /* It finished (or failed) right away: report it like a foreground command. */
            _cleanup_free_ char *data = NULL;
            size_t len = 0;
            if (toolbox_read_all(log, &data, &len) == 0)
                toolbox_buf_add(&out, data, len);
            unlink(log);
            format_result(res, &out, dropped, status, pid);
        } else {
            toolbox_set_llm(res, "Command moved to background (PID: %d). Output is written to %s.",
                            (int)pid, log);
            toolbox_set_display(res, "Command moved to background (PID: %d).", (int)pid);
        }
        free(out.data);
        return 0;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = spawn(command, cwd, p[1]);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        free(out.data);
        return toolbox_fail(res, "shell_execute_error", "Output: (empty)\nError: spawn bash: %s",
                            strerror((int)-pid));
    }
    pump(p[0], pid, &status, -1, &out, &dropped);
    close(p[0]);
    format_result(res, &out, dropped, status, pid);
    free(out.data);
    return 0;
}
