/* Shared between local-net.c (sandboxes, lifecycle), local-net-policy.c (policy -> rule text),
 * local-net-exec.c (running nft), local-net-link.c (rtnetlink), local-net-objects.c and
 * local-net-counters.c (nftnl) and local-net-prepared.c (networks prepared ahead). Not an
 * interface for anything else. */
#pragma once

#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/net/local-dns.h"
#include "local/net/local-net.h"

/* A netfilter netlink socket (libmnl): reads the blocked counters (local-net-counters.c), adds
 * and deletes a network's objects (local-net-objects.c). One per thread that uses it. */
struct mnl_socket;
typedef struct net_counters {
    struct mnl_socket *nl;
    uint32_t portid, seq;
} net_counters;

/* An rtnetlink socket (local-net-link.c), bound to the namespace it was opened in. */
typedef struct net_rtnl net_rtnl;

typedef struct net_sandbox {
    char *uid;
    char id[13]; /* names its veth (asv<id>), chains and counters */
    uint32_t ip; /* host byte order; 0: loopback only */
    char *rules; /* the per-sandbox rule text applied (change detection) */
    char *note;  /* peers that match nothing locally */
} net_sandbox;

/* A network made before a sandbox needs it (local-net-prepared.c), at net/spare-<id>: namespace,
 * veth pair on the bridge, address, and the sandbox's empty chains, counters and map elements
 * (empty chains drop everything: the base table's fall-through rules). */
typedef struct net_spare {
    char id[13];
    uint32_t ip;
    bool ready; /* false: the preparer is still building it (its address is reserved) */
} net_spare;

#define NET_SPARE_PREFIX "spare-"
#define NET_GONE_PREFIX "gone-" /* a torn-down sandbox's network the preparer destroys */
#define NET_PREPARED_MAX 64 /* spares at most, whatever the demand */

typedef struct net_prepared {
    pthread_mutex_t *lock; /* the caller's (local_net_options.lock); guards everything below */
    pthread_cond_t wake;
    pthread_t thread;
    bool running, stop;
    net_counters *nfnl;  /* the preparer's own sockets (one per thread) */
    net_rtnl *rtnl;
    net_spare *spares;
    size_t n_spares;
    /* Torn-down sandboxes' networks (net/gone-<id>: nft objects deleted already) whose veth and
     * namespace the preparer destroys without the lock a start waits for (deleting a veth
     * waits for RCU under the kernel's rtnl lock: 0.3-50 ms measured). Their addresses stay
     * reserved until then. */
    net_spare *gone;
    size_t n_gone;
    unsigned base;   /* spares kept besides the demand; 0: nothing is prepared */
    unsigned demand; /* the warm pools' unclaimed members (local_net_prepare_demand) */
    unsigned long long seq, taken, missed;
    usec_t last_take; /* monotonic */
} net_prepared;

struct local_net {
    char *state_dir, *net_dir, *bridge, *table, *unavailable;
    uint32_t pool, mask, gw; /* host byte order */
    uint32_t next_ip;        /* where net_allocate_ip() looks first (offset from .2) */
    int prefix;
    char pool_s[32], gw_s[16];
    struct nft_ctx *nft;
    net_counters *counters; /* blocked counters, objects (local-net-counters/objects.c) */
    net_rtnl *rtnl;         /* links of the callers' thread (under the caller's lock) */
    net_sandbox *sb;
    size_t n_sb;
    local_dns *dns; /* the forwarder on the bridge address, or NULL */
    /* Per-sandbox kernel limit on DNS datagrams to the forwarder, well above the forwarder's own
     * budget: a flood is cut before it fills the forwarder's socket buffer, where the kernel
     * would drop every sandbox's queries alike. */
    unsigned dns_kernel_rate, dns_kernel_burst;
    const char *dns_off; /* why there is none, or NULL */
    unsigned max_conns;  /* concurrent connections of one sandbox (nft ct count) */
    unsigned conn_rate;  /* new connections per second of one sandbox */
    net_prepared prep;
};

/* Runs nft commands on ctx (one transaction); -EIO with *ret_error ("nft: ...") on failure. */
int net_nft_run(struct nft_ctx *ctx, const char *cmd, char **ret_error);
void net_ip_str(uint32_t ip, char out[16]);
bool net_is_nsfs(const char *path);
/* Whether a sandbox or a spare holds ip; the lowest free address of the pool, or 0. */
bool net_ip_used(local_net *n, uint32_t ip);
uint32_t net_allocate_ip(local_net *n);
/* net/<uid> or net/spare-<id> (dir): the files ip and id, the namespace bound at dir/ns and the
 * links (net_link_sandbox) of network id at ip, on rtnl (the calling thread's). */
int net_network_make(const local_net *n, net_rtnl *rtnl, const char *dir, const char *id,
                     uint32_t ip, char **ret_error);
