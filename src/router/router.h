/* The data-plane router: one listener speaking HTTP/1.1 and HTTP/2 prior-knowledge (h2c),
 * routing requests by X-Sandbox-ID / X-Sandbox-Namespace / X-Sandbox-Port to a sandbox's
 * sandboxd (REST over HTTP/1.1, gRPC over HTTP/2) or to the legacy python-runtime layer.
 *
 * Threading: one epoll worker per CPU serves HTTP/1.1 requests non-blocking, bodies and
 * streams included, with flow control (router-loop.c); a connection that needs more (the legacy
 * emulation, HTTP/2, a TCP upstream, an upgrade) is handed to a thread of its own running
 * blocking code (the kernel's socket buffers are the back-pressure). Every path runs the same
 * proxy core (router-core.h). An HTTP/2 connection runs a poll loop over the client socket
 * and its upstream sockets, with nghttp2 flow-control windows released only as bytes are
 * written on. Memory stays bounded whatever the body sizes. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "shared/status.h"

typedef struct router router;
typedef struct router_resolver router_resolver;

/* Where one sandbox is reached. Addresses are "unix:/path" or "host:port" ("[v6]:port"). */
typedef struct router_target {
    char *rest;   /* sandboxd REST (HTTP/1.1) */
    char *grpc;   /* sandboxd gRPC (HTTP/2) */
    char *legacy; /* a python-runtime style HTTP server to proxy port 8888 to; NULL: the router
                     emulates the legacy endpoints on top of rest + grpc (unix sockets only) */
    char *port;   /* the server on the requested port (any other): "host:port", or
                     "netns:PID/CGROUP@host:port", connected from inside the network namespace of
                     process PID once it is checked to be in cgroup CGROUP (router-netns.c);
                     NULL when no port was asked for */
} router_target;

void router_target_done(router_target *t);

/* Resolves (namespace, sandbox id) to a target (and port, when not 0, to target->port). May
 * block (e.g. to resume a suspended sandbox)
 * unless nonblock is set: then it answers only from what it knows at once and returns
 * -EWOULDBLOCK otherwise (err untouched). Called concurrently from connection threads. Returns 0
 * with *out filled (owned by the caller, router_target_done) or a negative errno with *err set
 * (its status picks the answer: 404, 502, 503, 504, ...; texts from router-errors.h). */
struct router_resolver {
    int (*resolve)(router_resolver *r, const char *ns, const char *id, unsigned port, bool nonblock,
                   router_target *out, api_error *err);
    /* Tells the resolver that the target it gave for (ns, id) failed to connect: drop caches. */
    void (*invalidate)(router_resolver *r, const char *ns, const char *id);
    void (*free)(router_resolver *r);
};

/* Template resolver: `tmpl` is expanded with {id}, {namespace}, {port} (8080 REST, 9090 gRPC,
 * 8888 legacy, or the port asked for) and {socket} ("rest" / "grpc"; a port of a unix-socket
 * template is refused with 502). Examples:
 *   "{id}.{namespace}.svc.cluster.local:{port}"   (upstream's DNS form; legacy proxied to :8888)
 *   "unix:/var/lib/asb/run/{id}/{socket}.sock"    (legacy emulated on the sockets)
 * *out owned (r->free). */
int router_resolver_template_new(const char *tmpl, router_resolver **out);

/* Control-plane resolver: looks the Sandbox up through the control-plane API (server URL and
 * token), resumes it when spec.operatingMode is Suspended (and waits until Ready), and targets
 * $state_dir/run/<metadata.uid>/{rest,grpc}.sock; another port is 127.0.0.1:PORT inside the
 * network namespace of the sandbox's first process (its pid in the bundle's pid file, checked
 * against the sandbox's cgroup at every connect). Lookups are cached for cache_ms. */
int router_resolver_api_new(const char *server, const char *token, const char *state_dir,
                            long cache_ms, long resume_timeout_ms, router_resolver **out);

typedef struct router_options {
    const char *listen;         /* "HOST:PORT" (port 0: any free port) */
    const char *token;          /* bearer token required on every request; NULL: none configured */
    bool allow_unauthenticated; /* token-less requests admitted from loopback peers */
    router_resolver *resolver;  /* owned by the router after a successful start */
    long proxy_timeout_ms;      /* whole-request budget to first response byte; 0: 180 s */
    long connect_timeout_ms;    /* 0: 5 s */
    long header_timeout_ms;     /* a request head must be in this long after it began (Go's
                                   ReadHeaderTimeout); 0: 10 s, <0: none */
    unsigned max_connections;   /* open client connections; at the cap a new one closes the
                                   oldest one still sending its head or idle; 0: half the fd
                                   limit (upstream sockets need fds too), at most 4096 */
    const char *preview_domain; /* preview hosts PORT-SANDBOX.NAMESPACE.<this>; NULL: "localhost",
                                   "": none */
} router_options;

/* Starts listening and serving in background threads. *ret_port: the bound port. Returns 0, or a
 * negative errno with *err saying why (for a person). */
int router_start(const router_options *o, router **ret, uint16_t *ret_port, api_error *err);
/* Stops accepting, waits for nothing (connection threads are detached and end with their
 * clients), frees the listener. Accepts NULL. */
void router_stop(router *r);
