/* Networking of local sandboxes: see local-net.h and docs/network.md. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/buf.h"
#include "basic/hash.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/net/local-dns.h"
#include "local/fs/local-fs.h"
#include "local/net/local-net-cidr.h"
#include "local/net/local-net.h"
#include "local/net/local-net-internal.h"
#include "shared/log.h"

#define DEFAULT_POD_CIDR "10.244.0.0/24"
#define NSFS_MAGIC_ 0x6e736673

uint64_t local_net_name_hash(const char *state_dir, const char *what)
{
    uint64_t h = fnv1a64_update(FNV1A64_INIT, state_dir, state_dir ? strlen(state_dir) : 0);
    h = fnv1a64_update(h, "/", 1);
    return fnv1a64_update(h, what, what ? strlen(what) : 0);
}

void net_ip_str(uint32_t ip, char out[16])
{
    snprintf(out, 16, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

/* ---- helpers: nft, sysctl ---- */

static int nft_run(local_net *n, const char *cmd, char **ret_error)
{
    return net_nft_run(n->nft, cmd, ret_error);
}

static int write_sysctl(const char *path, const char *v)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = write(fd, v, strlen(v)) < 0 ? -errno : 0;
    close(fd);
    return r;
}

/* ---- lifecycle ---- */

static const char *base_table_fmt =
    "table inet %1$s {}\n"
    "delete table inet %1$s\n"
    "table inet %1$s {\n"
    "  map m_out { type ipv4_addr : verdict; }\n"
    "  map m_in { type ipv4_addr : verdict; }\n"
    "  map m_host { type ipv4_addr : verdict; }\n"
    /* Concurrent connections (conntrack entries) of each sandbox address, whatever their
     * destination: the host's conntrack table is one for every sandbox and the host. ct count
     * leaves out closed TCP connections, which conntrack keeps for 120 s (TIME_WAIT): the rate
     * of new ones bounds those. */
    "  set s_conns { type ipv4_addr; size 65535; flags dynamic; }\n"
    "  set s_rate { type ipv4_addr; size 65535; flags dynamic,timeout; timeout 60s; }\n"
    "  chain c_conns {\n"
    "    ct state != new return\n"
    "    add @s_conns { ip saddr ct count over %4$u } jump c_conns_over\n"
    "    update @s_rate { ip saddr limit rate over %5$u/second burst %6$u packets } "
    "jump c_conns_over\n"
    "  }\n"
    "  chain c_conns_over {\n"
    "    meta l4proto tcp reject with tcp reset\n"
    "    drop\n"
    "  }\n"
    "  chain c_dst {\n"
    "    ip daddr vmap @m_in\n"
    "    ip daddr %2$s drop\n"
    "    accept\n"
    "  }\n"
    "  chain c_fwd {\n"
    "    type filter hook forward priority filter - 5; policy accept;\n"
    "    ct state established,related accept\n"
    "    ip saddr %2$s jump c_conns\n"
    "    ip saddr vmap @m_out\n"
    "    ip daddr vmap @m_in\n"
    "    ip saddr %2$s drop\n"
    "    ip daddr %2$s drop\n"
    "    iifname \"%3$s\" drop\n"
    "    oifname \"%3$s\" drop\n"
    "  }\n"
    "  chain c_from_sandbox {\n"
    "    ct state established,related accept\n"
    "    jump c_conns\n"
    "    ip saddr vmap @m_host\n"
    "    drop\n"
    "  }\n"
    "  chain c_input {\n"
    "    type filter hook input priority filter - 5; policy accept;\n"
    "    iifname \"%3$s\" jump c_from_sandbox\n"
    "  }\n"
    "  chain c_output {\n"
    "    type filter hook output priority filter - 5; policy accept;\n"
    "    oifname \"%3$s\" ct state established,related accept\n"
    "    oifname \"%3$s\" ip daddr vmap @m_in\n"
    "    oifname \"%3$s\" ip daddr %2$s drop\n"
    "  }\n"
    "  chain c_post {\n"
    "    type nat hook postrouting priority srcnat; policy accept;\n"
    "    ip saddr %2$s ip daddr != %2$s masquerade\n"
    "  }\n"
    "}\n";

/* The bridge's MAC address. A bridge whose address was never set takes the lowest address of its
 * ports and changes it whenever a veth with a lower one joins or the lowest one leaves (a sandbox
 * created, deleted, or restarted by `asb serve` after a restart). Every sandbox that cached the
 * old gateway address then sends to a MAC that is no longer the bridge's, and its frames are
 * dropped until its ARP entry expires (15-45 s). So the address is pinned: an existing bridge
 * keeps the one it has (running sandboxes cached it), a new one gets one derived from the state
 * dir (locally administered, unicast). *ret_set: whether it must be set. */
