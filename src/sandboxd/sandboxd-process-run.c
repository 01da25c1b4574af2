#include "sandboxd/sandboxd-process-run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-process.h"

#define START_WAIT_DELAY_MS 5000   /* output drain after a Start child is reaped */
#define EXECUTE_WAIT_DELAY_MS 10000 /* same for Execute (then "WaitDelay expired") */
#define PTY_GRACE_MS 25             /* a silent pty after reaping counts as drained after this */
#define PAUSED_RECHECK_MS 250       /* the drain bound does not run out while paused */
#define READS_PER_WAKEUP 16         /* then the loop serves other calls */
#define EXECUTE_READ (64 * 1024)
#define CHUNK_HEADROOM 11 /* 5-byte gRPC prefix + field tag + up to 5 varint bytes */

enum { IO_OUT, IO_ERR, IO_IN, IO_N };

typedef struct proc_io {
    uv_poll_t poll;
    proc *p;
    int fd; /* -1 once closed */
    int kind;
    int events;
} proc_io;

typedef struct stdin_req {
    struct stdin_req *next;
    grpc_call *call; /* NULL once the WriteStdin call went away */
    uint8_t *data;
    size_t len, off;
    bool eof;
} stdin_req;

struct proc {
    child ch; /* first: the registry hands back child pointers */
    grpc_server *server;
    grpc_call *call;
    bool execute, pty;
    proc_io io[IO_N];
    int in_fd; /* stdin writer (the pty master for a pty), -1 once closed */
    bool eof_queued;
    stdin_req *in_head, *in_tail;
    bool paused;
    int status;
    bool wait_expired;
    usec_t reaped_at;
    uv_timer_t timer;
    unsigned handles; /* open libuv handles */
    bool done;
    size_t chunk;
    /* Execute capture: at most cap_limit bytes of stdout+stderr are kept; seen counts every
     * byte the command wrote (the rest is drained to /dev/null so it never blocks on a pipe). */
    uint8_t *cap[2];
    size_t cap_len[2], cap_size[2];
    size_t cap_limit;
    uint64_t seen[2];
};

static void proc_check_done(proc *p);
static void on_io(uv_poll_t *h, int status, int events);

static void proc_free(proc *p)
{
    while (p->in_head) {
        stdin_req *r = p->in_head;
        p->in_head = r->next;
        free(r->data);
        free(r);
    }
    free(p->cap[0]);
    free(p->cap[1]);
    free(p);
}

static void handle_closed(uv_handle_t *h)
{
    proc *p = h->data;
    if (--p->handles == 0 && p->done)
        proc_free(p);
}

static void io_close(proc *p, proc_io *io)
{
    if (io->fd < 0)
        return;
    uv_close((uv_handle_t *)&io->poll, handle_closed);
    if (io->fd == p->in_fd)
        p->in_fd = -1;
    close(io->fd);
    io->fd = -1;
}

static void io_update(proc *p, proc_io *io)
{
    if (io->fd < 0)
        return;
    int ev = 0;
    if (io->kind != IO_IN && !p->paused)
        ev |= UV_READABLE;
    if (io->fd == p->in_fd && p->in_head)
        ev |= UV_WRITABLE;
    if (ev == io->events)
        return;
    io->events = ev;
    if (ev)
        uv_poll_start(&io->poll, ev, on_io);
    else
        uv_poll_stop(&io->poll);
}

void proc_update(proc *p)
{
    for (int i = 0; i < IO_N; i++)
        io_update(p, &p->io[i]);
}

/* ---- stdin queue ---- */

static void stdin_answer(stdin_req *r, int err, const char *what)
{
    if (!r->call)
        return;
    grpc_call *c = r->call;
    r->call = NULL;
    c->data = NULL;
    if (err == 0) {
        Process__V1__WriteStdinResponse resp = PROCESS__V1__WRITE_STDIN_RESPONSE__INIT;
        grpc_call_send(c, &resp.base);
        grpc_call_finish(c, STATUS_OK, NULL);
        return;
    }
    char msg[160];
    snprintf(msg, sizeof(msg), "%s: %s", what, strerror(err));
    grpc_call_finish(c, STATUS_INTERNAL, msg);
}

