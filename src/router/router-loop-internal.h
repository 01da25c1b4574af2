/* Private to the event loop's two files: router-loop.c (workers, accept, start/stop) and
 * router-loop-conn.c (one client connection's state machine). */
#pragma once

#include <pthread.h>
#include <sys/socket.h>
#include <stdatomic.h>
#include <time.h>

#include "basic/time-util.h"
#include "router/router-core.h"
#include "shared/router-stats.h"

#define IN_CAP ROUTER_HEAD_MAX /* the blocking path reads heads into as much */
#define RD_CAP 65536
#define OUT_HIGH 65536 /* neither side is read while more than this waits to go to the other */
#define CLIENT_IDLE_MS 120000

/* ST_TUNNEL: after a 101 to an upgrade request, bytes are copied both ways until either side
 * ends (router-loop-tunnel.c). */
enum { ST_SNIFF, ST_READ, ST_UPSTREAM, ST_RESOLVING, ST_TUNNEL, ST_CLOSING };

typedef struct lworker lworker;

typedef struct lconn {
    lworker *w;
    struct lconn *prev, *next;
    int fd;
    bool loopback;
    int st;
    /* client input: [start, len) not consumed by finished requests; [start, parsed) parsed */
    char *in;
    size_t in_start, in_parsed, in_len;
    bool rd_eof, can_read, can_write;
    router_message rq;
    bool head_done, msg_done, has_body, keep_alive;
    size_t req_len; /* bytes of the finished request not yet consumed */
    /* a request body being forwarded (after the head went upstream) */
    bool body_streaming, req_chunked;
    int body_err;   /* the upstream stopped taking the body: the rest is read and dropped */
    bool resp_done; /* the response ended before the request body did */
    bool refused;   /* the head was refused and answered (request smuggling shapes) */
    /* to the client */
    buf out;
    size_t out_off;
    /* upstream */
    int up_fd;
    char *up_addr;
    bool up_reused, up_retried, up_can_read, up_can_write, up_eof;
    buf up_req;
    size_t up_req_off;
    router_relay relay;
    bool r_got; /* a byte of the response came in */
    bool counted;       /* the answer to the current request went to router_stats */
    int64_t started_us; /* now_usec(CLOCK_MONOTONIC) when the current request's head was in */
    long long deadline, last_io;
    long long head_start; /* when the request head being read began (0: none) */
    router_route route;
    char *sa_addr; /* the upstream address last looked up, and what it resolved to */
    struct sockaddr_storage sa;
    socklen_t sa_len;
    bool dead;
    bool ev_out, up_ev_out; /* EPOLLOUT registered (only while a write is blocked) */
    bool rdhup, up_rdhup;   /* the peer's FIN was seen: read until EOF */
} lconn;

struct lworker {
    router_loop *L;
    int ep, ev;
    pthread_t thread;
    lconn *conns;
    lconn *dead; /* closed during this batch of events, freed after it */
    pthread_mutex_t lock;
    struct router_loop_job *done; /* finished resolutions and lookups (under lock) */
    struct loop_adoption *adopt;  /* connections given back by the blocking code (under lock) */
    bool exited;                  /* the worker stopped: nothing is adopted any more */
    char rd[RD_CAP];
};

struct router_loop {
    router_ctx *ctx;
    int listen_fd;
    size_t nw;
    lworker *w;
    atomic_int phase; /* 0 serving, 1 not accepting, 2 exit */
    router_loop_hooks hooks;
};

#define TAG_UP 1UL

/* Work that may block (a target resolution: control-plane lookup, resume; or a host name's DNS
 * lookup) runs on a helper thread; the connection waits in ST_RESOLVING (its events ignored)
 * and the worker picks the finished job up from its done list when the thread signals the
 * worker's eventfd (router_loop_job_post). */
typedef struct router_loop_job {
    router_resolution res; /* first: the helper thread hands back &res */
    struct router_loop_job *next;
    lconn *c;
    bool lookup; /* a DNS lookup of addr, not a resolution */
    char *addr;
    struct sockaddr_storage sa;
    socklen_t sa_len;
    int r;
} router_loop_job;