static void bridge_mac(local_net *n, bool exists, unsigned char ret[6], bool *ret_set)
{
    uint64_t h = local_net_name_hash(n->state_dir, "bridge-mac");
    for (size_t i = 0; i < 6; i++)
        ret[i] = (unsigned char)(h >> (40 - 8 * i));
    ret[0] = (unsigned char)((ret[0] & 0xfe) | 0x02);
    *ret_set = true;
    if (exists) {
        /* Asked through a socket: it sees this network namespace (/sys may show another). */
        struct ifreq ifr = {0};
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", n->bridge);
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) {
            /* Ours already (created pinned): setting it again would only flush the host's
             * neighbour entries of the bridge. */
            *ret_set = memcmp(ret, ifr.ifr_hwaddr.sa_data, 6) != 0;
            memcpy(ret, ifr.ifr_hwaddr.sa_data, 6);
        }
    }
}

/* The bridge (made, or its address pinned), up, with the gateway address. */
static int setup_bridge(local_net *n, char **ret_error)
{
    int br = 0, k = net_rtnl_link_index(n->rtnl, n->bridge, &br);
    bool exists = k == 0, set_mac;
    unsigned char mac[6];
    const char *step = NULL;
    bridge_mac(n, exists, mac, &set_mac);
    if (!exists && (k = net_rtnl_bridge_add(n->rtnl, n->bridge, mac)) < 0)
        step = "creating the bridge";
    else if (!exists && (k = net_rtnl_link_index(n->rtnl, n->bridge, &br)) < 0)
        step = "finding the bridge";
    else if ((k = net_rtnl_link_set(n->rtnl, br, true, exists && set_mac ? mac : NULL)) < 0)
        step = "setting the bridge up";
    else if ((k = net_rtnl_addr_replace(n->rtnl, br, n->gw, n->prefix)) < 0)
        step = "the bridge's address";
    if (k < 0 && asprintf(ret_error, "rtnetlink: %s %s: %s", step, n->bridge, strerror(-k)) < 0)
        return -ENOMEM;
    return k;
}

/* The nft table first (no nftables: nothing is changed on the host), then the bridge. */
static int setup_host(local_net *n, char **ret_error)
{
    if (geteuid() != 0)
        return asprintf(ret_error, "asb serve runs without root") < 0 ? -ENOMEM : -EPERM;
    if (!(n->nft = nft_ctx_new(NFT_CTX_DEFAULT)))
        return asprintf(ret_error, "cannot initialise libnftables") < 0 ? -ENOMEM : -EIO;
    nft_ctx_buffer_output(n->nft);
    nft_ctx_buffer_error(n->nft);
    int k = net_counters_open(&n->counters);
    if (k < 0)
        return asprintf(ret_error, "cannot open a netfilter socket: %s", strerror(-k)) < 0
                   ? -ENOMEM : k;
    if ((k = net_rtnl_open(&n->rtnl)) < 0)
        return asprintf(ret_error, "cannot open an rtnetlink socket: %s", strerror(-k)) < 0
                   ? -ENOMEM : k;
    _cleanup_free_ char *sys = NULL, *table = NULL;
    k = mkdir_p(n->net_dir, 0700);
    if (k < 0)
        return asprintf(ret_error, "cannot create %s: %s", n->net_dir, strerror(-k)) < 0
                   ? -ENOMEM : k;
    if (asprintf(&table, base_table_fmt, n->table, n->pool_s, n->bridge, n->max_conns,
                 n->conn_rate, n->conn_rate * LOCAL_NET_CONNECTION_BURST) < 0)
        return -ENOMEM;
    if ((k = nft_run(n, table, ret_error)) < 0 || (k = setup_bridge(n, ret_error)) < 0)
        return k;
    if ((k = write_sysctl("/proc/sys/net/ipv4/ip_forward", "1")) < 0)
        return asprintf(ret_error, "cannot enable IPv4 forwarding: %s", strerror(-k)) < 0
                   ? -ENOMEM : k;
    if (asprintf(&sys, "/proc/sys/net/ipv4/conf/%s/send_redirects", n->bridge) >= 0)
        write_sysctl(sys, "0");
    return 0;
}

static bool valid_ifname(const char *s)
{
    size_t l = strlen(s);
    if (l == 0 || l > 15)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_'))
            return false;
    return true;
}

static net_sandbox *add_sb(local_net *n, const char *uid);
static uint32_t stored_ip(local_net *n, const char *uid);
bool local_net_has_namespace(local_net *n, const char *uid);

/* Reserves the addresses of namespaces that survived a restart before anything is allocated
 * (their rules come back when the reconciler sees their containers; the rest is collected). */
