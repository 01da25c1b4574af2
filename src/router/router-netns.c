/* Upstream sockets made inside a sandbox's network namespace: the address
 * "netns:PID/CGROUP@host:port" names the namespace by the pid of the sandbox's first process and
 * the cgroup that process must be in. The socket is created after setns(2) into that namespace
 * and the thread goes straight back to its own; a socket keeps the namespace it was created in,
 * so the connect, and every later read and write, happen there from any thread. No port of the
 * host is opened for the sandbox, and a sandbox with loopback only is reached the same way. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/macro.h"
#include "router/router-internal.h"
#include "shared/log.h"

bool router_addr_is_netns(const char *addr)
{
    return addr && strncmp(addr, "netns:", 6) == 0;
}

const char *router_addr_hostport(const char *addr)
{
    if (!router_addr_is_netns(addr))
        return addr;
    const char *at = strrchr(addr, '@');
    return at ? at + 1 : addr;
}

/* Whether /proc/PID/cgroup has cgroup (a whole path) in some hierarchy. */
static bool in_cgroup(pid_t pid, const char *cgroup, size_t cl)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        size_t n = strcspn(line, "\n");
        line[n] = '\0';
        const char *p = strrchr(line, ':');
        if (p && strlen(p + 1) == cl && memcmp(p + 1, cgroup, cl) == 0)
            return true;
    }
    return false;
}

/* The namespace of the process the address names, as a pidfd that is checked to be that
 * process: opened first, the cgroup read next, then the process is asked whether it still lives
 * (a pid reused between the open and the read would leave the pidfd's process dead). */
static int open_target(const char *addr, int *ret_pidfd)
{
    const char *p = addr + 6, *slash = strchr(p, '/'), *at = strrchr(p, '@');
    if (!slash || !at || at < slash)
        return -EINVAL;
    char *end;
    long pid = strtol(p, &end, 10);
    if (end != slash || pid <= 1)
        return -EINVAL;
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (pidfd < 0)
        return errno == ESRCH ? -ECONNREFUSED : -errno;
    if (!in_cgroup((pid_t)pid, slash, (size_t)(at - slash)) ||
        syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
        close(pidfd);
        return -ECONNREFUSED; /* the sandbox's process is gone: as a refused connect (502) */
    }
    *ret_pidfd = pidfd;
    return 0;
}

int router_netns_socket(const char *addr, int family, int type)
{
    _cleanup_close_ int pidfd = -1;
    int r = open_target(addr, &pidfd);
    if (r < 0)
        return r;
    _cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return -errno;
    if (setns(pidfd, CLONE_NEWNET) < 0)
        return -errno;
    int fd = socket(family, type | SOCK_CLOEXEC, 0);
    int k = fd < 0 ? -errno : 0;
    if (setns(self, CLONE_NEWNET) < 0) {
        /* this thread would go on serving every other request from inside the sandbox */
        log_error("router: cannot return to the host network namespace", "error", strerror(errno));
        abort();
    }
    return fd < 0 ? k : fd;
}
