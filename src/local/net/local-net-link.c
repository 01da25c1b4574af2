/* Links, addresses and routes of the sandbox networks through rtnetlink (libmnl), in place of
 * iproute2's `ip -batch` (issue 16): a network used to cost two `fork` + `execve ip` (one of
 * them in a new namespace) and a third one at teardown; each request here is one sendto and
 * one recv on a socket kept open. A new namespace is made by a short-lived thread that
 * unshares its own network namespace (the process and its other threads stay where they are),
 * binds it at its path and opens a NETLINK_ROUTE socket there, which keeps talking to that
 * namespace after the thread is gone. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/net/local-net-internal.h"

/* A GETLINK reply of one link (without statistics) is 1-2 KiB; 16 KiB leaves room. */
#define RTNL_BUF_SIZE 16384

struct net_rtnl {
    struct mnl_socket *nl;
    uint32_t portid, seq;
    char buf[RTNL_BUF_SIZE];
};

net_rtnl *net_rtnl_free(net_rtnl *r)
{
    if (r && r->nl)
        mnl_socket_close(r->nl);
    free(r);
    return NULL;
}

/* Wraps fd (a NETLINK_ROUTE socket, owned from here on, closed on failure too). */
static int rtnl_from_fd(int fd, net_rtnl **ret)
{
    net_rtnl *r = calloc(1, sizeof(*r));
    if (!r) {
        close(fd);
        return -ENOMEM;
    }
    if (!(r->nl = mnl_socket_fdopen(fd))) {
        close(fd);
        free(r);
        return -ENOMEM;
    }
    if (mnl_socket_bind(r->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        int e = errno ? -errno : -EIO;
        net_rtnl_free(r);
        return e;
    }
    r->portid = mnl_socket_get_portid(r->nl);
    *ret = r;
    return 0;
}

int net_rtnl_open(net_rtnl **ret)
{
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    return fd < 0 ? -errno : rtnl_from_fd(fd, ret);
}

/* Sends the request in r->buf and reads up to its ACK; cb sees the replies before it. */
static int rtnl_talk(net_rtnl *r, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
    nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = ++r->seq;
    uint32_t seq = nlh->nlmsg_seq;
    if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
        return -errno;
    int k;
    do {
        ssize_t got = mnl_socket_recvfrom(r->nl, r->buf, sizeof(r->buf));
        if (got < 0)
            return -errno;
        errno = 0;
        k = mnl_cb_run(r->buf, (size_t)got, seq, r->portid, cb, data);
    } while (k > 0);
    return k < 0 ? (errno ? -errno : -EIO) : 0;
}

static struct nlmsghdr *link_msg(net_rtnl *r, uint16_t type, uint16_t flags, int ifindex,
                                 struct ifinfomsg **ret_ifm)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(r->buf);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = flags;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    ifm->ifi_index = ifindex;
    if (ret_ifm)
        *ret_ifm = ifm;
    return nlh;
}

static int link_index_cb(const struct nlmsghdr *nlh, void *data)
{
    const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
    *(int *)data = ifm->ifi_index;
    return MNL_CB_OK;
}

int net_rtnl_link_index(net_rtnl *r, const char *name, int *ret)
{
    struct nlmsghdr *nlh = link_msg(r, RTM_GETLINK, 0, 0, NULL);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
    int index = 0, k = rtnl_talk(r, nlh, link_index_cb, &index);
    if (k < 0)
        return k;
    if (index <= 0)
        return -ENODEV;
    *ret = index;
    return 0;
}

int net_rtnl_link_set(net_rtnl *r, int ifindex, bool up, const unsigned char *mac)
{
    struct ifinfomsg *ifm;
    struct nlmsghdr *nlh = link_msg(r, RTM_NEWLINK, 0, ifindex, &ifm);
    if (up) {
        ifm->ifi_flags = IFF_UP;
        ifm->ifi_change = IFF_UP;
    }
    if (mac)
        mnl_attr_put(nlh, IFLA_ADDRESS, 6, mac);
    return rtnl_talk(r, nlh, NULL, NULL);
}