static void preload(local_net *n)
{
    _cleanup_closedir_ DIR *d = opendir(n->net_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || de->d_type != DT_DIR ||
            strncmp(de->d_name, NET_SPARE_PREFIX, strlen(NET_SPARE_PREFIX)) == 0 ||
            strncmp(de->d_name, NET_GONE_PREFIX, strlen(NET_GONE_PREFIX)) == 0 ||
            !local_net_has_namespace(n, de->d_name))
            continue;
        uint32_t ip = stored_ip(n, de->d_name);
        bool dup = false;
        for (size_t i = 0; i < n->n_sb; i++)
            dup |= n->sb[i].ip == ip;
        net_sandbox *s = ip && !dup ? add_sb(n, de->d_name) : NULL;
        if (s)
            s->ip = ip;
    }
}

static void set_pool(local_net *n, uint32_t net, int prefix)
{
    char a[16];
    n->pool = net;
    n->prefix = prefix;
    n->mask = 0xffffffffu << (32 - n->prefix);
    n->gw = n->pool + 1;
    net_ip_str(n->pool, a);
    snprintf(n->pool_s, sizeof(n->pool_s), "%s/%d", a, n->prefix);
    net_ip_str(n->gw, n->gw_s);
}

static char *cidr_file(local_net *n)
{
    char *p = NULL;
    return asprintf(&p, "%s/pod-cidr", n->net_dir) < 0 ? NULL : p;
}

/* The pod CIDR of an earlier run of this state dir ($ASB_STATE_DIR/net/pod-cidr), if any. */
static bool recorded_cidr(local_net *n, uint32_t *ret_net, int *ret_prefix)
{
    _cleanup_free_ char *path = cidr_file(n);
    _cleanup_fclose_ FILE *f = path ? fopen(path, "re") : NULL;
    char line[64];
    if (!f || !fgets(line, sizeof(line), f))
        return false;
    line[strcspn(line, "\n")] = '\0';
    return net_parse_cidr4(line, ret_net, ret_prefix) == 0 && *ret_prefix >= 8 && *ret_prefix <= 29;
}

/* Claims the pod CIDR (docs/network.md, "Pod CIDR ownership"): the given one (explicit), else the
 * one this state dir recorded, else the first free /24 of LOCAL_NET_CIDR_POOL; refused
 * (-EADDRINUSE, *ret_error) when it overlaps a route or address of this network namespace or
 * another asb serve's table. Our own bridge and table (same state dir) do not count. */
static int claim_cidr(local_net *n, bool explicit, char **ret_error)
{
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    local_net_cidr_uses uses = {0};
    if (nft) {
        nft_ctx_buffer_output(nft);
        nft_ctx_buffer_error(nft);
    }
    int k = local_net_cidr_uses_load(nft, n->bridge, n->table, &uses);
    if (nft)
        nft_ctx_free(nft);
    if (k < 0)
        return k;
    uint32_t net = n->pool;
    int prefix = n->prefix;
    const char *source = "--pod-cidr";
    if (!explicit && recorded_cidr(n, &net, &prefix))
        source = "the state directory";
    else if (!explicit) {
        prefix = LOCAL_NET_CIDR_PICK_PREFIX;
        if (local_net_cidr_pick(&uses, &net) < 0) {
            local_net_cidr_uses_clear(&uses);
            return asprintf(ret_error,
                            "no free /%d in %s for the pod CIDR (every one overlaps a route, an "
                            "address or another asb serve); give one with --pod-cidr",
                            LOCAL_NET_CIDR_PICK_PREFIX, LOCAL_NET_CIDR_POOL) < 0
                       ? -ENOMEM
                       : -EADDRNOTAVAIL;
        }
        source = "picked";
    }
    set_pool(n, net, prefix);
    const char *what = local_net_cidr_conflict(&uses, net, prefix);
    k = 0;
    if (what)
        k = asprintf(ret_error,
                     "pod CIDR %s (%s) overlaps %s in this network namespace; choose another "
                     "--pod-cidr",
                     n->pool_s, source, what) < 0
                ? -ENOMEM
                : -EADDRINUSE;
    else if (strcmp(source, "picked") == 0)
        log_info("pod CIDR picked", "pod_cidr", n->pool_s, "pool", LOCAL_NET_CIDR_POOL);
    local_net_cidr_uses_clear(&uses);
    return k;
}

/* Bridge networking: claims the pod CIDR and sets up the host under a machine-wide lock, so two
 * `asb serve`s starting at once never pick the same one. -EADDRINUSE/-EADDRNOTAVAIL: refused;
 * any other failure only turns networking off (n->unavailable). */