/* Hands a finished job to its connection's worker (from the helper thread). */
void router_loop_job_post(router_loop_job *j);

/* ---- upstream (router-loop-upstream.c) ---- */
void router_loop_upstream_drop(lconn *c);
/* Builds the upstream request head for c's request into up_req. 0 or -ENOMEM. */
int router_loop_upstream_request(lconn *c, const char *addr);
/* Writes the pending request bytes (head, then body). Returns 0 (sent or waiting for EPOLLOUT)
 * or -errno. A body-less request's head stays in up_req for a retry on a fresh connection. */
int router_loop_upstream_flush(lconn *c);
void router_loop_relay_start(lconn *c);
/* (Re)sends the built request on a kept or new upstream connection. -EADDRNOTAVAIL: addr is a
 * host name not looked up yet (router_loop_upstream_lookup); -EAGAIN: a full unix backlog. */
int router_loop_upstream_send(lconn *c, const char *addr);
/* Starts looking addr up on a helper thread (c waits in ST_RESOLVING). 0 or a negative errno. */
int router_loop_upstream_lookup(lconn *c, const char *addr);
/* Keeps a finished lookup's result for c's next connects. 0 or the lookup's error. */
int router_loop_upstream_looked_up(lconn *c, router_loop_job *j);

/* The loop's two I/O primitives, on the client (up false) or upstream socket, edge-triggered:
 * router_loop_send writes data[*off, len) while the socket takes it (EAGAIN: can_write cleared
 * and EPOLLOUT asked for), 0 or -errno; router_loop_recv reads up to cap bytes: n, 0 at EOF,
 * -EAGAIN (can_read cleared; also after a short read unless the peer's FIN was seen) or -errno. */
int router_loop_send(lconn *c, bool up, const char *data, size_t len, size_t *off);
ssize_t router_loop_recv(lconn *c, bool up, char *dst, size_t cap);
/* Sends what is pending to the client. 0 (all sent or the socket is full) or a negative errno. */
int router_loop_client_flush(lconn *c);
/* EPOLLOUT is asked for only while a write is blocked (up: on the upstream socket). */
void router_loop_want_out(lconn *c, bool up, bool on);
/* Switches c to ST_TUNNEL after the 101 (already in c->out); early: upstream bytes that came
 * with it. The client bytes after the request head, in c->in, go upstream first. 0 or -ENOMEM. */
int router_loop_tunnel_begin(lconn *c, const char *early, size_t n);
/* Copies bytes both ways with flow control (neither side is read while more than OUT_HIGH bytes
 * wait for the other); closes c once either side ended and what it sent was delivered.
 * Returns 1 when c was closed. */
int router_loop_tunnel_run(lconn *c);

/* Accepts fd on worker w and runs it as far as it goes (closes it on failure). */
void router_loop_conn_new(lworker *w, int fd);
/* Same for a connection the blocking code gives back: HTTP/1.1 already (no h2 sniffing), its
 * first input pre[0..npre). */
void router_loop_conn_adopt(lworker *w, int fd, bool loopback, const char *pre, size_t npre);
/* Runs the connection's state machine as far as it goes (after events). */
void router_loop_conn_run(lconn *c);
/* Closes the client connection (and its upstream); its memory lives until router_loop_reap. */
void router_loop_conn_close(lconn *c);
/* Frees the connections closed during this batch of events. */
void router_loop_reap(lworker *w);
/* Picks up the resolutions finished on helper threads (after the worker's eventfd fired). */
void router_loop_resolve_done(lworker *w);
/* Deadlines: proxy timeouts (504), the request-head deadline, idle clients. */
void router_loop_sweep(lworker *w, long long now);
/* Over the connection cap: closes the connection sending its head or idle the longest.
 * Returns false when there is none. */
bool router_loop_make_room(lworker *w);