static void stdin_pop(proc *p, int err, const char *what)
{
    stdin_req *r = p->in_head;
    p->in_head = r->next;
    if (!p->in_head)
        p->in_tail = NULL;
    stdin_answer(r, err, what);
    free(r->data);
    free(r);
}

static void stdin_close(proc *p)
{
    if (p->pty)
        io_close(p, &p->io[IO_OUT]);
    else
        io_close(p, &p->io[IO_IN]);
    p->in_fd = -1;
}

static void stdin_pump(proc *p)
{
    while (p->in_head) {
        stdin_req *r = p->in_head;
        if (r->eof) {
            stdin_close(p);
            stdin_pop(p, 0, NULL);
            continue;
        }
        if (p->in_fd < 0) {
            stdin_pop(p, EBADF, "failed to write stdin: write |1");
            continue;
        }
        ssize_t n = write(p->in_fd, r->data + r->off, r->len - r->off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                break;
            stdin_pop(p, errno, "failed to write stdin: write |1");
            continue;
        }
        r->off += (size_t)n;
        if (r->off == r->len)
            stdin_pop(p, 0, NULL);
    }
    proc_update(p);
    proc_check_done(p);
}

int proc_stdin_write(proc *p, grpc_call *call, const uint8_t *data, size_t len, bool eof,
                     api_error *err)
{
    if (eof) {
        if (p->eof_queued)
            return api_error_set(err, STATUS_INTERNAL,
                                 "failed to close stdin: close |1: file already closed");
        p->eof_queued = true;
    } else if (p->eof_queued || p->in_fd < 0) {
        return api_error_set(err, STATUS_INTERNAL,
                             "failed to write stdin: write |1: file already closed");
    }
    stdin_req *r = calloc(1, sizeof(*r));
    if (!r || (len && !(r->data = malloc(len)))) {
        free(r);
        return api_error_set(err, STATUS_INTERNAL, "out of memory");
    }
    if (len)
        memcpy(r->data, data, len);
    r->len = len;
    r->eof = eof;
    r->call = call;
    call->data = r;
    if (p->in_tail)
        p->in_tail->next = r;
    else
        p->in_head = r;
    p->in_tail = r;
    if (p->in_head == r)
        stdin_pump(p);
    return 0;
}

void proc_stdin_cancel(grpc_call *call)
{
    stdin_req *r = call->data;
    if (r)
        r->call = NULL;
    call->data = NULL;
}

/* ---- output ---- */

