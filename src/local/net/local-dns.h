/* The DNS forwarder on the bridge address of local sandboxes (docs/network.md): UDP and TCP
 * port 53, each well-formed query (local-dns-query.h) relayed to one upstream resolver, with a
 * budget per sandbox so that one sandbox cannot starve the others; its own thread. */
#pragma once

#include <stdint.h>

typedef struct local_dns local_dns;

/* The budget of one sandbox (one source address); 0 in a field: its default. */
typedef struct local_dns_limits {
    unsigned rate;     /* queries per second, refilled continuously (default 50) */
    unsigned burst;    /* bucket size: queries at once after a quiet time (default 100) */
    unsigned inflight; /* UDP queries waiting for the upstream at once (default 32) */
} local_dns_limits;

#define LOCAL_DNS_DEFAULT_RATE 50
#define LOCAL_DNS_DEFAULT_BURST 100
#define LOCAL_DNS_DEFAULT_INFLIGHT 32

/* Listens on addr (host byte order) port 53 and relays to upstream ("IP" or "IP:PORT"; NULL: the
 * first IPv4 nameserver of /etc/resolv.conf); limits may be NULL (defaults). NULL when it cannot,
 * with *ret_why (static). */
local_dns *local_dns_start(uint32_t addr, const char *upstream, const local_dns_limits *limits,
                           const char **ret_why);
/* Stops the thread and frees; NULL is fine. */
void local_dns_stop(local_dns *d);
