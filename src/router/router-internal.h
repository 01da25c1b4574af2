/* Internals shared by the router's files: request routing decisions (pure, fuzzed), upstream
 * connections, the legacy layer and the two client protocols. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "router/router-errors.h"
#include "router/router.h"
#include "shared/http-framing.h"

struct http_parser;

/* REST, gRPC and legacy are sandboxd's (ports 8080, 9090, 8888); PORT is any other port,
 * served by whatever listens on it inside the sandbox. */
typedef enum router_kind {
    ROUTER_KIND_REST,
    ROUTER_KIND_GRPC,
    ROUTER_KIND_LEGACY,
    ROUTER_KIND_PORT,
} router_kind;

/* The routing-relevant parts of one request; absent headers are NULL. */
typedef struct router_request_info {
    const char *method;
    const char *path; /* request target as received (still percent-encoded) */
    const char *sandbox_id, *sandbox_ns, *sandbox_port, *pod_ip;
    const char *content_type;
    const char *host;           /* Host (HTTP/2: :authority): a preview host names the route */
    const char *preview_domain; /* NULL: no preview hosts */
} router_request_info;

typedef struct router_route {
    router_kind kind;
    char id[64];
    char ns[64];
    unsigned port; /* ROUTER_KIND_PORT: the port inside the sandbox */
    bool preview;  /* routed by a preview host (PORT-ID.NS.DOMAIN), not by X-Sandbox-* */
} router_route;

/* DNS-1123 label, at most 63 characters. */
bool router_valid_dns_label(const char *s);
/* Validates the X-Sandbox-* headers (upstream's messages) and picks the dispatch kind; a Host
 * that is a preview host of in->preview_domain (router_preview_host) routes by itself, whatever
 * the X-Sandbox-* headers say. Returns 0, or -EINVAL with err set (400). */
int router_route_request(const router_request_info *in, router_route *out, api_error *err);
/* Parses a preview host "PORT-ID.NS.DOMAIN[:P]" (case-insensitive; ID and NS DNS labels,
 * PORT 1..65535) into *out (kind PORT, preview set). False when host is no preview host of
 * domain. */
bool router_preview_host(const char *host, const char *domain, router_route *out);
/* True when a request with this X-Sandbox-Port value (NULL: none) is for sandboxd or the legacy
 * layer rather than a server of the sandbox (whose own /healthz the router must not shadow). */
bool router_port_is_sandboxd(const char *port);

/* Bearer-token check. token NULL: no token configured (everything passes). A request without
 * a token passes when allow_unauthenticated and the peer is loopback. Returns 0 or -EACCES with
 * err = 401 and upstream's messages. */
int router_check_auth(const char *authorization, const char *token, bool allow_unauthenticated,
                      bool peer_loopback, api_error *err);
/* Request headers never forwarded upstream: hop-by-hop ones, Host, Authorization, X-Sandbox-*
 * routing headers, Expect and HTTP/2 pseudo-headers. */
bool router_header_dropped(const char *name, size_t len);
/* Response headers not forwarded to the client (hop-by-hop). */
bool router_response_header_dropped(const char *name, size_t len);
bool router_is_grpc_content_type(const char *ct);

/* http_parser refuses every second Content-Length header, Go's net/http accepts identical ones
 * (different ones are refused by router_framing_check once the headers are in). Call from
 * on_header_field with the name of the current header accumulated so far; new_header: this
 * callback starts a new header. Clears the parser's Content-Length flag for a repeated
 * Content-Length (restores it if the name turns out longer). */
typedef struct router_cl_dup {
    bool cleared;
    uint64_t saved;
} router_cl_dup;
void router_cl_dup_field(struct http_parser *p, router_cl_dup *st, const char *name, size_t len,
                         bool new_header);
/* http_framing_check for a parsed request head (HTTP version from the parser). Returns 0 or a
 * negative errno with *err (status 400/501, Go's body as message). */
int router_framing_check(const struct http_parser *p, const http_field *fields, size_t n,
                         api_error *err);

/* "netns:PID/CGROUP@host:port" addresses (router-netns.c): a socket of family/type (plus
 * SOCK_CLOEXEC) created inside the network namespace of process PID, once it is checked to be in
 * cgroup CGROUP. Returns the fd, -ECONNREFUSED when the process is gone or not the sandbox's, or
 * a negative errno. */
int router_netns_socket(const char *addr, int family, int type);
bool router_addr_is_netns(const char *addr);
/* The "host:port" part of an address (addr itself unless it is a netns address). Borrowed. */
const char *router_addr_hostport(const char *addr);

/* Upstream sockets. addr is "unix:/path", "host:port" or a netns address. Blocking connect with a
 * timeout; returns a connected fd (O_CLOEXEC, blocking) or a negative errno. */
int router_connect(const char *addr, long timeout_ms);
/* The socket address of "unix:/path" or "host:port" / "[v6]:port" (the first one a name
 * resolves to). Without lookup, only numeric hosts (a name: -EADDRNOTAVAIL, nothing blocks);
 * with it, a DNS lookup may block. 0, -EHOSTUNREACH, -EINVAL or -ENOMEM. */
