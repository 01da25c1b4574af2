/* The runtime driver's own mechanics, without runc: the sealed exec image of the runtime binary
 * (local-runtime-exec.h), the pidfd kill of a teardown (oci_kill_wait) and the spawn helper
 * (umask 022, output, exit status). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local/runtime/local-runtime-exec.h"
#include "local/runtime/local-runtime-oci.h"
#include "unit.h"

/* Copies src to dst (mode 0755); 0 or -1. */
static int copy(const char *src, const char *dst)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cp %s %s && chmod 0755 %s", src, dst, dst);
    return system(cmd) == 0 ? 0 : -1;
}

TEST(exec_image_is_a_sealed_copy_made_once)
{
    char dir[] = "/tmp/asb-rt-XXXXXX", bin[64], buf[4096], want[4096];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(bin, sizeof(bin), "%s/runc", dir);
    CHECK_INT_EQ(copy("/bin/true", bin), 0);
    int fd = local_runtime_exec_fd(bin);
    CHECK(fd >= 0);
    /* Exactly the seals runc 1.1 compares with, so it trusts /proc/self/exe. */
    CHECK_INT_EQ(fcntl(fd, F_GET_SEALS), F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    CHECK(pwrite(fd, "x", 1, 0) < 0 && errno == EPERM);
    int src = open(bin, O_RDONLY | O_CLOEXEC);
    CHECK(src >= 0);
    ssize_t n = pread(src, want, sizeof(want), 0);
    CHECK(n > 0 && pread(fd, buf, sizeof(buf), 0) == n && memcmp(buf, want, (size_t)n) == 0);
    close(src);
    CHECK_INT_EQ(local_runtime_exec_fd(bin), fd); /* one copy per binary */
    /* A runtime replaced on disk is copied again. */
    CHECK_INT_EQ(unlink(bin), 0);
    CHECK_INT_EQ(copy("/bin/false", bin), 0);
    int fd2 = local_runtime_exec_fd(bin);
    CHECK(fd2 >= 0 && fd2 != fd);
    CHECK_INT_EQ(local_runtime_exec_fd("/nonexistent/runc"), -1);
    unlink(bin);
    rmdir(dir);
}

TEST(kill_wait_kills_through_the_pidfd)
{
    oci_runtime rc, other;
    CHECK_INT_EQ(oci_runtime_init(&rc, "/usr/sbin/runc", "/tmp/none"), 0);
    CHECK_INT_EQ(oci_runtime_init(&other, "runsc", "/tmp/none"), 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        pause();
        _exit(0);
    }
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    CHECK(pidfd >= 0);
    CHECK_INT_EQ(oci_kill_wait(&other, pidfd, 100), -EOPNOTSUPP); /* runc only */
    CHECK_INT_EQ(oci_kill_wait(&rc, -1, 100), -EOPNOTSUPP);
    CHECK_INT_EQ(kill(pid, 0), 0); /* untouched so far */
    CHECK_INT_EQ(oci_kill_wait(&rc, pidfd, 5000), 0);
    int status = 0;
    CHECK_INT_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK_INT_EQ(oci_kill_wait(&rc, pidfd, 100), 0); /* already gone: still done */
    close(pidfd);
    oci_runtime_done(&rc);
    oci_runtime_done(&other);
}

TEST(spawn_sets_umask_captures_output_and_status)
{
    mode_t old = umask(077); /* asb serve's own */
    char *out = NULL;
    char *const sh[] = {(char *)"sh", (char *)"-c", (char *)"umask; echo out; echo err >&2; exit 3",
                        NULL};
    CHECK_INT_EQ(local_spawn_capture(sh, &out), 3);
    CHECK_STR_EQ(out, "0022\nout\nerr\n");
    free(out);
    out = NULL;
    char *const missing[] = {(char *)"/nonexistent/binary", NULL};
    CHECK_INT_EQ(local_spawn_capture(missing, &out), 127);
    free(out);
    char *const stdin_null[] = {(char *)"sh", (char *)"-c", (char *)"cat; echo done", NULL};
    out = NULL;
    CHECK_INT_EQ(local_spawn_capture(stdin_null, &out), 0);
    CHECK_STR_EQ(out, "done\n");
    free(out);
    umask(old);
}