static size_t varint_len(size_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Frames buf[CHUNK_HEADROOM..+n) as a StartResponse{stdout|stderr} and queues it. */
static void send_chunk(proc *p, int kind, uint8_t *chunk, size_t n)
{
    if (!p->call) {
        free(chunk);
        return;
    }
    size_t vl = varint_len(n), msg_len = 1 + vl + n;
    size_t off = CHUNK_HEADROOM - (GRPC_FRAME_HEADER + 1 + vl);
    uint8_t *h = chunk + off;
    grpc_frame_header(h, msg_len);
    h[5] = kind == IO_OUT ? 0x12 : 0x1a; /* field 2 or 3, wire type 2 */
    size_t v = n;
    for (size_t i = 0; i < vl; i++) {
        h[6 + i] = (uint8_t)((v & 0x7f) | (i + 1 < vl ? 0x80 : 0));
        v >>= 7;
    }
    grpc_call_send_framed(p->call, chunk, off, GRPC_FRAME_HEADER + msg_len);
    if (grpc_call_pending(p->call) > GRPC_CALL_HIGH_WATER) {
        p->paused = true;
        proc_update(p);
    }
}

static size_t capture_room(const proc *p)
{
    size_t used = p->cap_len[0] + p->cap_len[1];
    return used < p->cap_limit ? p->cap_limit - used : 0;
}

/* Keeps what fits under cap_limit of data[0..n) and counts all of it. */
static int capture(proc *p, int kind, const uint8_t *data, size_t n)
{
    p->seen[kind] += n;
    n = MIN(n, capture_room(p));
    if (n == 0)
        return 0;
    if (p->cap_len[kind] + n > p->cap_size[kind]) {
        size_t sz = MAX(p->cap_size[kind] * 2, p->cap_len[kind] + n);
        sz = MIN(sz, p->cap_len[kind] + capture_room(p));
        uint8_t *b = realloc(p->cap[kind], sz);
        if (!b)
            return -ENOMEM;
        p->cap[kind] = b;
        p->cap_size[kind] = sz;
    }
    memcpy(p->cap[kind] + p->cap_len[kind], data, n);
    p->cap_len[kind] += n;
    return 0;
}

static void io_eof(proc *p, proc_io *io)
{
    io_close(p, io);
    proc_check_done(p);
}

static bool pty_grace_over(const proc *p)
{
    return p->ch.reaped && now_usec(CLOCK_MONOTONIC) - p->reaped_at >= PTY_GRACE_MS * USEC_PER_MSEC;
}

/* Output past the Execute cap: moved from the pipe to /dev/null without a copy (splice), or read
 * and dropped where splice is refused. Loop thread only. */
static ssize_t discard(int fd, uint8_t *scratch, size_t size)
{
    static int devnull = -2;
    if (devnull == -2)
        devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) {
        ssize_t n = splice(fd, NULL, devnull, NULL, 1u << 20, SPLICE_F_NONBLOCK);
        if (n >= 0 || errno != EINVAL)
            return n;
    }
    return read(fd, scratch, size);
}

static void read_pump(proc *p, proc_io *io)
{
    static uint8_t xbuf[EXECUTE_READ];
    for (int i = 0; i < READS_PER_WAKEUP && io->fd >= 0 && !p->paused; i++) {
        uint8_t *block = NULL;
        ssize_t n;
        if (p->execute) {
            if (capture_room(p) > 0)
                n = read(io->fd, xbuf, sizeof(xbuf));
            else if ((n = discard(io->fd, xbuf, sizeof(xbuf))) > 0) {
                p->seen[io->kind] += (uint64_t)n;
                continue;
            }
        } else {
            block = malloc(CHUNK_HEADROOM + p->chunk);
            if (!block)
                return;
            n = read(io->fd, block + CHUNK_HEADROOM, p->chunk);
        }
        if (n > 0) {
            if (p->execute) {
                if (capture(p, io->kind, xbuf, (size_t)n) < 0)
                    io_eof(p, io);
            } else {
                send_chunk(p, io->kind, block, (size_t)n);
            }
            continue;
        }
        int e = n < 0 ? errno : 0;
        free(block);
        if (e == EINTR)
            continue;
        if (e == EAGAIN) {
            if (p->pty && pty_grace_over(p))
                io_eof(p, io);
            break;
        }
        io_eof(p, io); /* EOF, or EIO once the pty slave is gone */
    }
}

static void on_io(uv_poll_t *h, int status, int events)
{
    proc_io *io = (proc_io *)((char *)h - offsetof(proc_io, poll));
    proc *p = io->p;
    if (io->fd == p->in_fd && p->in_head && (status < 0 || (events & UV_WRITABLE)))
        stdin_pump(p);
    if (io->fd >= 0 && io->kind != IO_IN && (status < 0 || (events & (UV_READABLE | UV_DISCONNECT))))
        read_pump(p, io);
}

/* ---- exit ---- */

static void close_outputs(proc *p)
{
    io_close(p, &p->io[IO_OUT]);
    io_close(p, &p->io[IO_ERR]);
}

