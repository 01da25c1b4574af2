/* The DNS forwarder on the bridge address of local sandboxes (docs/network.md): UDP and TCP
 * port 53, each query relayed to one upstream resolver; its own thread. */
#pragma once

#include <stdint.h>

typedef struct local_dns local_dns;

/* Listens on addr (host byte order) port 53 and relays to upstream ("IP" or "IP:PORT"; NULL: the
 * first IPv4 nameserver of /etc/resolv.conf). NULL when it cannot, with *ret_why (static). */
local_dns *local_dns_start(uint32_t addr, const char *upstream, const char **ret_why);
/* Stops the thread and frees; NULL is fine. */
void local_dns_stop(local_dns *d);
