/* Minimal gRPC client for bench-grpc.py (HTTP/2 prior knowledge on nghttp2, hand-encoded
 * requests), so the daemon is measured without a Python client's overhead.
 *   grpc-bench-client PORT execute N   -> per iteration: Execute(`true`) round trip and a direct
 *                                          posix_spawn+waitpid of /bin/true, in microseconds
 *   grpc-bench-client PORT noop N       -> per iteration: the round trip of an RPC that spawns
 *                                          nothing (SendSignal to an unknown process: NOT_FOUND),
 *                                          then Execute(`true`) and the floor as above: the
 *                                          transport's share of an Execute, paired
 *   grpc-bench-client PORT stream BYTES -> Start(head -c BYTES /dev/zero): MB/s of DATA received */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct body {
    uint8_t buf[256];
    size_t len, off;
} body;

static int fd;
static int done;
static unsigned long long data_bytes;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    body *b = src->ptr;
    size_t n = b->len - b->off < len ? b->len - b->off : len;
    memcpy(buf, b->buf + b->off, n);
    b->off += n;
    if (b->off == b->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t len,
                   void *ud)
{
    data_bytes += len;
    nghttp2_session_consume(s, id, len);
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
    done = 1;
    return 0;
}

static void pump(nghttp2_session *s)
{
    static uint8_t rbuf[1 << 18];
    while (!done) {
        const uint8_t *p;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(s, &p)) > 0)
            if (write(fd, p, (size_t)n) != n)
                exit(2);
        if (done)
            break;
        ssize_t r = read(fd, rbuf, sizeof(rbuf));
        if (r <= 0 || nghttp2_session_mem_recv(s, rbuf, (size_t)r) < 0)
            exit(3);
    }
    const uint8_t *p;
    ssize_t n;
    while ((n = nghttp2_session_mem_send(s, &p)) > 0)
        if (write(fd, p, (size_t)n) != n)
            exit(2);
}

/* Appends a length-delimited field. */
static size_t put(uint8_t *out, int field, const void *data, size_t len)
{
    out[0] = (uint8_t)(field << 3 | 2);
    out[1] = (uint8_t)len; /* all our fields are < 128 bytes */
    memcpy(out + 2, data, len);
    return 2 + len;
}

static void make_body(body *b, char **argv, int argc)
{
    uint8_t cfg[200], req[220];
    size_t n = 0;
    for (int i = 0; i < argc; i++)
        n += put(cfg + n, 1, argv[i], strlen(argv[i]));
    size_t m = put(req, 1, cfg, n);
    b->buf[0] = 0;
    b->buf[1] = b->buf[2] = b->buf[3] = 0;
    b->buf[4] = (uint8_t)m;
    memcpy(b->buf + 5, req, m);
    b->len = 5 + m;
    b->off = 0;
}

static void call(nghttp2_session *s, const char *path, body *b)
{
    nghttp2_nv nv[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":authority", (uint8_t *)"bench", 10, 5, 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
        {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, 0},
    };
    nghttp2_data_provider prd = {.source.ptr = b, .read_callback = body_read};
    done = 0;
    if (nghttp2_submit_request(s, NULL, nv, 6, &prd, NULL) < 0)
        exit(4);
    pump(s);
}

static double spawn_true(void)
{
    double t = now_us();
    pid_t pid;
    char *argv[] = {"/bin/true", NULL};
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
        exit(5);
    waitpid(pid, NULL, 0);
    return now_us() - t;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return 2;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    nghttp2_session_callbacks *cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
    nghttp2_session *s;
    nghttp2_option *opt;
    nghttp2_option_new(&opt);
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_session_client_new2(&s, cbs, NULL, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16 << 20}};
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, 1);
    nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, 64 << 20);

    body b;
    if (strcmp(argv[2], "execute") == 0) {
        char *cmd[] = {"true"};
        int n = atoi(argv[3]);
        for (int i = 0; i < n + 50; i++) {
            make_body(&b, cmd, 1);
            double t = now_us();
            call(s, "/process.v1.ProcessService/Execute", &b);
            double e = now_us() - t;
            double f = spawn_true();
            if (i >= 50)
                printf("%.1f %.1f\n", e, f);
        }
    } else if (strcmp(argv[2], "noop") == 0) {
        char *cmd[] = {"true"};
        /* SendSignalRequest{process_id: 999999, signal: 15}, hand-encoded */
        static const uint8_t sig[] = {0x08, 0xbf, 0x84, 0x3d, 0x10, 0x0f};
        int n = atoi(argv[3]);
        for (int i = 0; i < n + 50; i++) {
            body nb = {.len = 5 + sizeof(sig)};
            nb.buf[4] = sizeof(sig);
            memcpy(nb.buf + 5, sig, sizeof(sig));
            double t = now_us();
            call(s, "/process.v1.ProcessService/SendSignal", &nb);
            double rt = now_us() - t;
            make_body(&b, cmd, 1);
            t = now_us();
            call(s, "/process.v1.ProcessService/Execute", &b);
            double e = now_us() - t;
            double f = spawn_true();
            if (i >= 50)
                printf("%.1f %.1f %.1f\n", e, f, rt);
        }
    } else {
        char *cmd[] = {"head", "-c", argv[3], "/dev/zero"};
        make_body(&b, cmd, 4);
        double t = now_us();
        call(s, "/process.v1.ProcessService/Start", &b);
        double dt = now_us() - t;
        printf("%.1f %llu\n", (double)data_bytes / dt, data_bytes);
    }
    nghttp2_session_del(s);
    close(fd);
    return 0;
}