static void on_timer(uv_timer_t *t)
{
    proc *p = t->data;
    if (p->done)
        return;
    if (p->paused) {
        /* The bound is for grandchildren holding the output open, not for a slow client: while
         * the client has not taken what we read, the rest waits in the pipe/pty. */
        uv_timer_start(&p->timer, on_timer, PAUSED_RECHECK_MS, 0);
        return;
    }
    if (p->pty && now_usec(CLOCK_MONOTONIC) - p->reaped_at < START_WAIT_DELAY_MS * USEC_PER_MSEC) {
        /* A pty whose slave a grandchild still holds: drained once a read finds it empty. */
        if (p->io[IO_OUT].fd >= 0 && !p->paused)
            read_pump(p, &p->io[IO_OUT]);
        if (!p->done)
            uv_timer_start(&p->timer, on_timer, PTY_GRACE_MS, 0);
        return;
    }
    /* A last look before cutting: take what is already buffered. */
    for (int i = IO_OUT; i <= IO_ERR && !p->done; i++)
        if (p->io[i].fd >= 0)
            read_pump(p, &p->io[i]);
    if (p->done)
        return;
    if (p->paused) {
        uv_timer_start(&p->timer, on_timer, PAUSED_RECHECK_MS, 0);
        return;
    }
    p->wait_expired = true;
    close_outputs(p);
    proc_check_done(p);
}

static void on_child_exit(child *c, int status)
{
    proc *p = (proc *)c;
    p->status = status;
    p->reaped_at = now_usec(CLOCK_MONOTONIC);
    if (p->pty) {
        uv_timer_start(&p->timer, on_timer, PTY_GRACE_MS, 0);
        if (p->io[IO_OUT].fd >= 0 && !p->paused)
            read_pump(p, &p->io[IO_OUT]);
    } else if (p->io[IO_OUT].fd >= 0 || p->io[IO_ERR].fd >= 0) {
        uv_timer_start(&p->timer, on_timer, p->execute ? EXECUTE_WAIT_DELAY_MS : START_WAIT_DELAY_MS,
                       0);
    }
    proc_check_done(p);
}

static void proc_release(proc *p)
{
    p->done = true;
    p->call = NULL;
    p->ch.id = 0;
    close_outputs(p);
    io_close(p, &p->io[IO_IN]);
    while (p->in_head)
        stdin_pop(p, EPIPE, "failed to write stdin: write |1");
    if (!uv_is_closing((uv_handle_t *)&p->timer))
        uv_close((uv_handle_t *)&p->timer, handle_closed);
}

/* Output past the cap is reported in trailing metadata: sandboxd-output-truncated: true and the
 * byte counts the command wrote, sandboxd-stdout-bytes / sandboxd-stderr-bytes. */
static void report_truncation(proc *p, grpc_call *c)
{
    if (p->seen[0] == p->cap_len[0] && p->seen[1] == p->cap_len[1])
        return;
    char out[24], err[24];
    snprintf(out, sizeof(out), "%" PRIu64, p->seen[0]);
    snprintf(err, sizeof(err), "%" PRIu64, p->seen[1]);
    (void)grpc_call_add_trailer(c, "sandboxd-output-truncated", "true");
    (void)grpc_call_add_trailer(c, "sandboxd-stdout-bytes", out);
    (void)grpc_call_add_trailer(c, "sandboxd-stderr-bytes", err);
}

static void finish_execute(proc *p)
{
    grpc_call *c = p->call;
    int code = process_exit_code(p->status);
    report_truncation(p, c);
    if (p->wait_expired && code == 0) {
        grpc_call_finish(c, STATUS_INTERNAL,
                         "failed to execute command: exec: WaitDelay expired before I/O complete");
        return;
    }
    Process__V1__ExecuteResponse resp = PROCESS__V1__EXECUTE_RESPONSE__INIT;
    resp.exit_code = code;
    resp.stdout = (ProtobufCBinaryData){p->cap_len[0], p->cap[0]};
    resp.stderr = (ProtobufCBinaryData){p->cap_len[1], p->cap[1]};
    if (grpc_call_send(c, &resp.base) < 0)
        grpc_call_finish(c, STATUS_INTERNAL, "failed to send response");
    else
        grpc_call_finish(c, STATUS_OK, NULL);
}

