/* The router's proxy core, shared by every client protocol (the epoll loop, the blocking
 * HTTP/1.1 thread and HTTP/2): one header list, one admission sequence (healthz -> auth ->
 * route -> resolve), one request-head builder, one response relay and one set of router-made
 * answers. Nothing here does I/O: callers feed bytes in and write out what comes back. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <http_parser.h>

#include "basic/buf.h"
#include "router/router-internal.h"

/* The most bytes a request or response head (URL plus headers) may take. The epoll loop's input
 * buffer is this size (a longer request head is answered 431), as is the blocking path's read
 * buffer, so whatever the loop hands off fits. */
#define ROUTER_HEAD_MAX 65536

/* ---- header list ---- */

/* Headers as "name\0value\0" runs in one reused buffer (no allocation per header), filled from
 * http_parser's on_header_field / on_header_value callbacks, which may split a name or value in
 * pieces. */
typedef struct router_headers {
    buf a;
    buf offs; /* size_t: where each name starts in a (malloc'd, so aligned) */
    size_t n;
    int st; /* 0 none, 1 in a name, 2 in a value */
    size_t bytes;
} router_headers;

/* Appends a piece of a header name (a new header after a value). 0, -E2BIG (over
 * ROUTER_HEAD_MAX in all) or -ENOMEM. */
int router_headers_field(router_headers *h, const char *at, size_t n);
int router_headers_value(router_headers *h, const char *at, size_t n);
/* Terminates the last header; call at on_headers_complete before reading the list. */
int router_headers_end(router_headers *h);
void router_headers_reset(router_headers *h);
void router_headers_done(router_headers *h);

static inline const char *router_headers_name(const router_headers *h, size_t i)
{
    return h->a.data + ((const size_t *)(const void *)h->offs.data)[i];
}
/* The name being accumulated (NUL-terminated; its length so far in *ret_len). */
const char *router_headers_current(const router_headers *h, size_t *ret_len);
/* Value of the first header named `name` (case-insensitive), borrowed; NULL when absent. */
const char *router_headers_get(const router_headers *h, const char *name);
/* The list as http_field (for http_framing_check); *ret owned by the caller. */
int router_headers_fields(const router_headers *h, http_field **ret);

/* ---- admission ---- */

typedef struct router_admission {
    router_request_info info;  /* method, path, X-Sandbox-*, content type, host */
    const char *authorization; /* NULL: absent */
    const char *cookie;        /* the Cookie header (HTTP/1.1: the first); NULL: absent */
    bool loopback;             /* the client is a loopback peer */
    bool http2;                /* HTTP/2 client: gRPC allowed */
    bool upgrade;              /* an upgrade (or CONNECT) the caller cannot proxy: 501 */
    bool connect;              /* CONNECT, which the caller tunnels to a sandbox port (else 501) */
} router_admission;

/* Fills a's info and authorization from an HTTP/1.1 header list (first occurrence wins). */
void router_admission_from_headers(router_admission *a, const char *method, const char *path,
                                   const router_headers *h);

typedef enum router_admit_result {
    ROUTER_ADMIT_HEALTHZ, /* answer router_healthz_body with 200 */
    ROUTER_ADMIT_ANSWER,  /* answer *ret_answer (the router's own: a preview link, redirect) */
    ROUTER_ADMIT_REFUSED, /* answer *err */
    ROUTER_ADMIT_PENDING, /* routed (*ret_route), but resolving would block (nonblock set) */
    ROUTER_ADMIT_TARGET,  /* routed and resolved: *ret_target filled, owned by the caller */
} router_admit_result;

extern const char router_healthz_body[];

/* An answer the router makes itself besides errors and healthz. */
typedef struct router_answer {
    int status;
    const char *ctype;
    char headers[512]; /* extra header lines separated by CRLF, none after the last; "" none */
    char body[1024];
} router_answer;

/* The router's own path that signs preview links: GET ROUTER_PREVIEW_PATH?namespace=NS&
 * sandbox=ID&port=N[&ttl=SECONDS] (bearer auth, no X-Sandbox-ID) answers 200 {"url":
 * "http://N-ID.NS.DOMAIN[:P]/?asb-preview=...", "expiresAt": RFC 3339}. */
#define ROUTER_PREVIEW_PATH "/preview-url"

/* The one admission sequence: healthz, bearer auth, X-Sandbox-* routing, protocol checks
 * (upgrades, gRPC over HTTP/1.1), then resolution. nonblock: resolve only from what the
 * resolver knows at once (ROUTER_ADMIT_PENDING otherwise; the caller resolves later with
 * router_admit_resolve). */
router_admit_result router_admit(router_ctx *ctx, const router_admission *a, bool nonblock,
                                 router_route *ret_route, router_target *ret_target,
                                 router_answer *ret_answer, api_error *err);
/* The resolution step alone (may block). Returns ROUTER_ADMIT_TARGET or _REFUSED. */
router_admit_result router_admit_resolve(router_ctx *ctx, const router_route *route,
                                         router_target *ret_target, api_error *err);

/* A resolution that may block (control-plane lookup, resume), run on a helper thread so the
 * caller's other connections or streams go on. Embed it first in a job of your own. */
typedef struct router_resolution router_resolution;
struct router_resolution {
    router_resolver *resolver;
    router_route route;
    router_target target; /* out, when r == 0 */
    api_error err;        /* out, when r < 0 (cleared by whoever takes res) */
    int r;
    /* Called on the helper thread when done; res belongs to the callee from then on. */
    void (*done)(router_resolution *res);
};

/* Starts res on a helper thread. 0, or a negative errno (done is never called then). */
int router_resolve_async(router_resolution *res);

/* ---- router-made answers ---- */

