/* A sandbox network's nft objects (docs/network.md "nft layout"): the counters eg_<id> and
 * ig_<id>, the chains o_<id>, i_<id>, h_<id> and the map elements that jump to them, added and
 * deleted in one libnftnl batch (one transaction) on the netfilter socket of net_counters.
 * libnftables would first fetch its cache of the table (every chain, counter and set element of
 * every sandbox; issue 16), for objects whose names and layout are fixed. */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/object.h>
#include <libnftnl/set.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "basic/macro.h"
#include "local/net/local-net-internal.h"

/* Eight messages of a few hundred bytes between BEGIN and END. */
#define BATCH_BUF_SIZE 16384

enum { OBJ_COUNTERS = 2, OBJ_CHAINS = 3 };
static const char *const counter_prefix[OBJ_COUNTERS] = {"eg_", "ig_"};
static const char *const chain_prefix[OBJ_CHAINS] = {"o_", "i_", "h_"};
static const char *const map_of_chain[OBJ_CHAINS] = {"m_out", "m_in", "m_host"};

typedef struct batch {
    struct mnl_nlmsg_batch *b;
    net_counters *c;
    unsigned n_acks; /* messages that ask for an ACK */
} batch;

static struct nlmsghdr *batch_msg(batch *bt, uint16_t type, uint16_t flags)
{
    struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type, NFPROTO_INET,
                                                 flags | NLM_F_ACK, ++bt->c->seq);
    bt->n_acks++;
    return nlh;
}

static int put_counter(batch *bt, const char *table, const char *name, bool add)
{
    struct nftnl_obj *o = net_counter_obj(table, name);
    if (!o)
        return -ENOMEM;
    if (add) { /* the kernel wants the counter's data: zeros */
        nftnl_obj_set_u64(o, NFTNL_OBJ_CTR_PKTS, 0);
        nftnl_obj_set_u64(o, NFTNL_OBJ_CTR_BYTES, 0);
    }
    nftnl_obj_nlmsg_build_payload(
        batch_msg(bt, add ? NFT_MSG_NEWOBJ : NFT_MSG_DELOBJ, add ? NLM_F_CREATE : 0), o);
    nftnl_obj_free(o);
    mnl_nlmsg_batch_next(bt->b);
    return 0;
}

static int put_chain(batch *bt, const char *table, const char *name, bool add)
{
    struct nftnl_chain *c = nftnl_chain_alloc();
    if (!c)
        return -ENOMEM;
    nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, table);
    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
    nftnl_chain_nlmsg_build_payload(
        batch_msg(bt, add ? NFT_MSG_NEWCHAIN : NFT_MSG_DELCHAIN, add ? NLM_F_CREATE : 0), c);
    nftnl_chain_free(c);
    mnl_nlmsg_batch_next(bt->b);
    return 0;
}

/* map { ip : jump chain } (add), or the element of ip (delete). */
static int put_element(batch *bt, const char *table, const char *map, uint32_t ip,
                       const char *chain, bool add)
{
    struct nftnl_set *s = nftnl_set_alloc();
    struct nftnl_set_elem *e = nftnl_set_elem_alloc();
    if (!s || !e) {
        nftnl_set_free(s);
        nftnl_set_elem_free(e);
        return -ENOMEM;
    }
    nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
    nftnl_set_set_str(s, NFTNL_SET_NAME, map);
    uint32_t key = htonl(ip);
    nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &key, sizeof(key));
    if (add) {
        nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_JUMP);
        nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
    }
    nftnl_set_elem_add(s, e); /* s owns e from here */
    nftnl_set_elems_nlmsg_build_payload(
        batch_msg(bt, add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM, add ? NLM_F_CREATE : 0), s);
    nftnl_set_free(s);
    mnl_nlmsg_batch_next(bt->b);
    return 0;
}

/* Sends the batch and reads every reply: the kernel answers each message of the batch (ACK or
 * error) before sendto returns, so nothing is left on the socket for the next request. */
static int batch_send(batch *bt, char *buf)
{
    net_counters *c = bt->c;
    if (mnl_socket_sendto(c->nl, mnl_nlmsg_batch_head(bt->b), mnl_nlmsg_batch_size(bt->b)) < 0)
        return -errno;
    int first_err = 0;
    unsigned seen = 0;
    while (seen < bt->n_acks) {
        ssize_t got = mnl_socket_recvfrom(c->nl, buf, BATCH_BUF_SIZE);
        if (got < 0)
            return -errno;
        int len = (int)got;
        for (struct nlmsghdr *nlh = (struct nlmsghdr *)buf; mnl_nlmsg_ok(nlh, len);
             nlh = mnl_nlmsg_next(nlh, &len)) {
            if (nlh->nlmsg_type != NLMSG_ERROR)
                continue;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
            seen++;
            if (e->error < 0 && !first_err)
                first_err = e->error;
        }
        /* After an error the kernel may stop early (-ENOMEM): what it sent is all there is. */
        if (first_err && seen < bt->n_acks) {
            got = recv(mnl_socket_get_fd(c->nl), buf, BATCH_BUF_SIZE, MSG_DONTWAIT);
            while (got > 0)
                got = recv(mnl_socket_get_fd(c->nl), buf, BATCH_BUF_SIZE, MSG_DONTWAIT);
            break;
        }
    }
    return first_err;
}