static void proc_check_done(proc *p)
{
    if (p->done || !p->ch.reaped || p->io[IO_OUT].fd >= 0 || p->io[IO_ERR].fd >= 0)
        return;
    if (p->call) {
        if (p->execute) {
            finish_execute(p);
        } else {
            Process__V1__ExitEvent ev = PROCESS__V1__EXIT_EVENT__INIT;
            Process__V1__StartResponse resp = PROCESS__V1__START_RESPONSE__INIT;
            ev.exit_code = process_exit_code(p->status);
            resp.event_case = PROCESS__V1__START_RESPONSE__EVENT_EXIT;
            resp.exit = &ev;
            if (grpc_call_send(p->call, &resp.base) < 0)
                grpc_call_finish(p->call, STATUS_INTERNAL, "failed to send exit event");
            else
                grpc_call_finish(p->call, STATUS_OK, NULL);
        }
        p->call->data = NULL;
    }
    process_table_remove(grpc_server_procs(p->server), &p->ch);
    proc_release(p);
}

static void on_child_destroy(child *c)
{
    proc *p = (proc *)c;
    if (p->call) {
        p->call->data = NULL;
        grpc_call_finish(p->call, STATUS_UNAVAILABLE, "server stopped");
    }
    proc_release(p);
}

static const child_ops proc_child_ops = {.on_exit = on_child_exit, .destroy = on_child_destroy};

static void io_init(proc *p, int kind, int fd)
{
    proc_io *io = &p->io[kind];
    io->p = p;
    io->kind = kind;
    io->fd = -1;
    if (fd < 0)
        return;
    /* uv_poll_init() also makes the fd non-blocking. */
    if (uv_poll_init(p->server->loop, &io->poll, fd) < 0) {
        close(fd);
        return;
    }
    io->poll.data = p;
    io->fd = fd;
    p->handles++;
}

proc *proc_new(grpc_server *s, grpc_call *call, spawned *sp, bool pty, bool execute, int32_t id)
{
    process_table *t = grpc_server_procs(s);
    proc *p = calloc(1, sizeof(*p));
    if (!p) {
        kill(-sp->pid, SIGKILL);
        safe_close(sp->out_fd);
        safe_close(sp->err_fd);
        if (sp->in_fd != sp->out_fd)
            safe_close(sp->in_fd);
        return NULL;
    }
    p->ch.ops = &proc_child_ops;
    p->ch.pid = sp->pid;
    p->ch.id = id;
    p->server = s;
    p->call = call;
    p->execute = execute;
    p->pty = pty;
    p->chunk = (size_t)sandboxd_chunk_size(s->sd->config);
    p->cap_limit = sandboxd_max_execute_output(s->sd->config);
    process_table_add(t, &p->ch);
    uv_timer_init(s->loop, &p->timer);
    p->timer.data = p;
    p->handles++;
    io_init(p, IO_OUT, sp->out_fd);
    io_init(p, IO_ERR, sp->err_fd);
    io_init(p, IO_IN, pty ? -1 : sp->in_fd);
    p->in_fd = pty ? p->io[IO_OUT].fd : p->io[IO_IN].fd;
    call->data = p;
    return p;
}

void proc_cancel(proc *p)
{
    if (p->call)
        p->call->data = NULL;
    p->call = NULL;
    p->ch.id = 0;
    p->paused = false;
    if (!p->ch.reaped)
        (void)child_signal(&p->ch, SIGKILL);
    proc_update(p);
}

void proc_resume(proc *p)
{
    if (!p->paused)
        return;
    p->paused = false;
    proc_update(p);
}

proc *proc_find(grpc_server *s, int32_t id)
{
    return (proc *)process_table_find_id(grpc_server_procs(s), id);
}

bool proc_exited(const proc *p)
{
    return p->ch.reaped || p->done;
}

int proc_signal(proc *p, int sig)
{
    return child_signal(&p->ch, sig);
}

int proc_resize(proc *p, unsigned cols, unsigned rows)
{
    if (!p->pty || proc_exited(p) || p->io[IO_OUT].fd < 0)
        return -ENOTTY;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    if (ioctl(p->io[IO_OUT].fd, TIOCSWINSZ, &ws) < 0)
        return -errno;
    return 0;
}
