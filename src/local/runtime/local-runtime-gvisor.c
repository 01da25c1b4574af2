/* gVisor (runsc) sandboxes: sandboxd's sockets (local-runtime-gvisor.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/runtime/local-runtime-gvisor.h"

static const char *const socket_names[] = {"rest.sock", "grpc.sock"};

/* Removes name under dfd unless it is a directory (ENOENT is success). */
static int remove_entry(int dfd, const char *name)
{
    if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

int local_gvisor_prepare(const char *run_dir, uid_t uid, gid_t gid, char **ret_dir)
{
    _cleanup_close_ int run = open(run_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (run < 0)
        return -errno;
    if (mkdirat(run, LOCAL_GVISOR_BOX, 0700) < 0 && errno != EEXIST)
        return -errno;
    _cleanup_close_ int box =
        openat(run, LOCAL_GVISOR_BOX, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (box < 0)
        return -errno;
    /* By fd: the box may hold whatever an earlier container left, never followed. */
    if (fchown(box, uid, gid) < 0 || fchmod(box, 0700) < 0)
        return -errno;
    for (size_t i = 0; i < ELEMENTSOF(socket_names); i++) {
        int r = remove_entry(box, socket_names[i]);
        if (r == 0)
            r = remove_entry(run, socket_names[i]);
        if (r < 0)
            return r;
    }
    if (asprintf(ret_dir, "%s/" LOCAL_GVISOR_BOX, run_dir) < 0)
        return -ENOMEM;
    return 0;
}

/* Links box/name into run as name when it is there: 1 linked, 0 not there yet, <0 errno. */
static int link_one(int run, int box, const char *name)
{
    _cleanup_close_ int fd = openat(box, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    /* Only a socket is linked; anything else may be a stale name sandboxd is replacing. */
    if (!S_ISSOCK(st.st_mode))
        return 0;
    int r = remove_entry(run, name);
    if (r < 0)
        return r;
    /* AT_EMPTY_PATH: the inode checked above, whatever the name points to now. */
    if (linkat(fd, "", run, name, AT_EMPTY_PATH) < 0)
        return -errno;
    return 1;
}

/* Waits for up to ms for pidfd to exit: 1 exited, 0 not (also when pidfd < 0: a plain
 * sleep), <0 errno. */
static int wait_exit(int pidfd, int ms)
{
    if (pidfd < 0) {
        struct timespec ts = {0, (long)ms * 1000000L};
        nanosleep(&ts, NULL);
        return 0;
    }
    struct pollfd p = {pidfd, POLLIN, 0};
    int n = poll(&p, 1, ms);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    return n > 0;
}

int local_gvisor_publish(const char *run_dir, pid_t pid, int timeout_ms)
{
    _cleanup_close_ int run = open(run_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (run < 0)
        return -errno;
    _cleanup_close_ int box =
        openat(run, LOCAL_GVISOR_BOX, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (box < 0)
        return -errno;
    _cleanup_close_ int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
    if (pid > 0 && pidfd < 0)
        return errno == ESRCH ? -ESRCH : -errno;
    usec_t deadline = now_usec(CLOCK_MONOTONIC) + (usec_t)timeout_ms * USEC_PER_MSEC;
    bool linked[ELEMENTSOF(socket_names)] = {false};
    for (;;) {
        size_t done = 0;
        for (size_t i = 0; i < ELEMENTSOF(socket_names); i++) {
            if (!linked[i]) {
                int r = link_one(run, box, socket_names[i]);
                if (r < 0)
                    return r;
                linked[i] = r > 0;
            }
            done += linked[i];
        }
        if (done == ELEMENTSOF(socket_names))
            return 0;
        if (now_usec(CLOCK_MONOTONIC) >= deadline)
            return -ETIMEDOUT;
        /* sandboxd binds within milliseconds of its start; a short poll keeps Ready prompt. */
        int r = wait_exit(pidfd, 5);
        if (r < 0)
            return r;
        if (r > 0)
            return -ESRCH;
    }
}

/* The mount point of one staged source at path: a directory or an empty file, as source is. */
static int stage_point(const char *source, const char *path)
{
    struct stat st;
    if (stat(source, &st) < 0)
        return -errno;
    if (S_ISDIR(st.st_mode))
        return mkdir(path, 0755) < 0 ? -errno : 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    close(fd);
    return 0;
}

int local_gvisor_stage_binds(const json_t *sources)
{
    int r = mkdir_p(LOCAL_BUNDLE_STAGE_DIR, 0755);
    if (r < 0)
        return r;
    if (mount("tmpfs", LOCAL_BUNDLE_STAGE_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0755,size=64k") < 0)
        return -errno;
    size_t i;
    json_t *s;
    json_array_foreach (sources, i, s) {
        char path[sizeof(LOCAL_BUNDLE_STAGE_DIR) + 24];
        snprintf(path, sizeof(path), LOCAL_BUNDLE_STAGE_DIR "/%zu", i);
        const char *source = json_string_value(s);
        if (!source)
            return -EINVAL;
        if ((r = stage_point(source, path)) < 0)
            return r;
        if (mount(source, path, NULL, MS_BIND | MS_REC, NULL) < 0)
            return -errno;
    }
    return 0;
}