/* Deletes veth asv<id> (when rtnl), unmounts dir/ns and removes dir. */
void net_network_destroy(net_rtnl *rtnl, const char *dir, const char *id);
/* local-net-objects.c: a network's chains, counters and map elements in table inet <table>,
 * added in one transaction (0, or a negative errno with *ret_error), deleted in one (one by one
 * when that fails: a half-made network; 0, or the first failure other than -ENOENT). */
int net_objects_add(net_counters *c, const char *table, const char *id, uint32_t ip,
                    char **ret_error);
int net_objects_del(net_counters *c, const char *table, const char *id, uint32_t ip);
/* Drops what the connection limits keep of ip (its elements of the dynamic sets s_conns and
 * s_rate), so that no trace of a removed sandbox's address stays in the table and its next
 * holder starts afresh. Errors are ignored: the elements expire by themselves. */
void net_objects_forget(net_counters *c, const char *table, uint32_t ip);

/* local-net-link.c. net_rtnl_open: a socket in the calling thread's network namespace. */
int net_rtnl_open(net_rtnl **ret);
net_rtnl *net_rtnl_free(net_rtnl *r);
/* The index of link `name`: 0 or -ENODEV. */
int net_rtnl_link_index(net_rtnl *r, const char *name, int *ret);
/* Sets the link up (when up) and its MAC address (when mac). */
int net_rtnl_link_set(net_rtnl *r, int ifindex, bool up, const unsigned char *mac);
int net_rtnl_bridge_add(net_rtnl *r, const char *name, const unsigned char mac[6]);
/* Deletes link `name`; 0 when there is none. */
int net_rtnl_link_del(net_rtnl *r, const char *name);
/* ip/prefix on the link (replacing the same address). */
int net_rtnl_addr_replace(net_rtnl *r, int ifindex, uint32_t ip, int prefix);
/* A sandbox's network: a new namespace bound at ns_path (IPv6 off, lo up), a veth pair asv<id>
 * (host, enslaved to bridge, isolated port, up) / eth0 (inside, ip/32, up, a route to gw on
 * the link and the default via gw). 0, or a negative errno with *ret_error ("rtnetlink: <step>
 * <name>: <reason>"); a half-made network is the caller's to remove (unmount ns_path). */
int net_link_sandbox(net_rtnl *host, const char *bridge, const char *id, uint32_t ip,
                     uint32_t gw, const char *ns_path, char **ret_error);

/* local-net-policy.c. */
/* "a.b.c.d/n" (or a bare address as /32): network and prefix (host byte order). 0 or -EINVAL. */
int net_parse_cidr4(const char *s, uint32_t *ret_net, int *ret_prefix);
/* buf_appendf() that keeps the first failure in *r and appends nothing after it: rule text is
 * built from many pieces and checked once. */
struct buf; /* basic/buf.h, not included: local-net-counters.c has a local named buf */
void net_append_rule_text(struct buf *b, int *r, const char *fmt, ...) _printf_(3, 4);
/* Whether an egress rule list lets DNS out (a rule allowing UDP or TCP port 53, or all ports). */
bool net_dns_allowed(const json_t *egress);
/* The rules of sandbox s's o_, i_ and h_ chains (no chain or counter declarations) for its
 * policy, in *ret; *ret_note: the peers that match nothing locally, or NULL. Both owned.
 * 0 or -ENOMEM. */
int net_sandbox_rules(local_net *n, const net_sandbox *s, local_net_policy_kind kind,
                      const json_t *tpl, char **ret, char **ret_note);

/* local-net-prepared.c. All but start/stop are called with prep.lock held. */
int net_prepared_start(local_net *n, pthread_mutex_t *lock, unsigned base);
void net_prepared_stop(local_net *n);
/* Moves a ready spare to net/<uid> (*ret_id, *ret_ip: its names and address) and wakes the
 * preparer; -ENOENT when none is ready. Counts the start for the demand estimate either way. */
int net_prepared_take(local_net *n, const char *uid, char ret_id[13], uint32_t *ret_ip);
bool net_prepared_holds(const local_net *n, uint32_t ip);
/* Renames dir (a sandbox's network; its nft objects deleted) to net/gone-<id> for the preparer to
 * destroy; -ENOENT when the preparer does not run, or another errno: the caller destroys it. */
int net_prepared_retire(local_net *n, const char *dir, const char *id, uint32_t ip);
/* Removes what an earlier run left under net/spare-* and net/gone-* (asb serve killed). */
void net_prepared_remove_stale(local_net *n);

/* local-net-counters.c: named counters of table inet <table>, one netlink request each. */
int net_counters_open(net_counters **ret);
net_counters *net_counters_free(net_counters *c);
/* Packets counted by the counter `name`: 0, or -ENOENT (no such counter) or another errno. */
int net_counters_packets(net_counters *c, const char *table, const char *name, long long *ret);
/* A libnftnl counter object named table/name (for a request about it), or NULL on ENOMEM;
 * nftnl_obj_free it. */
struct nftnl_obj *net_counter_obj(const char *table, const char *name);
