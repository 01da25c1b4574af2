/* See local-logs.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/runtime/local-logs.h"
#include "shared/log.h"

#define DEFAULT_MAX (1024 * 1024)

typedef struct log_pipe {
    char *uid, *path;
    int fd;       /* read end */
    int out;      /* the log file, or -1 */
    int times;    /* <path>.times: "OFFSET UNIX_NS" per chunk appended, or -1 */
    off_t times_size;
    int64_t times_last; /* the time of the last record */
    off_t size;   /* of the log file */
    unsigned gen; /* epoll data: tells a replaced pipe's late event apart */
} log_pipe;

struct local_logs {
    pthread_mutex_t lock;
    pthread_t thread;
    int epoll_fd, stop_fd;
    size_t max;
    log_pipe *v;
    size_t n;
    unsigned next_gen;
};

static void pipe_close(log_pipe *p)
{
    if (p->fd >= 0)
        close(p->fd); /* also leaves the epoll set */
    if (p->out >= 0)
        close(p->out);
    if (p->times >= 0)
        close(p->times);
    free(p->uid);
    free(p->path);
}

static int open_out(log_pipe *p, bool truncate)
{
    int fl = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (truncate ? O_TRUNC : 0);
    p->out = open(p->path, fl, 0600);
    struct stat st;
    p->size = p->out >= 0 && fstat(p->out, &st) == 0 ? st.st_size : 0;
    if (p->out < 0)
        return -errno;
    _cleanup_free_ char *tp = NULL;
    if (asprintf(&tp, "%s.times", p->path) >= 0)
        p->times = open(tp, fl, 0600); /* without it, lines have no time: not an error */
    p->times_size = p->times >= 0 && fstat(p->times, &st) == 0 ? st.st_size : 0;
    p->times_last = 0;
    return 0;
}

/* path + suffix renamed to path + to_suffix, or the target removed when there is no source. */
static void move_or_drop(const char *path, const char *suffix, const char *to_suffix)
{
    _cleanup_free_ char *from = NULL, *to = NULL;
    if (asprintf(&from, "%s%s", path, suffix) < 0 || asprintf(&to, "%s%s", path, to_suffix) < 0)
        return;
    if (rename(from, to) < 0 && errno == ENOENT)
        (void)unlink(to);
}

/* A new run of the container: what the last run wrote becomes <path>.previous (and .previous.1,
 * with their .times), which `asb logs --previous` reads; an empty last run leaves the one before
 * it in place. */
static void keep_previous(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0 || st.st_size == 0)
        return;
    static const char *const sfx[][2] = {{"", ".previous"},
                                         {".times", ".previous.times"},
                                         {".1", ".previous.1"},
                                         {".1.times", ".previous.1.times"}};
    for (size_t i = 0; i < ELEMENTSOF(sfx); i++)
        move_or_drop(path, sfx[i][0], sfx[i][1]);
}

/* The record of when the chunk appended next came. Bounded: at most one a millisecond (a flood of
 * small reads shares one), and the file no larger than the log's cap (later lines then take the
 * last time recorded). Locked. */
static void record_time(local_logs *l, log_pipe *p)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    if (p->times < 0 || now - p->times_last < 1000000 || (size_t)p->times_size >= l->max)
        return;
    char rec[64];
    int k = snprintf(rec, sizeof(rec), "%lld %lld\n", (long long)p->size, (long long)now);
    if (write(p->times, rec, (size_t)k) != k) { /* a torn record would mislead readers */
        close(p->times);
        p->times = -1;
        return;
    }
    p->times_size += k;
    p->times_last = now;
}

/* Appends, rotating first when the cap would be passed. Locked. */
static void append(local_logs *l, log_pipe *p, const char *buf, size_t n)
{
    if (p->out < 0)
        return;
    if ((size_t)p->size + n > l->max) {
        move_or_drop(p->path, "", ".1");
        move_or_drop(p->path, ".times", ".1.times");
        close(p->out);
        if (p->times >= 0)
            close(p->times);
        p->times = -1;
        if (open_out(p, true) < 0)
            return;
        if (n > l->max) { /* one read larger than the cap: keep its end */
            buf += n - l->max;
            n = l->max;
        }
    }
    record_time(l, p);
    ssize_t w = write(p->out, buf, n);
    if (w > 0)
        p->size += w;
}