static int start_bridge(local_net *n, bool explicit_cidr, char **ret_error)
{
    int lock = geteuid() == 0 ? local_net_cidr_lock() : -EPERM;
    int k = geteuid() == 0 ? claim_cidr(n, explicit_cidr, ret_error) : 0;
    if (k < 0) {
        if (lock >= 0)
            close(lock);
        return k;
    }
    char *err = NULL;
    k = setup_host(n, &err);
    if (k == 0) {
        _cleanup_free_ char *path = cidr_file(n), *line = NULL;
        if (!path || asprintf(&line, "%s\n", n->pool_s) < 0 || fs_write_file(path, line, 0600) < 0)
            log_warn("cannot record the pod CIDR", "path", path ? path : n->net_dir);
    }
    if (lock >= 0)
        close(lock);
    if (k < 0 && n->nft) {
        nft_ctx_free(n->nft);
        n->nft = NULL;
    }
    if (k < 0) {
        n->counters = net_counters_free(n->counters);
        n->rtnl = net_rtnl_free(n->rtnl);
    }
    if (k < 0) {
        if (asprintf(&n->unavailable, "networking unavailable: %s", err ? err : strerror(-k)) < 0)
            n->unavailable = NULL;
        free(err);
        if (!n->unavailable)
            n->unavailable = strdup("networking unavailable");
        return 0;
    }
    return 1;
}

int local_net_start(const local_net_options *o, local_net **ret, char **ret_error)
{
    local_net *n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->max_conns = o->max_connections ? o->max_connections : LOCAL_NET_MAX_CONNECTIONS_DEFAULT;
    n->conn_rate = o->connection_rate ? o->connection_rate : LOCAL_NET_CONNECTION_RATE_DEFAULT;
    uint64_t h = local_net_name_hash(o->state_dir, "");
    char hex[9];
    snprintf(hex, sizeof(hex), "%08x", (unsigned)(h & 0xffffffffu));
    if (!(n->state_dir = strdup(o->state_dir)) ||
        asprintf(&n->net_dir, "%s/net", o->state_dir) < 0 ||
        asprintf(&n->table, "asb_%s", hex) < 0 ||
        (o->bridge && *o->bridge ? !(n->bridge = strdup(o->bridge))
                                 : asprintf(&n->bridge, "asb%s", hex) < 0))
        n->bridge = NULL;
    if (!n->state_dir || !n->net_dir || !n->table || !n->bridge) {
        local_net_stop(n);
        return -ENOMEM;
    }
    if (!valid_ifname(n->bridge)) {
        if (asprintf(ret_error, "bridge name \"%s\": 1-15 characters of [A-Za-z0-9_-]",
                     n->bridge) < 0)
            *ret_error = NULL;
        local_net_stop(n);
        return -EINVAL;
    }
    bool explicit_cidr = o->pod_cidr && *o->pod_cidr;
    const char *cidr = explicit_cidr ? o->pod_cidr : DEFAULT_POD_CIDR;
    uint32_t net;
    int prefix;
    if (net_parse_cidr4(cidr, &net, &prefix) < 0 || prefix < 8 || prefix > 29) {
        if (asprintf(ret_error, "pod CIDR \"%s\": want an IPv4 CIDR from /8 to /29", cidr) < 0)
            *ret_error = NULL;
        local_net_stop(n);
        return -EINVAL;
    }
    set_pool(n, net, prefix);
    const char *mode = o->mode && *o->mode ? o->mode : "bridge";
    if (strcmp(mode, "none") == 0) {
        n->unavailable = strdup("networking is off (asb serve --network=none)");
    } else if (strcmp(mode, "bridge") != 0) {
        if (asprintf(ret_error, "--network \"%s\": want bridge or none", mode) < 0)
            *ret_error = NULL;
        local_net_stop(n);
        return -EINVAL;
    } else {
        int k = start_bridge(n, explicit_cidr, ret_error);
        if (k < 0) {
            log_error("pod CIDR refused", "error", *ret_error ? *ret_error : strerror(-k));
            local_net_stop(n);
            return k;
        }
        if (k > 0) {
            unsigned rate = o->dns_limits.rate ? o->dns_limits.rate : LOCAL_DNS_DEFAULT_RATE;
            unsigned burst = o->dns_limits.burst ? o->dns_limits.burst : LOCAL_DNS_DEFAULT_BURST;
            n->dns_kernel_rate = rate > 1000000 / 4 ? 1000000 : rate * 4;
            n->dns_kernel_burst = burst > 1000000 / 4 ? 1000000 : burst * 4;
            net_prepared_remove_stale(n); /* killed with networks prepared: not adopted */
            preload(n);
            n->dns = local_dns_start(n->gw, o->dns_upstream, &o->dns_limits, &n->dns_off);
            int pk = net_prepared_start(n, o->lock, o->prepared);
            if (pk < 0)
                log_warn("networks are not prepared ahead", "error", strerror(-pk));
        }
    }
    if (n->unavailable)
        log_warn("sandboxes get loopback only", "reason", n->unavailable);
    else
        log_info("sandbox networking on", "bridge", n->bridge, "pod_cidr", n->pool_s, "table",
                 n->table);
    *ret = n;
    return 0;
}

const char *local_net_unavailable(const local_net *n)
{
    return n ? n->unavailable : "networking is off";
}