int router_sockaddr(const char *addr, bool lookup, struct sockaddr_storage *ret,
                    socklen_t *ret_len);

/* Legacy path split: for "/download/<rest>" style targets. Writes the decoded remainder (after
 * the given prefix, query removed, percent-decoded) into *out (owned). Returns 0 or -EINVAL. */
int router_legacy_path(const char *target, const char *prefix, char **out);
int router_percent_decode(const char *s, size_t n, char **out);
/* Percent-encodes (%XX, upper case) every byte keep() refuses. Owned by the caller; NULL on
 * -ENOMEM. */
char *router_percent_encode(const char *s, bool (*keep)(unsigned char ch));

/* One legacy response (the HTTP/2 side buffers it; HTTP/1.1 streams downloads separately). */
typedef struct router_legacy_response {
    int status;
    const char *content_type;
    char *extra_header; /* e.g. "Content-Disposition: ..." without CRLF, owned, or NULL */
    char *body;         /* owned */
    size_t body_len;
} router_legacy_response;

void router_legacy_response_done(router_legacy_response *r);

/* Serves a legacy request whose whole body is in memory. Target must have rest + grpc unix
 * sockets. Returns 0 with *out filled. */
int router_legacy_handle(const router_target *t, const char *method, const char *path,
                         const char *content_type, const char *body, size_t body_len,
                         router_legacy_response *out);
/* True for paths the legacy layer serves for this method (used to 404/405). */
bool router_legacy_is_download(const char *method, const char *path);
/* Streams a legacy download: calls head_cb(status, content_type, extra_header, payload) once,
 * then data_cb for each chunk (file downloads) or once with the error body. */
int router_legacy_download(const router_target *t, const char *path,
                           int (*head_cb)(int status, const char *ctype, const char *extra,
                                          long long len, void *payload),
                           int (*data_cb)(const char *data, size_t len, void *payload),
                           void *payload);

/* Shared state of a running router, seen by connection threads. */
typedef struct router_ctx {
    char *token;
    bool allow_unauthenticated;
    router_resolver *resolver;
    long proxy_timeout_ms;
    long connect_timeout_ms;
    long header_timeout_ms; /* 0: none */
    char *preview_domain;   /* NULL: no preview hosts */
    /* Gives a connection served by the blocking HTTP/1.1 code back to the event loop at a
     * request boundary (pre: bytes read and not consumed yet, copied). 0: taken (the caller
     * forgets fd); <0: not taken. NULL: the connection stays with the blocking code. */
    int (*handback)(void *payload, int fd, bool loopback, const char *pre, size_t npre);
    void *handback_payload;
} router_ctx;

/* Serves one client connection until it closes or, after a request (the legacy emulation's:
 * the loop hands those off), until ctx->handback takes it back. Returns true when handed back
 * (fd is no longer the caller's), false when the caller closes fd. `pre` holds bytes already
 * read from the socket. */
bool router_http1_serve(router_ctx *ctx, int fd, bool peer_loopback, const char *pre, size_t npre);
void router_h2_serve(router_ctx *ctx, int fd, bool peer_loopback, const char *pre, size_t npre);

/* Writes all of buf (blocking socket). Returns 0 or a negative errno. */
int router_write_all(int fd, const void *buf, size_t len);

/* The event-driven HTTP/1.1 path (router-loop.c). The server supplies the hooks: accepted (track
 * the fd; <0 refuses it; >0: tracked, but over the connection cap: the worker closes its oldest
 * connection still sending a request head or idle to make room, or refuses the new one when it
 * has none), closed (untrack; the loop closes the fd), loopback (peer check) and
 * handoff (serve fd on a thread with the blocking code, h2 or HTTP/1.1: the thread first writes
 * out[0..nout) (responses the loop made and could not send yet), then parses starting with the
 * bytes pre[0..npre); both copied; <0: not taken, the loop closes it). */
typedef struct router_loop router_loop;
typedef struct router_loop_hooks {
    void *payload;
    int (*accepted)(void *payload, int fd);
    void (*closed)(void *payload, int fd);
    bool (*loopback)(int fd);
    int (*handoff)(void *payload, int fd, bool loopback, bool h2, const char *out, size_t nout,
                   const char *pre, size_t npre);
} router_loop_hooks;

/* Takes fd (a tracked client connection, between requests) into the loop from another thread,
 * with pre[0..npre) (at most ROUTER_HEAD_MAX, copied) as its first input. 0 or -ESHUTDOWN /
 * -ENOMEM (the caller keeps fd). */
int router_loop_adopt(router_loop *L, int fd, bool loopback, const char *pre, size_t npre);

/* Starts one worker per CPU (ASB_ROUTER_WORKERS overrides) accepting on listen_fd. */
int router_loop_start(router_ctx *ctx, int listen_fd, const router_loop_hooks *hooks,
                      router_loop **ret);
/* phase 1: stop accepting (returns at once); phase 2: close every connection still on a loop,
 * join the workers and free L. */
void router_loop_stop(router_loop *L, int phase);