typedef int (*batch_fill_fn)(batch *bt, const void *payload);

/* One nftables transaction: begin, what fill puts in, end; sent, and its ACKs read. */
static int transact(net_counters *c, batch_fill_fn fill, const void *payload)
{
    _cleanup_free_ char *buf = malloc(BATCH_BUF_SIZE);
    _cleanup_free_ char *rbuf = malloc(BATCH_BUF_SIZE);
    if (!buf || !rbuf)
        return -ENOMEM;
    batch bt = {.b = mnl_nlmsg_batch_start(buf, BATCH_BUF_SIZE), .c = c};
    if (!bt.b)
        return -ENOMEM;
    nftnl_batch_begin(mnl_nlmsg_batch_current(bt.b), ++c->seq);
    mnl_nlmsg_batch_next(bt.b);
    int k = fill(&bt, payload);
    if (k == 0) {
        nftnl_batch_end(mnl_nlmsg_batch_current(bt.b), ++c->seq);
        mnl_nlmsg_batch_next(bt.b);
        k = batch_send(&bt, rbuf);
    }
    mnl_nlmsg_batch_stop(bt.b);
    return k;
}

typedef struct objects_req {
    const char *table, *id;
    uint32_t ip;
    bool add;
    unsigned only;
} objects_req;

static int fill_objects(batch *bt, const void *payload)
{
    const objects_req *q = payload;
    char names[OBJ_CHAINS][16], cnames[OBJ_COUNTERS][16];
    for (size_t i = 0; i < OBJ_CHAINS; i++)
        snprintf(names[i], sizeof(names[i]), "%s%s", chain_prefix[i], q->id);
    for (size_t i = 0; i < OBJ_COUNTERS; i++)
        snprintf(cnames[i], sizeof(cnames[i]), "%s%s", counter_prefix[i], q->id);
    /* Adding: counters, chains, then the elements that jump to them. Deleting: the reverse
     * (a chain's rules name its counter; an element holds its chain). */
    int k = 0;
    for (size_t step = 0; step < OBJ_COUNTERS + 2 * OBJ_CHAINS && k == 0; step++) {
        size_t s = q->add ? step : OBJ_COUNTERS + 2 * OBJ_CHAINS - 1 - step;
        if (!(q->only & (1u << s)))
            continue;
        if (s < OBJ_COUNTERS)
            k = put_counter(bt, q->table, cnames[s], q->add);
        else if (s < OBJ_COUNTERS + OBJ_CHAINS)
            k = put_chain(bt, q->table, names[s - OBJ_COUNTERS], q->add);
        else {
            size_t i = s - OBJ_COUNTERS - OBJ_CHAINS;
            k = put_element(bt, q->table, map_of_chain[i], q->ip, names[i], q->add);
        }
    }
    return k;
}

/* One transaction of the objects of network id at ip; only (a bit mask of the steps: counters
 * 1, 2; chains 4, 8, 16; elements 32, 64, 128) limits it to some of them. */
static int objects(net_counters *c, const char *table, const char *id, uint32_t ip, bool add,
                   unsigned only)
{
    objects_req q = {table, id, ip, add, only};
    return transact(c, fill_objects, &q);
}

#define ALL_OBJECTS ((1u << (OBJ_COUNTERS + 2 * OBJ_CHAINS)) - 1)

typedef struct element_req {
    const char *table, *set;
    uint32_t ip;
} element_req;

static int fill_del_element(batch *bt, const void *payload)
{
    const element_req *q = payload;
    return put_element(bt, q->table, q->set, q->ip, NULL, false);
}

/* Deletes ip from the set `set` in a transaction of its own: -ENOENT when it is not there. */
static int del_element(net_counters *c, const char *table, const char *set, uint32_t ip)
{
    element_req q = {table, set, ip};
    return transact(c, fill_del_element, &q);
}

void net_objects_forget(net_counters *c, const char *table, uint32_t ip)
{
    static const char *const sets[] = {"s_conns", "s_rate"};
    for (size_t i = 0; i < ELEMENTSOF(sets); i++)
        (void)del_element(c, table, sets[i], ip); /* -ENOENT: never counted, or expired */
}

int net_objects_add(net_counters *c, const char *table, const char *id, uint32_t ip,
                    char **ret_error)
{
    int k = objects(c, table, id, ip, true, ALL_OBJECTS);
    if (k < 0 && ret_error &&
        asprintf(ret_error, "nftnl: adding the chains, counters and map elements of %s: %s", id,
                 strerror(-k)) < 0)
        *ret_error = NULL;
    return k;
}

int net_objects_del(net_counters *c, const char *table, const char *id, uint32_t ip)
{
    /* One transaction; when something is missing already (a half-made network) one each. */
    int k = objects(c, table, id, ip, false, ALL_OBJECTS);
    if (k == 0)
        return 0;
    int ret = 0;
    for (unsigned s = ALL_OBJECTS + 1; s > 1;) {
        s >>= 1;
        int r = objects(c, table, id, ip, false, s);
        if (r < 0 && r != -ENOENT)
            ret = r;
    }
    return ret;
}
