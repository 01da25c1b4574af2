#include "sandboxd/sandboxd-main-process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-process-spawn.h"
#include "shared/log.h"

extern char **environ;

typedef struct main_process {
    child ch; /* first: the table hands us back &ch */
    process_table *table;
    char *dir;  /* $ASB_MAIN_DIR or NULL */
    int out_fd; /* $ASB_MAIN_OUTPUT_FD (borrowed, stays open) or -1 */
} main_process;

/* Gives the host's reader a moment (at most 1 s) to take what the main process wrote before its
 * exit is recorded, so a reader that stops at the exit file has the whole output. */
static void wait_output_read(int fd)
{
    for (int i = 0; fd >= 0 && i < 100; i++) {
        int queued = 0;
        if (ioctl(fd, FIONREAD, &queued) < 0 || queued == 0)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void record_exit(const char *dir, int code)
{
    if (!dir)
        return;
    _cleanup_free_ char *tmp = NULL, *path = NULL;
    if (asprintf(&tmp, "%s/.exit.tmp", dir) < 0 || asprintf(&path, "%s/exit", dir) < 0)
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_warn("cannot record the main process exit", "path", tmp, "error", strerror(errno));
        return;
    }
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%d\n", code);
    bool ok = write(fd, buf, (size_t)n) == n;
    ok = fsync(fd) == 0 && ok;
    close(fd);
    if (!ok || rename(tmp, path) < 0)
        log_warn("cannot record the main process exit", "path", path, "error", strerror(errno));
}

static void mp_free(main_process *m)
{
    free(m->dir);
    free(m);
}

static void mp_on_exit(child *c, int status)
{
    main_process *m = (main_process *)c;
    int code = WIFEXITED(status)     ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                     : 255;
    char sc[16];
    snprintf(sc, sizeof(sc), "%d", code);
    char sp[16];
    snprintf(sp, sizeof(sp), "%ld", (long)c->pid);
    log_info("main process exited", "pid", sp, "code", sc);
    wait_output_read(m->out_fd);
    record_exit(m->dir, code);
    process_table_remove(m->table, c);
    mp_free(m);
}

static void mp_destroy(child *c)
{
    main_process *m = (main_process *)c;
    if (!c->reaped)
        log_info("main process killed at shutdown");
    mp_free(m);
}

static const child_ops mp_ops = {.on_exit = mp_on_exit, .destroy = mp_destroy};

int main_process_start(process_table *t, sandboxd *sd, char *const argv[])
{
    const char *env_dir = sd->config->main_dir;
    main_process *m = calloc(1, sizeof(*m));
    if (!m || (env_dir && !(m->dir = strdup(env_dir)))) {
        free(m);
        return -ENOMEM;
    }
    m->table = t;
    m->ch.ops = &mp_ops;
    m->out_fd = sd->config->main_output_fd;

    _cleanup_free_ char *path = NULL;
    if (strchr(argv[0], '/'))
        path = strdup(argv[0]);
    else
        path = path_lookup(argv[0], getenv("PATH") ? getenv("PATH")
                                                   : "/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                                     "/usr/bin:/sbin:/bin");
    int err = 0;
    _cleanup_free_ char *log_path = NULL;
    int log_fd = -1;
    if (!path)
        err = errno ? errno : ENOENT;
    else if (m->out_fd >= 0)
        log_fd = m->out_fd; /* the host's pipe: never closed here */
    else if (m->dir) {
        if (asprintf(&log_path, "%s/log", m->dir) < 0) {
            mp_free(m);
            return -ENOMEM;
        }
        log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log_fd < 0)
            log_warn("cannot open the main process log", "path", log_path, "error",
                     strerror(errno));
    }
    pid_t pid = -1;
    if (!err) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&attr);
        if (sd->config->main_workdir)
            posix_spawn_file_actions_addchdir_np(&fa, sd->config->main_workdir);
        else
            posix_spawn_file_actions_addfchdir_np(&fa, sd->root_fd);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (log_fd >= 0) {
            posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
            posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
        }
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setpgroup(&attr, 0);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                            POSIX_SPAWN_SETPGROUP);
        err = posix_spawn(&pid, path, &fa, &attr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
    }
    if (log_fd >= 0 && log_fd != m->out_fd)
        close(log_fd);
    if (err) {
        int code = err == ENOENT ? 127 : 126;
        char sc[16];
        snprintf(sc, sizeof(sc), "%d", code);
        log_warn("cannot start the main process", "command", argv[0], "error", strerror(err),
                 "code", sc);
        if (m->out_fd >= 0)
            dprintf(m->out_fd, "sandboxd: cannot start %s: %s\n", argv[0], strerror(err));
        else if (m->dir && asprintf(&log_path, "%s/log", m->dir) >= 0) {
            FILE *f = fopen(log_path, "ae");
            if (f) {
                fprintf(f, "sandboxd: cannot start %s: %s\n", argv[0], strerror(err));
                fclose(f);
            }
        }
        wait_output_read(m->out_fd);
        record_exit(m->dir, code);
        mp_free(m);
        return 0;
    }
    m->ch.pid = pid;
    process_table_add(t, &m->ch);
    char sp[16];
    snprintf(sp, sizeof(sp), "%ld", (long)pid);
    log_info("main process started", "pid", sp, "command", argv[0]);
    return 0;
}
