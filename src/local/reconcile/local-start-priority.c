/* See local-start-priority.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/reconcile/local-start-priority.h"

/* Descendants deeper than this are not looked for: a sandbox that just came up has sandboxd
 * and perhaps its main process, nothing deep. */
#define RESTORE_MAX_DEPTH 4

static bool can_restore(void)
{
    return geteuid() == 0;
}

/* The calling thread's nice value, only where it can be undone. */
static int set_thread_nice(int nice)
{
    if (!can_restore())
        return 0;
    /* PRIO_PROCESS with a thread id is per thread on Linux: only this worker. */
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), nice) < 0)
        return -errno;
    return 0;
}

int local_start_priority_set(bool warm_member)
{
    return set_thread_nice(warm_member ? LOCAL_START_REFILL_NICE : 0);
}

int local_teardown_priority_set(bool background)
{
    return set_thread_nice(background ? LOCAL_TEARDOWN_NICE : 0);
}

/* Every thread of pid back to 0, then the children each thread has. Returns how many threads
 * were changed. */
static int restore_tree(pid_t pid, unsigned depth)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        long tid = strtol(de->d_name, &end, 10);
        if (de->d_name[0] == '.' || *end || tid <= 0)
            continue;
        if (setpriority(PRIO_PROCESS, (id_t)tid, 0) == 0)
            n++;
        if (depth >= RESTORE_MAX_DEPTH)
            continue;
        char cpath[96];
        snprintf(cpath, sizeof(cpath), "/proc/%d/task/%ld/children", (int)pid, tid);
        FILE *f = fopen(cpath, "re");
        if (!f)
            continue;
        int child;
        while (fscanf(f, "%d", &child) == 1)
            n += restore_tree(child, depth + 1);
        fclose(f);
    }
    closedir(d);
    return n;
}

int local_start_priority_restore(pid_t pid)
{
    if (!can_restore() || pid <= 0)
        return 0;
    return restore_tree(pid, 0) > 0 ? 0 : -ESRCH;
}