local_net *local_net_stop(local_net *n)
{
    if (!n)
        return NULL;
    net_prepared_stop(n);
    local_dns_stop(n->dns);
    if (n->nft)
        nft_ctx_free(n->nft);
    net_counters_free(n->counters);
    net_rtnl_free(n->rtnl);
    for (size_t i = 0; i < n->n_sb; i++) {
        free(n->sb[i].uid);
        free(n->sb[i].rules);
        free(n->sb[i].note);
    }
    free(n->sb);
    free(n->state_dir);
    free(n->net_dir);
    free(n->bridge);
    free(n->table);
    free(n->unavailable);
    free(n);
    return NULL;
}

/* ---- per sandbox ---- */

static net_sandbox *find_sb(local_net *n, const char *uid)
{
    for (size_t i = 0; i < n->n_sb; i++)
        if (strcmp(n->sb[i].uid, uid) == 0)
            return &n->sb[i];
    return NULL;
}

static char *sb_path(local_net *n, const char *uid, const char *leaf);

/* The id of a sandbox's network (its veth asv<id>, chains and counters): the one recorded in
 * net/<uid>/id (a network prepared ahead was named before its sandbox existed), else the hash of
 * the state dir and uid (networks of older versions). */
static void sandbox_id(local_net *n, const char *uid, char ret[13])
{
    _cleanup_free_ char *p = sb_path(n, uid, "id");
    _cleanup_fclose_ FILE *f = p ? fopen(p, "re") : NULL;
    char text[32];
    if (f && fgets(text, sizeof(text), f)) {
        text[strcspn(text, "\n")] = '\0';
        if (strlen(text) == 12 && strspn(text, "0123456789abcdef") == 12) {
            memcpy(ret, text, 13);
            return;
        }
    }
    snprintf(ret, 13, "%012llx",
             (unsigned long long)(local_net_name_hash(n->state_dir, uid) & 0xffffffffffffull));
}

static net_sandbox *add_sb(local_net *n, const char *uid)
{
    net_sandbox *s = find_sb(n, uid);
    if (s)
        return s;
    net_sandbox *v = realloc(n->sb, (n->n_sb + 1) * sizeof(*v));
    if (!v)
        return NULL;
    n->sb = v;
    s = &v[n->n_sb];
    *s = (net_sandbox){.uid = strdup(uid)};
    if (!s->uid)
        return NULL;
    sandbox_id(n, uid, s->id);
    n->n_sb++;
    return s;
}

static void drop_sb(local_net *n, const char *uid)
{
    net_sandbox *s = find_sb(n, uid);
    if (!s)
        return;
    free(s->uid);
    free(s->rules);
    free(s->note);
    *s = n->sb[--n->n_sb];
}

static char *sb_path(local_net *n, const char *uid, const char *leaf)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s%s%s", n->net_dir, uid, leaf ? "/" : "", leaf ? leaf : "") < 0)
        return NULL;
    return p;
}

bool net_is_nsfs(const char *path)
{
    struct statfs st;
    return statfs(path, &st) == 0 && (unsigned long)st.f_type == NSFS_MAGIC_;
}

bool local_net_has_namespace(local_net *n, const char *uid)
{
    _cleanup_free_ char *p = sb_path(n, uid, "ns");
    return p && net_is_nsfs(p);
}

static uint32_t stored_ip(local_net *n, const char *uid)
{
    _cleanup_free_ char *p = sb_path(n, uid, "ip");
    _cleanup_fclose_ FILE *f = p ? fopen(p, "re") : NULL;
    char text[32];
    uint32_t ip;
    int prefix;
    if (!f || !fgets(text, sizeof(text), f))
        return 0;
    text[strcspn(text, "\n")] = '\0';
    if (net_parse_cidr4(text, &ip, &prefix) < 0 || prefix != 32 || (ip & n->mask) != n->pool)
        return 0;
    return ip;
}

bool net_ip_used(local_net *n, uint32_t ip)
{
    for (size_t i = 0; i < n->n_sb; i++)
        if (n->sb[i].ip == ip)
            return true;
    return net_prepared_holds(n, ip);
}

uint32_t net_allocate_ip(local_net *n)
{
    /* Next fit, not lowest first: an address just given back (host conntrack entries of its
     * old connections, neighbour entries) is the last to be handed out again. */
    uint32_t size = ~n->mask + 1, span = size - 3; /* .0, .1 (bridge) and broadcast excluded */
    for (uint32_t i = 0; i < span; i++) {
        uint32_t off = 2 + (n->next_ip + i) % span;
        if (!net_ip_used(n, n->pool + off)) {
            n->next_ip = (off - 2 + 1) % span;
            return n->pool + off;
        }
    }
    return 0;
}

