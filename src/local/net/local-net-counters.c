/* The blocked-connection counters of the sandboxes (docs/network.md), read with one netlink
 * request per named counter (NFT_MSG_GETOBJ) through libnftnl and libmnl. libnftables would first
 * fetch the whole table into its cache (every chain, rule and set element of every sandbox:
 * ~120 ms at 200 sandboxes on the 2-CPU VM) for each status write, the one that flips a new
 * sandbox to Ready included. */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/object.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "local/net/local-net-internal.h"

net_counters *net_counters_free(net_counters *c)
{
    if (c && c->nl)
        mnl_socket_close(c->nl);
    free(c);
    return NULL;
}

int net_counters_open(net_counters **ret)
{
    net_counters *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    if (!(c->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) ||
        mnl_socket_bind(c->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        int e = errno ? -errno : -EIO;
        net_counters_free(c);
        return e;
    }
    c->portid = mnl_socket_get_portid(c->nl);
    *ret = c;
    return 0;
}

static int counter_cb(const struct nlmsghdr *nlh, void *data)
{
    struct nftnl_obj *o = nftnl_obj_alloc();
    if (!o)
        return MNL_CB_ERROR;
    if (nftnl_obj_nlmsg_parse(nlh, o) == 0 && nftnl_obj_is_set(o, NFTNL_OBJ_CTR_PKTS))
        *(long long *)data = (long long)nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
    nftnl_obj_free(o);
    return MNL_CB_OK;
}

struct nftnl_obj *net_counter_obj(const char *table, const char *name)
{
    struct nftnl_obj *o = nftnl_obj_alloc();
    if (!o)
        return NULL;
    nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, table);
    nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
    nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
    return o;
}

int net_counters_packets(net_counters *c, const char *table, const char *name, long long *ret)
{
    char buf[8192]; /* >= MNL_SOCKET_BUFFER_SIZE (a page, at most 8 KiB): one object and the ACK */
    struct nftnl_obj *o = net_counter_obj(table, name);
    if (!o)
        return -ENOMEM;
    uint32_t seq = ++c->seq;
    struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETOBJ, NFPROTO_INET, NLM_F_ACK, seq);
    nftnl_obj_nlmsg_build_payload(nlh, o);
    nftnl_obj_free(o);
    if (mnl_socket_sendto(c->nl, nlh, nlh->nlmsg_len) < 0)
        return -errno;
    long long packets = -1;
    int r;
    do {
        ssize_t k = mnl_socket_recvfrom(c->nl, buf, sizeof(buf));
        if (k < 0)
            return -errno;
        /* The object, then the ACK (MNL_CB_STOP); an error reply sets errno (ENOENT). */
        r = mnl_cb_run(buf, (size_t)k, seq, c->portid, counter_cb, &packets);
    } while (r > 0);
    if (r < 0)
        return errno ? -errno : -EIO;
    if (packets < 0)
        return -ENODATA;
    *ret = packets;
    return 0;
}
