/* TCP buffer limits of sandboxes on cgroup v1. See local-tcpmem.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/container/local-tcpmem.h"

#define V1_MEMORY "/sys/fs/cgroup/memory"
#define TCP_LIMIT "memory.kmem.tcp.limit_in_bytes"

/* A control file takes its value in one write(2). */
static int write_control(const char *path, const char *value)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, value, strlen(value));
    return n == (ssize_t)strlen(value) ? 0 : n < 0 ? -errno : -EIO;
}

int local_tcpmem_limit(const char *cgroups_path, int64_t memory_limit)
{
    if (memory_limit <= 0 || access(V1_MEMORY "/" TCP_LIMIT, F_OK) < 0)
        return 0;
    _cleanup_free_ char *dir = NULL, *file = NULL, *value = NULL;
    if (asprintf(&dir, V1_MEMORY "%s", cgroups_path) < 0 ||
        asprintf(&file, "%s/" TCP_LIMIT, dir) < 0 ||
        asprintf(&value, "%" PRId64, memory_limit / LOCAL_TCPMEM_SHARE) < 0)
        return -ENOMEM;
    /* Parents too with exactly 0755 (not this process's umask): runc's init, as the sandbox's
     * root, looks the cgroup up. */
    char *slash = strrchr(dir, '/');
    int k = 0;
    if (slash && slash > dir + strlen(V1_MEMORY)) {
        *slash = '\0';
        k = mkdir_p(dir, 0755);
        *slash = '/';
    }
    if (k == 0)
        k = mkdir_p(dir, 0755);
    return k < 0 ? k : write_control(file, value);
}