static int apply_rules(local_net *n, net_sandbox *s, local_net_policy_kind kind, const json_t *tpl,
                       bool fresh, char **ret_error)
{
    _cleanup_free_ char *rules = NULL, *note = NULL, *cmd = NULL;
    int k = net_sandbox_rules(n, s, kind, tpl, &rules, &note);
    if (k < 0)
        return k;
    if (!fresh && s->rules && strcmp(s->rules, rules) == 0)
        return 0;
    const char *t = n->table, *id = s->id;
    /* Fresh: the chains, counters and map elements first. Until the rules below fill the
     * chains, a packet from or to the address falls through them to the base chains' drops
     * (as for a network prepared ahead). */
    if (fresh && (k = net_objects_add(n->counters, t, id, s->ip, ret_error)) < 0)
        return k;
    k = asprintf(&cmd,
                 "flush chain inet %1$s o_%2$s\nflush chain inet %1$s i_%2$s\n"
                 "flush chain inet %1$s h_%2$s\n%3$s",
                 t, id, rules);
    if (k < 0)
        return -ENOMEM;
    if ((k = nft_run(n, cmd, ret_error)) < 0)
        return k;
    free(s->rules);
    s->rules = TAKE_PTR(rules);
    free(s->note);
    s->note = TAKE_PTR(note);
    return 0;
}

static void remove_rules(local_net *n, const net_sandbox *s)
{
    if (n->counters && s->ip) {
        net_objects_del(n->counters, n->table, s->id, s->ip);
        net_objects_forget(n->counters, n->table, s->ip);
    }
}

void net_network_destroy(net_rtnl *rtnl, const char *dir, const char *id)
{
    char veth[16];
    snprintf(veth, sizeof(veth), "asv%s", id);
    /* Deleted now rather than with its namespace, which the kernel destroys later (and never
     * while a stray process still holds it). */
    int k = rtnl ? net_rtnl_link_del(rtnl, veth) : 0;
    if (k < 0)
        log_warn("cannot delete veth", "veth", veth, "error", strerror(-k));
    _cleanup_free_ char *ns = NULL;
    if (asprintf(&ns, "%s/ns", dir) >= 0)
        while (umount2(ns, MNT_DETACH) == 0)
            ;
    fs_rm_rf(dir);
}

/* The preparer's thread destroys it when it runs, off the caller's lock; else done here. */
static void remove_namespace(local_net *n, const char *uid, const char *id, uint32_t ip)
{
    _cleanup_free_ char *dir = sb_path(n, uid, NULL);
    if (!dir)
        return;
    if (!ip)
        ip = stored_ip(n, uid);
    if (ip && local_net_has_namespace(n, uid) && net_prepared_retire(n, dir, id, ip) == 0)
        return;
    net_network_destroy(n->rtnl, dir, id);
}

int net_network_make(const local_net *n, net_rtnl *rtnl, const char *dir, const char *id,
                     uint32_t ip, char **ret_error)
{
    char a[16];
    net_ip_str(ip, a);
    _cleanup_free_ char *ns = NULL, *ipf = NULL, *idf = NULL, *ipline = NULL, *idline = NULL;
    if (asprintf(&ns, "%s/ns", dir) < 0 || asprintf(&ipf, "%s/ip", dir) < 0 ||
        asprintf(&idf, "%s/id", dir) < 0 || asprintf(&ipline, "%s/32\n", a) < 0 ||
        asprintf(&idline, "%s\n", id) < 0)
        return -ENOMEM;
    int k;
    if ((k = mkdir_p(dir, 0700)) < 0 || (k = fs_write_file(ipf, ipline, 0600)) < 0 ||
        (k = fs_write_file(idf, idline, 0600)) < 0 || (k = fs_write_file(ns, "", 0600)) < 0)
        return asprintf(ret_error, "cannot write %s: %s", dir, strerror(-k)) < 0 ? -ENOMEM : k;
    return net_link_sandbox(rtnl, n->bridge, id, ip, n->gw, ns, ret_error);
}

/* A network made for the sandbox now (no prepared one ready, or preparing is off): its rules
 * first (the base table drops everything from and to a pod address until then, and no process
 * of the sandbox runs before both are done), then namespace and veth. */
static int make_network(local_net *n, net_sandbox *s, local_net_policy_kind kind,
                        const json_t *tpl, char **ret_error)
{
    _cleanup_free_ char *dir = sb_path(n, s->uid, NULL);
    if (!dir)
        return -ENOMEM;
    if (!(s->ip = net_allocate_ip(n)))
        return asprintf(ret_error, "the pod CIDR %s has no free address", n->pool_s) < 0
                   ? -ENOMEM : -ENOSPC;
    usec_t t0 = now_usec(CLOCK_MONOTONIC);
    int k = apply_rules(n, s, kind, tpl, true, ret_error);
    usec_t t1 = now_usec(CLOCK_MONOTONIC);
    if (k < 0 || (k = net_network_make(n, n->rtnl, dir, s->id, s->ip, ret_error)) < 0)
        return k;
    char a[16], ms[2][32];
    net_ip_str(s->ip, a);
    snprintf(ms[0], 32, "%.1f", (double)(t1 - t0) / 1000.0);
    snprintf(ms[1], 32, "%.1f", (double)(now_usec(CLOCK_MONOTONIC) - t1) / 1000.0);
    log_debug("sandbox network attached", "uid", s->uid, "address", a, "nft_ms", ms[0],
              "link_ms", ms[1]);
    return 0;
}