/* Appends a whole response: status line (reason phrase from status.c), Content-Type,
 * Content-Length, an optional extra header line (without CRLF), Connection: close unless
 * keep_alive, and the body unless head_only. 0 or -ENOMEM. */
int router_reply(buf *out, int status, const char *ctype, const char *extra, const char *body,
                 size_t len, bool keep_alive, bool head_only);
/* router_reply of a router_answer. */
int router_reply_answer(buf *out, const router_answer *a, bool keep_alive, bool head_only);

/* ---- request head ---- */

/* "Host" value to send upstream: "sandbox" for unix sockets, else the address. */
const char *router_upstream_host(const char *addr);
/* Appends the upstream request head: request line, Host, the client's headers minus the dropped
 * ones, then the framing (Transfer-Encoding: chunked when chunked, else the client's
 * Content-Length when it sent one). 0 or -ENOMEM. */
int router_request_head(buf *out, const char *method, const char *url, const char *host,
                        const router_headers *h, bool chunked);
/* Turns the head just appended by router_request_head into a protocol upgrade request: adds
 * "Connection: Upgrade" and "Upgrade: proto" before its final blank line. 0 or -ENOMEM. */
int router_request_upgrade(buf *out, const char *proto);
/* Chunked-encoding framing of one piece of body. 0 or -ENOMEM. */
int router_chunk(buf *out, const char *data, size_t n);

/* ---- message reader ---- */

/* What the protocol code does with a message once the core has its head (request target or
 * reason phrase, headers, the header list terminated; for requests duplicate Content-Lengths
 * handled as Go does). Interim (1xx) responses never reach the hooks. Each returns like an
 * http_parser callback (0 go on, 1 from headers_complete: no body, other: stop with an error).
 * Any may be NULL. */
typedef struct router_message_hooks {
    int (*message_begin)(void *payload);
    int (*headers_complete)(void *payload);
    int (*body)(void *payload, const char *at, size_t n);
    int (*message_complete)(void *payload);
} router_message_hooks;

/* An HTTP/1.1 request or response parser with the head it collected. */
typedef struct router_message {
    http_parser p;
    buf first; /* request target (requests) or reason phrase (responses) */
    router_headers h;
    router_cl_dup cl_dup;
    const router_message_hooks *hooks;
    void *payload;
} router_message;

/* type: HTTP_REQUEST or HTTP_RESPONSE. */
void router_message_init(router_message *m, enum http_parser_type type,
                         const router_message_hooks *hooks, void *payload);
/* http_parser_execute over data with the core's callbacks (len 0: EOF). Returns the bytes
 * consumed; stops after each complete message with the parser paused (HPE_PAUSED), so what
 * follows stays unparsed until the caller unpauses it (http_parser_pause(&m->p, 0)). */
size_t router_message_execute(router_message *m, const char *data, size_t len);
/* Forgets the head of the finished message (the parser itself goes on). */
void router_message_reset(router_message *m);
void router_message_done(router_message *m);
static inline const char *router_message_url(const router_message *m)
{
    return m->first.len ? m->first.data : "/";
}

/* Checks a finished head for the request-smuggling shapes (router_framing_check, Go's rules).
 * Returns 0 when the request may proceed, the HTTP status (400/501) of the answer appended to
 * out (Go's text/plain body, Connection: close), or -ENOMEM. */
int router_request_refuse_framing(const router_message *rq, buf *out);
/* The answer to a request http_parser refused (400 {"detail":"Malformed HTTP request."}, then
 * close), appended to out. 0 or -ENOMEM. */
int router_request_refuse_malformed(const router_message *rq, buf *out);

/* ---- response relay ---- */

/* Turns an upstream HTTP/1.1 response into the bytes for an HTTP/1.1 client: interim (1xx)
 * responses dropped, hop-by-hop headers dropped, a body without a length re-framed chunked (or,
 * for an HTTP/1.0 client, delimited by closing). A 101 Switching Protocols (the answer to an
 * upgrade request) is relayed with its Connection/Upgrade headers and ends the relay with
 * `upgraded` set: what follows it is the new protocol's bytes. Does no I/O. */
typedef struct router_relay {
    router_message m;
    buf *out;
    bool head_request;  /* the request was HEAD: no body follows the head */
    bool client_http10; /* the client spoke HTTP/1.0 */
    bool keep_alive;    /* in: the client connection may be kept; cleared when it cannot */
    bool head_done;     /* the response head was emitted */
    bool done;          /* the whole response was emitted */
    bool upgraded;      /* the response was a 101 to an upgrade: a byte tunnel follows */
    bool chunked_out, no_body;
    int err;
} router_relay;

/* Starts relaying the response to one request. */
void router_relay_start(router_relay *r, bool head_request, bool client_http10, bool keep_alive);
/* Feeds len bytes read from upstream (len 0: upstream EOF) and appends the client bytes to out.
 * Returns the bytes consumed (fewer than len only once done: the rest is not part of this
 * response) or a negative errno: -EPROTO (malformed), -ENOMEM, -ECONNRESET (EOF before the
 * response ended). */
ssize_t router_relay_feed(router_relay *r, const char *data, size_t len, buf *out);
/* After done: the upstream connection may carry another request. */
bool router_relay_reusable(const router_relay *r);
void router_relay_done(router_relay *r);

/* ---- helpers ---- */

/* Stack of the router's helper threads (resolutions, handed-off connections): their deepest
 * user is the blocking HTTP/1.1 path with one ROUTER_HEAD_MAX read buffer. */
#define ROUTER_THREAD_STACK (256 * 1024)
/* Starts fn(arg) on a detached thread. 0 or a negative errno (arg not taken then). */
int router_thread_spawn(void *(*fn)(void *), void *arg);
