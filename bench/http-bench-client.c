#define _GNU_SOURCE
/* Closed-loop HTTP/1.1 load generator for bench-router.py: C connections (one thread each,
 * keep-alive), each sending the same GET and reading the Content-Length response, for D seconds.
 * Target: "tcp:HOST:PORT" or "unix:PATH". Prints "requests seconds errors p50_us p99_us". */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *target;
static char request[4096];
static size_t request_len;
static double duration;
static volatile int stop_flag;

typedef struct result {
    long n, errors;
    unsigned *lat; /* microseconds */
    size_t lat_n, lat_cap;
} result;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int dial(void)
{
    if (strncmp(target, "unix:", 5) == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", target + 5);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            close(fd);
            return -1;
        }
        return fd;
    }
    char host[256];
    snprintf(host, sizeof(host), "%s", target + 4);
    char *colon = strrchr(host, ':');
    *colon = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads one response; returns 0 or -1. */
static int read_response(int fd, char *buf, size_t cap)
{
    size_t have = 0;
    char *end = NULL;
    while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
        if (have == cap)
            return -1;
        ssize_t k = read(fd, buf + have, cap - have);
        if (k <= 0)
            return -1;
        have += (size_t)k;
    }
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0)
        return -1;
    size_t head = (size_t)(end - buf) + 4;
    char *cl = memmem(buf, head, "Content-Length: ", 16);
    if (!cl)
        cl = memmem(buf, head, "content-length: ", 16);
    long len = cl ? atol(cl + 16) : 0;
    long body = (long)(have - head);
    while (body < len) {
        ssize_t k = read(fd, buf, cap);
        if (k <= 0)
            return -1;
        body += k;
    }
    return 0;
}

static void *worker(void *p)
{
    result *r = p;
    char buf[65536];
    int fd = dial();
    while (!stop_flag) {
        if (fd < 0) {
            r->errors++;
            usleep(1000);
            fd = dial();
            continue;
        }
        double t0 = now();
        if (write(fd, request, request_len) != (ssize_t)request_len ||
            read_response(fd, buf, sizeof(buf)) < 0) {
            r->errors++;
            close(fd);
            fd = -1;
            continue;
        }
        r->n++;
        if (r->lat_n == r->lat_cap) {
            r->lat_cap = r->lat_cap ? 2 * r->lat_cap : 4096;
            r->lat = realloc(r->lat, r->lat_cap * sizeof(unsigned));
        }
        r->lat[r->lat_n++] = (unsigned)((now() - t0) * 1e6);
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s TARGET CONNS SECONDS PATH [HEADER...]\n", argv[0]);
        return 2;
    }
    target = argv[1];
    int conns = atoi(argv[2]);
    duration = atof(argv[3]);
    int n = snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: bench\r\n", argv[4]);
    for (int i = 5; i < argc; i++)
        n += snprintf(request + n, sizeof(request) - (size_t)n, "%s\r\n", argv[i]);
    n += snprintf(request + n, sizeof(request) - (size_t)n, "\r\n");
    request_len = (size_t)n;
    pthread_t *t = calloc((size_t)conns, sizeof(*t));
    result *r = calloc((size_t)conns, sizeof(*r));
    double t0 = now();
    for (int i = 0; i < conns; i++)
        pthread_create(&t[i], NULL, worker, &r[i]);
    usleep((useconds_t)(duration * 1e6));
    stop_flag = 1;
    long total = 0, errors = 0;
    size_t lat_n = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(t[i], NULL);
        total += r[i].n;
        errors += r[i].errors;
        lat_n += r[i].lat_n;
    }
    double secs = now() - t0;
    unsigned *all = malloc((lat_n + 1) * sizeof(unsigned));
    size_t k = 0;
    for (int i = 0; i < conns; i++) {
        memcpy(all + k, r[i].lat, r[i].lat_n * sizeof(unsigned));
        k += r[i].lat_n;
    }
    qsort(all, lat_n, sizeof(unsigned), cmp);
    printf("%ld %.3f %ld %u %u\n", total, secs, errors, lat_n ? all[lat_n / 2] : 0,
           lat_n ? all[lat_n * 99 / 100] : 0);
    return 0;
}