int local_net_attach(local_net *n, const char *uid, local_net_policy_kind kind,
                     const json_t *tpl, char **ret_netns, char **ret_nameserver,
                     char **ret_error)
{
    *ret_netns = *ret_nameserver = NULL;
    if (n->unavailable || kind == NETPOL_UNMANAGED) {
        local_net_detach(n, uid);
        return add_sb(n, uid) ? 0 : -ENOMEM;
    }
    net_sandbox *s = find_sb(n, uid);
    bool adopt = local_net_has_namespace(n, uid);
    if (!adopt || !s || !s->ip) {
        uint32_t keep = adopt ? stored_ip(n, uid) : 0;
        if (!adopt || !keep || (s && s->ip != keep) || (!s && net_ip_used(n, keep))) {
            local_net_detach(n, uid);
            adopt = false;
            keep = 0;
        }
        if (!(s = add_sb(n, uid)))
            return -ENOMEM;
        s->ip = keep;
    }
    _cleanup_free_ char *ns = sb_path(n, uid, "ns");
    if (!ns)
        return -ENOMEM;
    int k;
    if (!adopt) {
        /* A network prepared ahead: renamed into place; its chains get the rules now. */
        char id[13];
        uint32_t ip;
        if (net_prepared_take(n, uid, id, &ip) == 0) {
            memcpy(s->id, id, sizeof(id));
            s->ip = ip;
            k = apply_rules(n, s, kind, tpl, false, ret_error);
        } else
            k = make_network(n, s, kind, tpl, ret_error);
        if (k < 0) {
            local_net_detach(n, uid);
            return k;
        }
    } else if ((k = apply_rules(n, s, kind, tpl, !s->rules, ret_error)) < 0)
        return k;
    *ret_netns = TAKE_PTR(ns);
    bool dns = kind != NETPOL_CUSTOM ||
               net_dns_allowed(json_object_get(
                   json_object_get(json_object_get(tpl, "spec"), "networkPolicy"), "egress"));
    *ret_nameserver = n->dns && dns ? strdup(n->gw_s) : NULL;
    return 0;
}

int local_net_refresh(local_net *n, const char *uid, local_net_policy_kind kind, const json_t *tpl)
{
    if (n->unavailable)
        return 0;
    net_sandbox *s = find_sb(n, uid);
    if (kind == NETPOL_UNMANAGED || (s && !s->ip))
        return 0; /* changes of management need a new container: not done under it */
    if (!local_net_has_namespace(n, uid))
        return 0;
    _cleanup_free_ char *netns = NULL, *ns = NULL, *err = NULL;
    int k = local_net_attach(n, uid, kind, tpl, &netns, &ns, &err);
    if (k < 0)
        log_warn("cannot apply the network policy", "uid", uid, "error", err ? err : strerror(-k));
    return k;
}

void local_net_detach(local_net *n, const char *uid)
{
    net_sandbox *s = find_sb(n, uid);
    char id[13];
    uint32_t ip = 0;
    if (s) {
        remove_rules(n, s);
        snprintf(id, sizeof(id), "%s", s->id);
        ip = s->ip;
        drop_sb(n, uid);
    } else
        sandbox_id(n, uid, id);
    remove_namespace(n, uid, id, ip);
}

void local_net_gc(local_net *n, bool (*keep)(const char *uid, void *userdata), void *userdata)
{
    _cleanup_closedir_ DIR *d = opendir(n->net_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        /* Networks prepared ahead or being destroyed are the preparer's. */
        if (de->d_name[0] == '.' || de->d_type != DT_DIR ||
            strncmp(de->d_name, NET_SPARE_PREFIX, strlen(NET_SPARE_PREFIX)) == 0 ||
            strncmp(de->d_name, NET_GONE_PREFIX, strlen(NET_GONE_PREFIX)) == 0)
            continue;
        if (!keep(de->d_name, userdata)) {
            log_info("removing the network of a sandbox that is not running", "uid", de->d_name);
            local_net_detach(n, de->d_name);
        }
    }
    for (size_t i = 0; i < n->n_sb;) {
        if (keep(n->sb[i].uid, userdata)) {
            i++;
            continue;
        }
        _cleanup_free_ char *uid = strdup(n->sb[i].uid);
        if (!uid)
            break;
        local_net_detach(n, uid);
    }
}