int net_rtnl_bridge_add(net_rtnl *r, const char *name, const unsigned char mac[6])
{
    struct nlmsghdr *nlh = link_msg(r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, NULL);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    mnl_attr_put(nlh, IFLA_ADDRESS, 6, mac);
    struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
    mnl_attr_nest_end(nlh, info);
    return rtnl_talk(r, nlh, NULL, NULL);
}

int net_rtnl_link_del(net_rtnl *r, const char *name)
{
    struct nlmsghdr *nlh = link_msg(r, RTM_DELLINK, 0, 0, NULL);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    int k = rtnl_talk(r, nlh, NULL, NULL);
    return k == -ENODEV ? 0 : k;
}

/* A veth pair: `name` here, enslaved to master (an ifindex; created down), its peer `peer`
 * in the namespace ns_fd. */
static int veth_add(net_rtnl *r, const char *name, int master, const char *peer, int ns_fd)
{
    struct nlmsghdr *nlh = link_msg(r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0, NULL);
    mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
    mnl_attr_put_u32(nlh, IFLA_MASTER, (uint32_t)master);
    struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
    struct nlattr *p = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
    struct ifinfomsg *pifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifm));
    pifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
    mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)ns_fd);
    mnl_attr_nest_end(nlh, p);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, info);
    return rtnl_talk(r, nlh, NULL, NULL);
}

/* Bridge port flag `isolated on` (no frame to another isolated port), then up. */
static int port_isolate_up(net_rtnl *r, int ifindex)
{
    struct ifinfomsg *ifm;
    struct nlmsghdr *nlh = link_msg(r, RTM_NEWLINK, 0, ifindex, &ifm);
    ifm->ifi_flags = IFF_UP;
    ifm->ifi_change = IFF_UP;
    struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
    mnl_attr_put_strz(nlh, IFLA_INFO_SLAVE_KIND, "bridge");
    struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_SLAVE_DATA);
    mnl_attr_put_u8(nlh, IFLA_BRPORT_ISOLATED, 1);
    mnl_attr_nest_end(nlh, data);
    mnl_attr_nest_end(nlh, info);
    return rtnl_talk(r, nlh, NULL, NULL);
}

int net_rtnl_addr_replace(net_rtnl *r, int ifindex, uint32_t ip, int prefix)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(r->buf);
    nlh->nlmsg_type = RTM_NEWADDR;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = (unsigned char)prefix;
    ifa->ifa_index = (unsigned)ifindex;
    uint32_t be = htonl(ip);
    mnl_attr_put_u32(nlh, IFA_LOCAL, be);
    mnl_attr_put_u32(nlh, IFA_ADDRESS, be);
    return rtnl_talk(r, nlh, NULL, NULL);
}

/* A main-table route to dst/dst_len (0: default) out of oif, through gw when non-zero (scope
 * universe), else on the link. */
static int route_add(net_rtnl *r, uint32_t dst, int dst_len, uint32_t gw, int oif)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(r->buf);
    nlh->nlmsg_type = RTM_NEWROUTE;
    nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
    rtm->rtm_family = AF_INET;
    rtm->rtm_dst_len = (unsigned char)dst_len;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_protocol = RTPROT_BOOT;
    rtm->rtm_scope = gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
    rtm->rtm_type = RTN_UNICAST;
    if (dst_len > 0)
        mnl_attr_put_u32(nlh, RTA_DST, htonl(dst));
    if (gw)
        mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gw));
    mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)oif);
    return rtnl_talk(r, nlh, NULL, NULL);
}

/* ---- a new namespace ---- */

typedef struct ns_job {
    const char *path;
    int ns_fd, rtnl_fd, err;
    const char *step;
} ns_job;