static void *logs_thread(void *arg)
{
    local_logs *l = arg;
    char *buf = malloc(65536);
    if (!buf)
        return NULL;
    for (;;) {
        struct epoll_event evs[16];
        int k = epoll_wait(l->epoll_fd, evs, ELEMENTSOF(evs), -1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            break;
        bool stop = false;
        pthread_mutex_lock(&l->lock);
        for (int i = 0; i < k; i++) {
            if (evs[i].data.u64 == 0) {
                stop = true;
                continue;
            }
            log_pipe *p = NULL;
            for (size_t j = 0; j < l->n; j++)
                if (l->v[j].gen == (unsigned)evs[i].data.u64)
                    p = &l->v[j];
            if (!p)
                continue;
            ssize_t r = read(p->fd, buf, 65536);
            if (r > 0)
                append(l, p, buf, (size_t)r);
            else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                /* Every writer is gone: the container's processes exited. */
                pipe_close(p);
                *p = l->v[--l->n];
            }
        }
        pthread_mutex_unlock(&l->lock);
        if (stop)
            break;
    }
    free(buf);
    return NULL;
}

int local_logs_start(size_t max_bytes, local_logs **ret)
{
    local_logs *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    pthread_mutex_init(&l->lock, NULL);
    l->max = max_bytes ? max_bytes : DEFAULT_MAX;
    l->next_gen = 1;
    l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    int k = 0;
    if (l->epoll_fd < 0 || l->stop_fd < 0 ||
        epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, l->stop_fd, &ev) < 0)
        k = -errno;
    else if ((k = -pthread_create(&l->thread, NULL, logs_thread, l)) == 0) {
        *ret = l;
        return 0;
    }
    if (l->epoll_fd >= 0)
        close(l->epoll_fd);
    if (l->stop_fd >= 0)
        close(l->stop_fd);
    pthread_mutex_destroy(&l->lock);
    free(l);
    return k;
}

local_logs *local_logs_stop(local_logs *l)
{
    if (!l)
        return NULL;
    uint64_t one = 1;
    if (write(l->stop_fd, &one, sizeof(one)) == sizeof(one))
        pthread_join(l->thread, NULL);
    for (size_t i = 0; i < l->n; i++)
        pipe_close(&l->v[i]);
    free(l->v);
    close(l->epoll_fd);
    close(l->stop_fd);
    pthread_mutex_destroy(&l->lock);
    free(l);
    return NULL;
}

int local_logs_add(local_logs *l, const char *uid, int fd, const char *path, bool truncate)
{
    if (!l) {
        close(fd);
        return -EINVAL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        close(fd);
        return -errno;
    }
    log_pipe p = {.uid = strdup(uid), .path = strdup(path), .fd = fd, .out = -1, .times = -1};
    if (!p.uid || !p.path) {
        pipe_close(&p);
        return -ENOMEM;
    }
    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].path, path) == 0) {
            pipe_close(&l->v[i]);
            l->v[i] = l->v[--l->n];
            break;
        }
    if (truncate)
        keep_previous(path);
    int k = open_out(&p, truncate);
    if (k < 0)
        log_warn("cannot open the sandbox log", "path", path, "error", strerror(-k));
    p.gen = l->next_gen++;
    if (!p.gen)
        p.gen = l->next_gen++;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = p.gen};
    log_pipe *v = realloc(l->v, (l->n + 1) * sizeof(*v));
    if (!v || epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        k = v ? -errno : -ENOMEM;
        if (v)
            l->v = v;
        pthread_mutex_unlock(&l->lock);
        pipe_close(&p);
        return k;
    }
    l->v = v;
    l->v[l->n++] = p;
    pthread_mutex_unlock(&l->lock);
    return 0;
}

int local_logs_adopt(local_logs *l, const char *uid, pid_t pid, int proc_fd, const char *path)
{
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/%ld/fd/%d", (long)pid, proc_fd);
    /* O_PATH first: nothing is opened for reading before it is known to be a pipe. */
    _cleanup_close_ int pfd = open(proc, O_PATH | O_CLOEXEC);
    struct stat st;
    if (pfd < 0 || fstat(pfd, &st) < 0)
        return -errno;
    if (!S_ISFIFO(st.st_mode))
        return -ENOTSUP;
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
    int fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return local_logs_add(l, uid, fd, path, false);
}
