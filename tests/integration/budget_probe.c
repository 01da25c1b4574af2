/* The kernel-budget attacks of test_escape_budgets.py, compiled on the host (the `host` image
 * shares its libc) and run inside a sandbox; `check` also runs on the host itself.
 *
 *   budget-probe ATTACK [ARGS] MARKER  takes a per-user kernel budget until the kernel refuses,
 *                                      prints "taken=N errno=E", writes the same line to MARKER
 *                                      and holds what it took until MARKER.release exists (60 s
 *                                      at most): the test checks the host and a witness meanwhile
 *   budget-probe check                 takes one of each budget and gives it back: prints
 *                                      "inotify=E mqueue=E sigqueue=E timer=E pipe=E" (0: it
 *                                      worked; pipe: ENOBUFS for a one-page pipe)
 *
 * Attacks: inotify, mqueue, sigqueue, timers, pipes (until a new pipe gets one page), aio
 * (io_setup once), tcpmem PAIRS BYTES (loopback
 * TCP pairs whose writers fill the pairs without reading; taken = bytes queued), conns ADDR PORT
 * N (TCP connections held open; taken = connected, errno = the first refusal's), churn ADDR PORT
 * N (the same, each closed at once). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_TAKE 200000L

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static long take_inotify(int *err)
{
    long n = 0;
    while (n < MAX_TAKE && inotify_init1(IN_CLOEXEC) >= 0)
        n++;
    *err = errno;
    return n;
}

/* Queues of 10 messages of 8 KiB (the defaults of msg_max and msgsize_max) until refused. */
static long take_mqueue(int *err)
{
    struct mq_attr a = {.mq_maxmsg = 10, .mq_msgsize = 8192};
    long n = 0;
    char name[64];
    for (; n < 4096; n++) {
        snprintf(name, sizeof(name), "/budget-%d-%ld", (int)getpid(), n);
        if (mq_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600, &a) < 0)
            break;
        mq_unlink(name); /* the queue stays while its descriptor is open */
    }
    *err = errno;
    return n;
}

static long take_sigqueue(int *err)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 1);
    sigprocmask(SIG_BLOCK, &s, NULL);
    long n = 0;
    union sigval v = {0};
    while (n < MAX_TAKE && sigqueue(getpid(), SIGRTMIN + 1, v) == 0)
        n++;
    *err = errno;
    return n;
}

static long take_timers(int *err)
{
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN + 2};
    long n = 0;
    timer_t t;
    while (n < MAX_TAKE && syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &t) == 0)
        n++;
    *err = errno;
    return n;
}

/* Pipes until a new one gets one page instead of 16 (pipe-user-pages-soft reached: the budget
 * of the creating uid); errno 0 then. */
static long take_pipes(int *err)
{
    long n = 0;
    int p[2];
    *err = 0;
    while (n < MAX_TAKE && pipe2(p, O_CLOEXEC) == 0) {
        if (fcntl(p[0], F_GETPIPE_SZ) < 65536)
            return n;
        n++;
    }
    *err = errno;
    return n;
}

static long take_aio(int *err)
{
    unsigned long ctx = 0;
    long r = syscall(SYS_io_setup, 1, &ctx);
    *err = r < 0 ? errno : 0;
    return r == 0;
}

/* fd's connect (non-blocking) or accept, within 1 s; -1 with errno. */
static int ready_within(int fd, short ev)
{
    struct pollfd p = {fd, ev, 0};
    int k = poll(&p, 1, 1000);
    if (k == 1)
        return 0;
    errno = k == 0 ? ETIMEDOUT : errno;
    return -1;
}

/* Fills w (non-blocking) until the kernel takes no more, with a short wait after each refusal
 * for the receiver to take what is in flight (a bounded number of times: under memory pressure
 * poll may say writable while send still refuses). */
static void fill(int w, int *err)
{
    static char chunk[65536];
    for (int waits = 0; waits < 5;) {
        ssize_t k = send(w, chunk, sizeof(chunk), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0)
            continue;
        if (k < 0 && errno != EAGAIN) {
            if (!*err)
                *err = errno;
            return;
        }
        struct pollfd p = {w, POLLOUT, 0};
        poll(&p, 1, 50);
        waits++;
    }
}

