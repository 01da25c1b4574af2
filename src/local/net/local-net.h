/* local/net: sandbox networking (local-net*.c: namespaces, links, nftables, policy, counters,
 * networks made ahead) and the DNS forwarder (local-dns, local-dns-query). Internal to the
 * folder: local-net-internal.h. Includes from other folders of src/local: metrics, fs; never
 * from a folder above it (docs/architecture.md, "src/local in rooms"). */
/* Networking of local sandboxes (docs/network.md): a network namespace per sandbox, a veth pair
 * to a host bridge, an address from the pod CIDR, NAT for egress, a DNS forwarder on the bridge
 * address, and the sandbox's NetworkPolicy enforced with nftables on the host. Built on rtnetlink
 * (libmnl), libnftnl and libnftables; one nft table per state directory. Every call is made under
 * the caller's lock (local_net_options.lock); the DNS forwarder and the preparer of networks
 * ahead (local-net-prepared.c) have their own threads. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "local/net/local-dns.h"

typedef struct local_net local_net;

typedef struct local_net_options {
    const char *state_dir;
    const char *mode;         /* "bridge" (default) or "none" (loopback only) */
    const char *pod_cidr;     /* IPv4 CIDR, default 10.244.0.0/24 */
    const char *bridge;       /* bridge name, default "asb" + 8 hex digits of the state dir */
    const char *dns_upstream; /* "IP" or "IP:PORT"; NULL: the first nameserver of /etc/resolv.conf */
    local_dns_limits dns_limits; /* per sandbox; zeros: the defaults (local-dns.h) */
    /* Networks prepared ahead (docs/network.md): this many kept ready besides the warm pools'
     * demand; 0 (or no lock): each sandbox's network is made when it starts. `lock` is the
     * caller's lock that serialises every call below; the preparer thread takes it for its
     * short bookkeeping steps, never while it talks to the kernel (links, nft). */
    unsigned prepared;
    pthread_mutex_t *lock;
    /* Connections one sandbox may have open at once (conntrack entries on the host from its
     * address: TCP, UDP flows and DNS to the forwarder alike); past it a new TCP connection is
     * reset and other new flows dropped. 0: LOCAL_NET_MAX_CONNECTIONS_DEFAULT. */
    unsigned max_connections;
    /* New connections (flows) one sandbox may open per second, LOCAL_NET_CONNECTION_BURST times
     * that at once after a quiet time; past it they are refused the same way. Bounds the closed
     * connections conntrack keeps (TIME_WAIT, 120 s), which max_connections does not count.
     * 0: LOCAL_NET_CONNECTION_RATE_DEFAULT. */
    unsigned connection_rate;
} local_net_options;

#define LOCAL_NET_MAX_CONNECTIONS_DEFAULT 4096
#define LOCAL_NET_CONNECTION_RATE_DEFAULT 100
#define LOCAL_NET_CONNECTION_BURST 10

#define LOCAL_NET_PREPARED_DEFAULT 4

/* Sets up the bridge, the nft table and the DNS forwarder. Never fails for lack of root or
 * nftables: local_net_unavailable() then says why and every sandbox keeps loopback only.
 * -ENOMEM, or -EINVAL for a bad option (*ret_error). */
int local_net_start(const local_net_options *o, local_net **ret, char **ret_error);
/* Stops the DNS forwarder; the bridge, the rules and the sandboxes' namespaces stay (running
 * sandboxes keep their network; the next `asb serve` adopts them). */
local_net *local_net_stop(local_net *n);
/* Why sandboxes get loopback only, or NULL when networking is on. */
const char *local_net_unavailable(const local_net *n);

/* What a sandbox gets, from its template (NULL when created directly or the template is gone). */
typedef enum local_net_policy_kind {
    NETPOL_DIRECT,          /* no template: the secure default */
    NETPOL_TEMPLATE_MISSING,/* names a template that does not exist: the secure default */
    NETPOL_DEFAULT,         /* template without networkPolicy: the secure default */
    NETPOL_CUSTOM,          /* template networkPolicy */
    NETPOL_UNMANAGED,       /* networkPolicyManagement: Unmanaged: loopback only */
} local_net_policy_kind;

local_net_policy_kind local_net_policy_of(const json_t *tpl, bool names_template);

/* Gives the sandbox (metadata.uid) its namespace, address and rules before its first process
 * runs. *ret_netns: the namespace path for the OCI config (NULL: a private loopback-only
 * namespace); *ret_nameserver: the resolver for its /etc/resolv.conf (NULL: none). Reuses the
 * namespace and address when they exist already (adoption after a restart). Returns 0, or <0
 * with *ret_error: the sandbox must not start. */
int local_net_attach(local_net *n, const char *uid, local_net_policy_kind kind,
                     const json_t *tpl, char **ret_netns, char **ret_nameserver,
                     char **ret_error);
/* Re-applies the rules of an adopted sandbox (its container runs, its namespace exists) after a
 * restart, or after its template changed. No-op when nothing changed. */
int local_net_refresh(local_net *n, const char *uid, local_net_policy_kind kind, const json_t *tpl);
/* Removes the rules, the veth pair, the namespace and the address. Idempotent. */
void local_net_detach(local_net *n, const char *uid);
/* Detaches every namespace under the state dir whose uid `keep` rejects (orphans). */
void local_net_gc(local_net *n, bool (*keep)(const char *uid, void *userdata), void *userdata);
/* `asb serve --cleanup`: removes what local_net_start and attach made on the host for this
 * state directory (o->state_dir, o->bridge): every sandbox namespace mount under it (and so
 * their veth pairs), the nft table and the bridge. Starts nothing. 0 or a negative errno
 * (something could not be removed). */
int local_net_purge(const local_net_options *o);
/* The warm pools' unclaimed members: as many sandboxes as a burst of claims takes at once, and
 * so as many creates as the pools' refill asks for next. Networks are prepared for that many
 * plus local_net_options.prepared (at most 64). */
void local_net_prepare_demand(local_net *n, unsigned pool_members);
/* Networks ready now; starts that took one and starts that found none (since start). */
void local_net_prepared_counts(local_net *n, unsigned *ret_ready, unsigned long long *ret_taken,
                               unsigned long long *ret_missed);
/* Whether the sandbox has a namespace from an earlier run (adoption). */
bool local_net_has_namespace(local_net *n, const char *uid);

/* The NetworkPolicyEnforced condition and the address of a sandbox. Strings owned by the
 * caller; *ret_ip NULL when the sandbox has none. *ret_blocked is the number of connections the
 * policy dropped (egress + ingress), -1 when nothing enforces one: the structured twin of the
 * count the message words, so nobody has to parse the message. */
void local_net_describe(local_net *n, const char *uid, local_net_policy_kind kind, char **ret_ip,
                        const char **ret_status, const char **ret_reason, char **ret_message,
                        long long *ret_blocked);

/* The 64-bit FNV-1a of "<state_dir>/<what>", the seed of the bridge name, nft table, bridge MAC
 * and veth names of a state directory. Never change it: existing hosts hold names made from it.
 * Exposed for the unit test. */
uint64_t local_net_name_hash(const char *state_dir, const char *what);

/* nft rule text of one direction of a NetworkPolicy (`rules`: the ingress or egress list; NULL
 * or empty denies): one line per allowed (peer, port) ending in `verdict`. Peers other than
 * ipBlock and IPv6 blocks match nothing (listed in *ret_note, owned, NULL if none). Every value
 * is parsed and re-printed, never copied. Exposed for the unit test. */
int local_net_policy_rules(const json_t *rules, bool egress, const char *verdict, char **ret,
                           char **ret_note);
