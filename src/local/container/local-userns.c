/* Sandbox user namespaces owned by the sandbox's own host id. See local-userns.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/container/local-userns.h"

/* The holder, between fork and its end: raw system calls only (asb serve has threads, so
 * nothing that may take a lock). The ids are changed with the system calls themselves, for this
 * process alone (glibc's wrappers would signal threads that do not exist in the child). It keeps
 * no fd of asb serve's but `report` (another holder forked meanwhile must not hold this one's
 * pipe, nor sockets of sandboxes), reports 0 or an errno there, then waits for SIGKILL. */
static _Noreturn void holder(uint32_t id, pid_t parent, int report)
{
    if (report > 3)
        syscall(SYS_close_range, 3u, (unsigned)report - 1, 0u);
    syscall(SYS_close_range, (unsigned)report + 1, ~0u, 0u);
    static const struct rlimit sig = {LOCAL_USERNS_SIGPENDING, LOCAL_USERNS_SIGPENDING};
    static const struct rlimit mq = {LOCAL_USERNS_MSGQUEUE, LOCAL_USERNS_MSGQUEUE};
    int err = 0;
    /* The rlimits first (lowering needs nothing, raising needs root), then the ids; a change of
     * ids clears the parent-death signal, so it is set after them. */
    if (setrlimit(RLIMIT_SIGPENDING, &sig) < 0 || setrlimit(RLIMIT_MSGQUEUE, &mq) < 0 ||
        syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, id, id, id) < 0 ||
        syscall(SYS_setresuid, id, id, id) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        err = errno;
    else if (getppid() != parent)
        err = ESRCH;
    else if (unshare(CLONE_NEWUSER) < 0)
        err = errno;
    if (write(report, &err, sizeof(err)) != (ssize_t)sizeof(err) || err != 0)
        _exit(1);
    close(report);
    for (;;)
        pause();
}

static int write_map(pid_t pid, const char *which, uint32_t host_id, uint32_t count)
{
    char path[64], line[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
    snprintf(line, sizeof(line), "0 %u %u\n", (unsigned)host_id, (unsigned)count);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, line, strlen(line));
    return n == (ssize_t)strlen(line) ? 0 : n < 0 ? -errno : -EIO;
}

void local_userns_release(local_userns *u)
{
    if (u->pid > 0) {
        kill(u->pid, SIGKILL);
        while (waitpid(u->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    u->pid = -1;
}

int local_userns_hold(uint32_t host_id, uint32_t count, local_userns *ret)
{
    *ret = (local_userns)LOCAL_USERNS_INIT;
    if (host_id == 0 || count == 0)
        return -EINVAL;
    int rep[2];
    if (pipe2(rep, O_CLOEXEC) < 0)
        return -errno;
    _cleanup_close_ int rep_r = rep[0], rep_w = rep[1];
    pid_t parent = getpid();
    ret->pid = fork();
    if (ret->pid < 0) {
        int k = -errno;
        local_userns_release(ret);
        return k;
    }
    if (ret->pid == 0)
        holder(host_id, parent, rep_w);
    rep_w = safe_close(rep_w);
    int err = 0;
    ssize_t n;
    while ((n = read(rep_r, &err, sizeof(err))) < 0 && errno == EINTR)
        ;
    int k = n == (ssize_t)sizeof(err) ? -err : -ECHILD;
    if (k == 0)
        k = write_map(ret->pid, "uid_map", host_id, count);
    if (k == 0)
        k = write_map(ret->pid, "gid_map", host_id, count);
    if (k < 0) {
        local_userns_release(ret);
        return k;
    }
    snprintf(ret->path, sizeof(ret->path), "/proc/%d/ns/user", (int)ret->pid);
    return 0;
}

int local_userns_netns_enter(const char *netns_path, int *ret_saved)
{
    *ret_saved = -1;
    _cleanup_close_ int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (saved < 0)
        return -errno;
    _cleanup_close_ int target = open(netns_path, O_RDONLY | O_CLOEXEC);
    if (target < 0)
        return -errno;
    if (setns(target, CLONE_NEWNET) < 0)
        return -errno;
    *ret_saved = TAKE_FD(saved);
    return 0;
}

int local_userns_netns_leave(int *saved)
{
    if (*saved < 0)
        return 0;
    int k = setns(*saved, CLONE_NEWNET) < 0 ? -errno : 0;
    *saved = safe_close(*saved);
    return k;
}