/* Packets counted by the sandbox's two named counters (egress, ingress); -1 when unknown. */
static void counters(local_net *n, const char *id, long long *ret_eg, long long *ret_ig)
{
    char eg[16], ig[16];
    long long v;
    *ret_eg = *ret_ig = -1;
    if (!n->counters)
        return;
    snprintf(eg, sizeof(eg), "eg_%s", id);
    snprintf(ig, sizeof(ig), "ig_%s", id);
    if (net_counters_packets(n->counters, n->table, eg, &v) == 0)
        *ret_eg = v;
    if (net_counters_packets(n->counters, n->table, ig, &v) == 0)
        *ret_ig = v;
}

void local_net_describe(local_net *n, const char *uid, local_net_policy_kind kind, char **ret_ip,
                        const char **ret_status, const char **ret_reason, char **ret_message,
                        long long *ret_blocked)
{
    *ret_ip = NULL;
    *ret_message = NULL;
    *ret_blocked = -1;
    net_sandbox *s = find_sb(n, uid);
    if (kind == NETPOL_UNMANAGED) {
        *ret_status = "False";
        *ret_reason = "Unmanaged";
        *ret_message = strdup("networkPolicyManagement is Unmanaged: nothing enforces a policy "
                              "locally, so the sandbox has loopback only");
        return;
    }
    if (n->unavailable || !s || !s->ip) {
        *ret_status = "False";
        *ret_reason = "NetworkUnavailable";
        if (asprintf(ret_message, "%s: the sandbox has loopback only",
                     n->unavailable ? n->unavailable : "no network attached") < 0)
            *ret_message = NULL;
        return;
    }
    char a[16];
    net_ip_str(s->ip, a);
    *ret_ip = strdup(a);
    long long eg, ig;
    counters(n, s->id, &eg, &ig);
    static const char *const what[] = {
        [NETPOL_DIRECT] = "no template: the secure default (egress to public addresses only, "
                          "no ingress)",
        [NETPOL_TEMPLATE_MISSING] = "the template does not exist: the secure default (egress to "
                                    "public addresses only, no ingress)",
        [NETPOL_DEFAULT] = "the template's secure default (egress to public addresses only, no "
                           "ingress)",
        [NETPOL_CUSTOM] = "the template's networkPolicy",
    };
    *ret_status = "True";
    *ret_reason = kind == NETPOL_CUSTOM ? "NetworkPolicy" : "SecureDefault";
    *ret_blocked = MAX(eg, 0) + MAX(ig, 0);
    if (asprintf(ret_message, "%s; blocked: %lld (egress %lld, ingress %lld)%s%s%s%s", what[kind],
                 *ret_blocked, MAX(eg, 0), MAX(ig, 0), s->note ? "; " : "", s->note ? s->note : "",
                 n->dns_off ? "; " : "", n->dns_off ? n->dns_off : "") < 0)
        *ret_message = NULL;
}

/* ---- asb serve --cleanup ---- */

int local_net_purge(const local_net_options *o)
{
    uint64_t h = local_net_name_hash(o->state_dir, "");
    char hex[9];
    snprintf(hex, sizeof(hex), "%08x", (unsigned)(h & 0xffffffffu));
    _cleanup_free_ char *net_dir = NULL, *table = NULL, *bridge = NULL, *cmd = NULL;
    if (asprintf(&net_dir, "%s/net", o->state_dir) < 0 || asprintf(&table, "asb_%s", hex) < 0 ||
        (o->bridge && *o->bridge ? !(bridge = strdup(o->bridge))
                                 : asprintf(&bridge, "asb%s", hex) < 0))
        return -ENOMEM;
    int ret = 0;
    /* Namespaces: unmounting the last reference destroys each one and its veth pair. */
    _cleanup_closedir_ DIR *d = opendir(net_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        _cleanup_free_ char *ns = NULL;
        if (de->d_name[0] == '.' || asprintf(&ns, "%s/%s/ns", net_dir, de->d_name) < 0)
            continue;
        if (net_is_nsfs(ns) && umount2(ns, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
            ret = -errno;
    }
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    if (nft) {
        nft_ctx_buffer_output(nft);
        nft_ctx_buffer_error(nft);
        /* "table ... {}" first so that the delete of a missing table is no error. */
        if (asprintf(&cmd, "table inet %1$s {}\ndelete table inet %1$s\n", table) >= 0 &&
            nft_run_cmd_from_buffer(nft, cmd) != 0)
            ret = -EIO;
        nft_ctx_free(nft);
    }
    net_rtnl *rtnl = NULL;
    if (valid_ifname(bridge) && if_nametoindex(bridge) > 0) {
        int k = net_rtnl_open(&rtnl);
        if (k < 0 || (k = net_rtnl_link_del(rtnl, bridge)) < 0)
            ret = k;
        net_rtnl_free(rtnl);
    }
    return ret;
}