/* Loopback TCP pairs, each writer filling its pair while nobody reads. */
static long take_tcpmem(int pairs, int bytes, int *err)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    *err = 0;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 128) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
        *err = errno;
        return 0;
    }
    long queued = 0;
    for (int i = 0; i < pairs; i++) {
        int w = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), rd = -1;
        if (w >= 0)
            setsockopt(w, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
        if (w < 0 || (connect(w, (struct sockaddr *)&sa, sizeof(sa)) < 0 &&
                      (errno != EINPROGRESS || ready_within(w, POLLOUT) < 0)) ||
            ready_within(lfd, POLLIN) < 0 ||
            (rd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
            if (!*err)
                *err = errno;
            break;
        }
        setsockopt(rd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
        fill(w, err);
        int out = 0, in = 0;
        ioctl(w, SIOCOUTQ, &out);
        ioctl(rd, SIOCINQ, &in);
        queued += (long)out + in;
    }
    return queued;
}

/* N TCP connections to ADDR:PORT, each held open (hold) or closed at once (conntrack then keeps
 * it in TIME_WAIT). */
static long take_conns(const char *addr, int port, int n, int hold, int *err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    long ok = 0;
    *err = 0;
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct timeval tv = {2, 0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            ok++;
        else if (!*err)
            *err = errno;
        if (!hold && fd >= 0)
            close(fd);
    }
    return ok;
}

/* One of each budget, given back at once; the errno of each (0: it worked). */
static int check(void)
{
    int e_in = 0, e_mq = 0, e_sig = 0, e_tm = 0, e_pipe = 0;
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0)
        e_in = errno;
    else
        close(fd);
    char name[64];
    snprintf(name, sizeof(name), "/budget-check-%d", (int)getpid());
    struct mq_attr a = {.mq_maxmsg = 10, .mq_msgsize = 8192};
    mqd_t q = mq_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600, &a);
    if (q < 0) {
        e_mq = errno;
    } else {
        mq_close(q);
        mq_unlink(name);
    }
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 1);
    sigprocmask(SIG_BLOCK, &s, NULL);
    union sigval v = {0};
    if (sigqueue(getpid(), SIGRTMIN + 1, v) < 0)
        e_sig = errno;
    else
        sigwaitinfo(&s, NULL);
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN + 2};
    timer_t t;
    if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &t) < 0)
        e_tm = errno;
    else
        syscall(SYS_timer_delete, t);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        e_pipe = errno;
    } else {
        e_pipe = fcntl(p[0], F_GETPIPE_SZ) < 65536 ? ENOBUFS : 0; /* one page: over budget */
        close(p[0]);
        close(p[1]);
    }
    printf("inotify=%d mqueue=%d sigqueue=%d timer=%d pipe=%d\n", e_in, e_mq, e_sig, e_tm,
           e_pipe);
    return 0;
}

/* Holds everything taken until MARKER.release exists (60 s at most). */
static void hold(const char *marker, const char *line)
{
    char tmp[4096], release[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", marker);
    snprintf(release, sizeof(release), "%s.release", marker);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fputs(line, f);
        fclose(f);
        rename(tmp, marker);
    }
    struct stat st;
    for (int i = 0; i < 1200 && stat(release, &st) < 0; i++)
        usleep(50000);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 2 && strcmp(argv[1], "check") == 0)
        return check();
    if (argc < 3) {
        fprintf(stderr, "usage: budget-probe ATTACK [ARGS] MARKER | check\n");
        return 2;
    }
    raise_nofile();
    const char *v = argv[1], *marker = argv[argc - 1];
    int err = 0;
    long n;
    if (strcmp(v, "inotify") == 0)
        n = take_inotify(&err);
    else if (strcmp(v, "mqueue") == 0)
        n = take_mqueue(&err);
    else if (strcmp(v, "sigqueue") == 0)
        n = take_sigqueue(&err);
    else if (strcmp(v, "timers") == 0)
        n = take_timers(&err);
    else if (strcmp(v, "pipes") == 0)
        n = take_pipes(&err);
    else if (strcmp(v, "aio") == 0)
        n = take_aio(&err);
    else if (strcmp(v, "tcpmem") == 0 && argc == 5)
        n = take_tcpmem(atoi(argv[2]), atoi(argv[3]), &err);
    else if ((strcmp(v, "conns") == 0 || strcmp(v, "churn") == 0) && argc == 6)
        n = take_conns(argv[2], atoi(argv[3]), atoi(argv[4]), strcmp(v, "conns") == 0, &err);
    else {
        fprintf(stderr, "budget-probe: unknown attack %s\n", v);
        return 2;
    }
    char line[128];
    snprintf(line, sizeof(line), "taken=%ld errno=%d\n", n, err);
    fputs(line, stdout);
    hold(marker, line);
    return 0;
}
