/* The runtime's spawn (local-runtime-spawn.h): what the child gets (umask 022, an empty signal
 * mask, SIGPIPE at its default, stdin /dev/null, the extra fds at 3..6, the sealed image as its
 * executable) and what the calling thread and the others keep (their umask 077). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local/runtime/local-runtime-exec.h"
#include "local/runtime/local-runtime-spawn.h"
#include "unit.h"

/* Runs script under sh with extra fds, returns its exit status and its output in out. */
static int run_sh(const char *script, int exec_fd, const int extra[4], char *out, size_t size)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    int hi = fcntl(p[1], F_DUPFD_CLOEXEC, 10);
    close(p[1]);
    char *const argv[] = {(char *)"sh", (char *)"-c", (char *)script, NULL};
    pid_t pid = -1;
    int r = local_runtime_spawn(argv, exec_fd, hi, extra, &pid);
    close(hi);
    if (r < 0) {
        close(p[0]);
        return r;
    }
    size_t got = 0;
    ssize_t n;
    while (got + 1 < size && (n = read(p[0], out + got, size - 1 - got)) > 0)
        got += (size_t)n;
    out[got] = '\0';
    close(p[0]);
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void *other_thread_umask(void *arg)
{
    mode_t m = umask(0);
    umask(m);
    *(mode_t *)arg = m;
    return NULL;
}

TEST(child_gets_umask_022_signals_default_and_stdin_null)
{
    mode_t old = umask(077); /* asb serve's own */
    signal(SIGPIPE, SIG_IGN); /* as asb serve has it */
    sigset_t block, prev;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &block, &prev);
    char out[512];
    int st = run_sh("umask; cat; echo end", -1, NULL, out, sizeof(out));
    CHECK_INT_EQ(st, 0);
    CHECK_STR_EQ(out, "0022\nend\n"); /* cat read /dev/null: EOF at once */
    /* The signal state the spawn gave, read by the process itself (the shell execs grep, so no
     * fork of the shell's own blocks it in between): an empty mask, SIGPIPE (bit 13) not
     * ignored. */
    st = run_sh("exec grep -E '^Sig(Blk|Ign)' /proc/self/status", -1, NULL, out, sizeof(out));
    CHECK_INT_EQ(st, 0);
    CHECK(strstr(out, "SigBlk:\t0000000000000000\n") != NULL);
    const char *ign = strstr(out, "SigIgn:\t");
    CHECK(ign != NULL);
    unsigned long long mask = ign ? strtoull(ign + 8, NULL, 16) : ~0ULL;
    CHECK((mask & (1ULL << (SIGPIPE - 1))) == 0);
    /* The calling thread and every other thread keep 077. */
    mode_t now = umask(077);
    CHECK_INT_EQ(now, 077);
    pthread_t t;
    mode_t other = 0;
    CHECK_INT_EQ(pthread_create(&t, NULL, other_thread_umask, &other), 0);
    pthread_join(t, NULL);
    CHECK_INT_EQ(other, 077);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    signal(SIGPIPE, SIG_DFL);
    umask(old);
}

TEST(extra_fds_arrive_at_3_to_6)
{
    int fds[4];
    char path[4][64];
    for (int i = 0; i < 4; i++) {
        snprintf(path[i], sizeof(path[i]), "/tmp/asb-spawn-%d-%d", (int)getpid(), i);
        int fd = open(path[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0);
        char c = (char)('a' + i);
        CHECK_INT_EQ(write(fd, &c, 1), 1);
        fds[i] = fcntl(fd, F_DUPFD_CLOEXEC, 20);
        close(fd);
    }
    const int extra[4] = {fds[0], fds[1], fds[2], fds[3]};
    char out[256];
    int st = run_sh("for n in 3 4 5 6; do readlink /proc/self/fd/$n; done", -1, extra, out,
                    sizeof(out));
    CHECK_INT_EQ(st, 0);
    char want[512];
    snprintf(want, sizeof(want), "%s\n%s\n%s\n%s\n", path[0], path[1], path[2], path[3]);
    CHECK_STR_EQ(out, want);
    /* Only 3..6 are added: fd 7 (none given) stays closed in the child. */
    const int some[4] = {fds[0], -1, -1, -1};
    st = run_sh("readlink /proc/self/fd/3; test -e /proc/self/fd/4 || echo no4", -1, some, out,
                sizeof(out));
    CHECK_INT_EQ(st, 0);
    snprintf(want, sizeof(want), "%s\nno4\n", path[0]);
    CHECK_STR_EQ(out, want);
    /* A source fd in 0..6 could be replaced by another move: refused, nothing started. */
    const int low[4] = {5, -1, -1, -1};
    CHECK_INT_EQ(run_sh("true", -1, low, out, sizeof(out)), -EBADF);
    for (int i = 0; i < 4; i++) {
        close(fds[i]);
        unlink(path[i]);
    }
}

TEST(the_sealed_image_is_what_runs)
{
    char dir[] = "/tmp/asb-spawn-XXXXXX", bin[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(bin, sizeof(bin), "%s/sh", dir);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "cp /bin/sh %s", bin);
    CHECK_INT_EQ(system(cmd), 0);
    int img = local_runtime_exec_fd(bin);
    CHECK(img >= 7);
    char out[256];
    CHECK_INT_EQ(run_sh("readlink /proc/$$/exe", img, NULL, out, sizeof(out)), 0);
    CHECK(strncmp(out, "/memfd:runc", 11) == 0);
    /* No image: the binary of argv[0] in $PATH. */
    CHECK_INT_EQ(run_sh("readlink /proc/$$/exe", -1, NULL, out, sizeof(out)), 0);
    CHECK(strncmp(out, "/memfd:", 7) != 0 && strstr(out, "sh") != NULL);
    /* An image that cannot be executed falls back to argv[0] too. */
    CHECK_INT_EQ(run_sh("echo fallback", 1000, NULL, out, sizeof(out)), 0);
    CHECK_STR_EQ(out, "fallback\n");
    unlink(bin);
    rmdir(dir);
}
