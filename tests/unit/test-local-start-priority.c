/* Claim bursts hold the pools' refill starts (local-claim-activity.h) and refill starts run at
 * a lower priority until their container is up (local-start-priority.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local/reconcile/local-claim-activity.h"
#include "local/reconcile/local-start-priority.h"
#include "unit.h"

TEST(claim_activity_holds_only_warm_members)
{
    usec_t now = now_usec(CLOCK_MONOTONIC);
    /* Never marked: nothing is held. */
    if (local_claim_activity_until() == 0)
        CHECK(local_claim_activity_release(true, now, now) == now);
    local_claim_activity_mark();
    usec_t until = local_claim_activity_until();
    CHECK(until >= now + LOCAL_CLAIM_ACTIVITY_GRACE_USEC);
    now = now_usec(CLOCK_MONOTONIC);
    /* A claim's own (cold) start is never held; a refill waits for the grace. */
    CHECK(local_claim_activity_release(false, now, now) == now);
    CHECK(local_claim_activity_release(true, now, now) == until);
    /* A start queued long ago is released at once: claims never starve the pool. */
    usec_t old = now - LOCAL_CLAIM_ACTIVITY_MAX_HOLD_USEC;
    CHECK(local_claim_activity_release(true, old, now) == now);
    /* Once the grace has passed nothing is held. */
    CHECK(local_claim_activity_release(true, now, until + 1) == until + 1);
}

TEST(claim_activity_only_moves_forward)
{
    local_claim_activity_mark();
    usec_t a = local_claim_activity_until();
    local_claim_activity_mark();
    CHECK(local_claim_activity_until() >= a);
}

/* In a thread of its own: set(true), its nice value, set(false), its nice value. */
typedef struct set_run {
    int (*set)(bool);
    int got[4];
} set_run;

static void *set_and_undo(void *arg)
{
    set_run *r = arg;
    r->got[0] = r->set(true);
    errno = 0;
    r->got[1] = getpriority(PRIO_PROCESS, (id_t)gettid());
    r->got[2] = r->set(false);
    r->got[3] = getpriority(PRIO_PROCESS, (id_t)gettid());
    return NULL;
}

/* set(true) gives `nice` to its thread alone and set(false) undoes it, where it can be undone. */
static void check_per_thread_and_undone(int (*set)(bool), int nice)
{
    int before = getpriority(PRIO_PROCESS, (id_t)gettid());
    set_run r = {set, {0}};
    pthread_t t;
    CHECK_INT_EQ(pthread_create(&t, NULL, set_and_undo, &r), 0);
    pthread_join(t, NULL);
    CHECK_INT_EQ(r.got[0], 0);
    CHECK_INT_EQ(r.got[2], 0);
    if (geteuid() == 0) {
        CHECK_INT_EQ(r.got[1], nice);
        CHECK_INT_EQ(r.got[3], 0);
    } else { /* could not be undone: not done */
        CHECK_INT_EQ(r.got[1], before);
        CHECK_INT_EQ(r.got[3], before);
    }
    /* The calling thread was never touched. */
    CHECK_INT_EQ(getpriority(PRIO_PROCESS, (id_t)gettid()), before);
}

TEST(refill_priority_is_per_thread_and_undone)
{
    check_per_thread_and_undone(local_start_priority_set, LOCAL_START_REFILL_NICE);
}

/* A teardown runs behind a refill's starts, then its thread is back to 0 (for the commit). */
TEST(teardown_priority_is_below_refill_and_undone)
{
    CHECK(LOCAL_TEARDOWN_NICE > LOCAL_START_REFILL_NICE);
    check_per_thread_and_undone(local_teardown_priority_set, LOCAL_TEARDOWN_NICE);
}

static void *sleeper(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

/* A child that inherited the refill's nice value (as a container's processes do from runc),
 * with a second thread and a child of its own: restore brings all of them back to 0. */
TEST(restore_reaches_threads_and_descendants)
{
    if (geteuid() != 0) {
        CHECK_INT_EQ(local_start_priority_restore(getpid()), 0); /* a no-op */
        return;
    }
    int ready[2];
    CHECK_INT_EQ(pipe2(ready, O_CLOEXEC), 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (setpriority(PRIO_PROCESS, 0, LOCAL_START_REFILL_NICE) < 0)
            _exit(1);
        pthread_t t;
        if (pthread_create(&t, NULL, sleeper, NULL) != 0)
            _exit(1);
        pid_t g = fork();
        if (g == 0) {
            pause();
            _exit(0);
        }
        if (write(ready[1], &g, sizeof(g)) != sizeof(g))
            _exit(1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    pid_t grandchild = 0;
    CHECK_INT_EQ(read(ready[0], &grandchild, sizeof(grandchild)), (int)sizeof(grandchild));
    close(ready[0]);
    CHECK(grandchild > 0);
    errno = 0;
    CHECK_INT_EQ(getpriority(PRIO_PROCESS, (id_t)grandchild), LOCAL_START_REFILL_NICE);
    CHECK_INT_EQ(local_start_priority_restore(pid), 0);
    CHECK_INT_EQ(getpriority(PRIO_PROCESS, (id_t)pid), 0);
    CHECK_INT_EQ(getpriority(PRIO_PROCESS, (id_t)grandchild), 0);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    int threads = 0, restored = 0;
    DIR *d = opendir(path);
    CHECK(d != NULL);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        threads++;
        restored += getpriority(PRIO_PROCESS, (id_t)atoi(de->d_name)) == 0;
    }
    if (d)
        closedir(d);
    CHECK_INT_EQ(threads, 2);
    CHECK_INT_EQ(restored, 2);
    kill(grandchild, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* The grandchild was reparented (to init or a subreaper): not ours to reap. */
}