static void *ns_thread(void *arg)
{
    ns_job *j = arg;
    /* Only this thread moves: the namespace is per task. */
    if (unshare(CLONE_NEWNET) < 0) {
        j->err = -errno;
        j->step = "unshare(CLONE_NEWNET)";
        return NULL;
    }
    if (mount("/proc/thread-self/ns/net", j->path, NULL, MS_BIND, NULL) < 0) {
        j->err = -errno;
        j->step = "bind mount of the namespace";
        return NULL;
    }
    /* Sandboxes have IPv4 only (docs/network.md); /proc/sys/net is this thread's namespace's. */
    static const char *const v6[] = {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                                     "/proc/sys/net/ipv6/conf/default/disable_ipv6"};
    for (size_t i = 0; i < ELEMENTSOF(v6); i++) {
        _cleanup_close_ int fd = open(v6[i], O_WRONLY | O_CLOEXEC);
        if (fd >= 0)
            (void)!write(fd, "1", 1);
    }
    if ((j->ns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0 ||
        (j->rtnl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) < 0) {
        j->err = -errno;
        j->step = "opening the namespace";
    }
    return NULL;
}

/* A new network namespace bound at path: *ret_ns_fd refers to it, *ret_rtnl talks to it. */
static int ns_new(const char *path, int *ret_ns_fd, net_rtnl **ret_rtnl, const char **ret_step)
{
    ns_job j = {.path = path, .ns_fd = -1, .rtnl_fd = -1};
    pthread_t t;
    int k = -pthread_create(&t, NULL, ns_thread, &j);
    if (k < 0) {
        *ret_step = "pthread_create";
        return k;
    }
    pthread_join(t, NULL);
    if (j.err < 0) {
        if (j.ns_fd >= 0)
            close(j.ns_fd);
        if (j.rtnl_fd >= 0)
            close(j.rtnl_fd);
        *ret_step = j.step;
        return j.err;
    }
    if ((k = rtnl_from_fd(j.rtnl_fd, ret_rtnl)) < 0) {
        close(j.ns_fd);
        *ret_step = "netlink socket in the namespace";
        return k;
    }
    *ret_ns_fd = j.ns_fd;
    return 0;
}

static int fail(char **ret_error, const char *step, const char *name, int k)
{
    if (ret_error && asprintf(ret_error, "rtnetlink: %s%s%s: %s", step, name ? " " : "",
                              name ? name : "", strerror(-k)) < 0)
        *ret_error = NULL;
    return k;
}

int net_link_sandbox(net_rtnl *host, const char *bridge, const char *id, uint32_t ip, uint32_t gw,
                     const char *ns_path, char **ret_error)
{
    char veth[16];
    snprintf(veth, sizeof(veth), "asv%s", id);
    _cleanup_close_ int ns_fd = -1;
    net_rtnl *in = NULL;
    const char *step = NULL;
    int k = ns_new(ns_path, &ns_fd, &in, &step);
    if (k < 0)
        return fail(ret_error, step, ns_path, k);
    int br = 0, eth0 = 0, port = 0;
    /* Inside: lo (index 1 in every namespace) up. Host: the pair, its host end on the bridge
     * (down until isolated). Inside: eth0's /32, up, the gateway on the link, the default. */
    if ((k = net_rtnl_link_set(in, 1, true, NULL)) < 0)
        step = "lo up";
    else if ((k = net_rtnl_link_index(host, bridge, &br)) < 0)
        step = "bridge";
    else if ((k = veth_add(host, veth, br, "eth0", ns_fd)) < 0)
        step = "veth pair";
    else if ((k = net_rtnl_link_index(in, "eth0", &eth0)) < 0)
        step = "eth0";
    else if ((k = net_rtnl_addr_replace(in, eth0, ip, 32)) < 0)
        step = "eth0 address";
    else if ((k = net_rtnl_link_set(in, eth0, true, NULL)) < 0)
        step = "eth0 up";
    else if ((k = route_add(in, gw, 32, 0, eth0)) < 0)
        step = "route to the gateway";
    else if ((k = route_add(in, 0, 0, gw, eth0)) < 0)
        step = "default route";
    else if ((k = net_rtnl_link_index(host, veth, &port)) < 0 ||
             (k = port_isolate_up(host, port)) < 0)
        step = "isolated bridge port up";
    net_rtnl_free(in);
    return k < 0 ? fail(ret_error, step, veth, k) : 0;
}
