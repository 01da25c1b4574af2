/* Pod CIDR ownership (docs/network.md): what else uses IPv4 space in the network namespace
 * `asb serve` runs in — routes, interface addresses, other `asb serve`s' nft tables — so that a
 * pod CIDR overlapping any of them is refused, and a free /24 can be picked when none is given.
 * Used by local-net.c at start only. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct nft_ctx;

/* The pool a pod CIDR is picked from when none is given: its /24s in order. */
#define LOCAL_NET_CIDR_POOL "10.244.0.0/16"
#define LOCAL_NET_CIDR_POOL_NET 0x0af40000u /* 10.244.0.0 */
#define LOCAL_NET_CIDR_POOL_PREFIX 16
#define LOCAL_NET_CIDR_PICK_PREFIX 24

typedef struct local_net_cidr_use {
    uint32_t net; /* host byte order */
    int prefix;
    char *what; /* "route 10.244.0.0/24 dev asb1234abcd", owned */
} local_net_cidr_use;

typedef struct local_net_cidr_uses {
    local_net_cidr_use *v;
    size_t n;
} local_net_cidr_uses;

/* Collects every use of IPv4 space in this network namespace except ours: the main routing
 * table (/proc/net/route; default routes excluded) and the interface addresses, skipping those of
 * own_bridge, and the pod CIDR of every nft table `inet asb_<8 hex>` other than own_table (read
 * from its c_post chain; nft may be NULL). Returns 0 or -ENOMEM; an unreadable source is skipped.
 */
int local_net_cidr_uses_load(struct nft_ctx *nft, const char *own_bridge, const char *own_table,
                             local_net_cidr_uses *ret);
/* Adds one use (what is copied). 0 or -ENOMEM. */
int local_net_cidr_uses_add(local_net_cidr_uses *u, uint32_t net, int prefix, const char *what);
void local_net_cidr_uses_clear(local_net_cidr_uses *u);

/* The first use overlapping net/prefix (borrowed), or NULL. */
const char *local_net_cidr_conflict(const local_net_cidr_uses *u, uint32_t net, int prefix);
/* The first /24 of LOCAL_NET_CIDR_POOL that overlaps no use: 0, or -EADDRNOTAVAIL. */
int local_net_cidr_pick(const local_net_cidr_uses *u, uint32_t *ret_net);

/* Serialises the check-and-claim of pod CIDRs between `asb serve`s on the machine: an flock on
 * /run/asb-pod-cidr.lock. Returns the fd to close when the bridge exists, or <0 (proceed
 * without). */
int local_net_cidr_lock(void);
