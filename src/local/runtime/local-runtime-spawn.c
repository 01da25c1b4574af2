/* Spawning the runtime without fork. See local-runtime-spawn.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local/runtime/local-runtime-spawn.h"

#define CHILD_UMASK 022

/* Whether this thread's cwd, root and umask (its fs_struct) are its own already. */
static __thread bool fs_private;

/* posix_spawn cannot set the child's umask, and the child inherits the calling thread's: the
 * calling thread switches to 022 for the spawn alone, which needs a umask no other thread
 * shares (unshare(CLONE_FS) copies cwd, root and umask; asb serve never changes its cwd or root
 * after start, so the copy stays equal to the others). */
static int own_fs(void)
{
    if (fs_private)
        return 0;
    if (unshare(CLONE_FS) < 0)
        return -errno;
    fs_private = true;
    return 0;
}

typedef struct spawn_plan {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
} spawn_plan;

static int plan_init(spawn_plan *p, int out_fd, const int extra[4])
{
    int k = posix_spawn_file_actions_init(&p->fa);
    if (k != 0)
        return -k;
    k = posix_spawnattr_init(&p->attr);
    if (k != 0) {
        posix_spawn_file_actions_destroy(&p->fa);
        return -k;
    }
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE); /* asb serve ignores it; runc and its children must not */
    k = posix_spawn_file_actions_addopen(&p->fa, 0, "/dev/null", O_RDONLY, 0);
    if (k == 0)
        k = posix_spawn_file_actions_adddup2(&p->fa, out_fd, 1);
    if (k == 0)
        k = posix_spawn_file_actions_adddup2(&p->fa, out_fd, 2);
    for (int i = 0; k == 0 && extra && i < 4; i++)
        if (extra[i] >= 0)
            k = posix_spawn_file_actions_adddup2(&p->fa, extra[i], 3 + i);
    if (k == 0)
        k = posix_spawnattr_setsigmask(&p->attr, &none);
    if (k == 0)
        k = posix_spawnattr_setsigdefault(&p->attr, &dfl);
    if (k == 0)
        k = posix_spawnattr_setflags(&p->attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (k != 0) {
        posix_spawnattr_destroy(&p->attr);
        posix_spawn_file_actions_destroy(&p->fa);
        return -k;
    }
    return 0;
}

static void plan_done(spawn_plan *p)
{
    posix_spawnattr_destroy(&p->attr);
    posix_spawn_file_actions_destroy(&p->fa);
}

int local_runtime_spawn(char *const argv[], int exec_fd, int out_fd, const int extra[4],
                        pid_t *ret_pid)
{
    if (out_fd < 3)
        return -EBADF;
    for (int i = 0; extra && i < 4; i++)
        if (extra[i] >= 0 && extra[i] < 7)
            return -EBADF;
    int r = own_fs();
    if (r < 0)
        return r;
    spawn_plan plan;
    r = plan_init(&plan, out_fd, extra);
    if (r < 0)
        return r;
    extern char **environ;
    pid_t pid = -1;
    int k = -1;
    mode_t old = umask(CHILD_UMASK);
    if (exec_fd >= 7) {
        /* The memfd by its /proc path: the child still holds it (O_CLOEXEC closes it only once
         * the exec has succeeded), and its /proc/self/exe is then the sealed memfd. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", exec_fd);
        k = posix_spawn(&pid, path, &plan.fa, &plan.attr, argv, environ);
    }
    if (k != 0)
        k = posix_spawnp(&pid, argv[0], &plan.fa, &plan.attr, argv, environ);
    umask(old);
    plan_done(&plan);
    if (k != 0)
        return -k;
    *ret_pid = pid;
    return 0;
}
