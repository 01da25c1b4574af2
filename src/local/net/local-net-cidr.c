/* Pod CIDR ownership: see local-net-cidr.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <nftables/libnftables.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/net/local-net-cidr.h"

static uint32_t mask_of(int prefix)
{
    return prefix <= 0 ? 0 : 0xffffffffu << (32 - prefix);
}

static void cidr_str(uint32_t net, int prefix, char out[20])
{
    snprintf(out, 20, "%u.%u.%u.%u/%d", net >> 24, (net >> 16) & 255, (net >> 8) & 255, net & 255,
             prefix);
}

int local_net_cidr_uses_add(local_net_cidr_uses *u, uint32_t net, int prefix, const char *what)
{
    local_net_cidr_use *v = realloc(u->v, (u->n + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    u->v = v;
    char *w = strdup(what);
    if (!w)
        return -ENOMEM;
    v[u->n++] = (local_net_cidr_use){net & mask_of(prefix), prefix, w};
    return 0;
}

void local_net_cidr_uses_clear(local_net_cidr_uses *u)
{
    for (size_t i = 0; i < u->n; i++)
        free(u->v[i].what);
    free(u->v);
    *u = (local_net_cidr_uses){0};
}

/* The main routing table, without default routes and routes of own_bridge. */
static int load_routes(const char *own_bridge, local_net_cidr_uses *u)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/net/route", "re");
    char line[512];
    if (!f || !fgets(line, sizeof(line), f)) /* the header */
        return 0;
    while (fgets(line, sizeof(line), f)) {
        char ifname[64], what[128], c[20];
        unsigned dst, gw, flags, mask;
        if (sscanf(line, "%63s %x %x %x %*d %*d %*d %x", ifname, &dst, &gw, &flags, &mask) != 5)
            continue;
        if (mask == 0 || strcmp(ifname, own_bridge) == 0)
            continue;
        /* The kernel prints the addresses as native integers of network-order bytes. */
        uint32_t net = ntohl(dst), m = ntohl(mask);
        int prefix = __builtin_popcount(m);
        cidr_str(net, prefix, c);
        snprintf(what, sizeof(what), "route %s dev %s", c, ifname);
        if (local_net_cidr_uses_add(u, net, prefix, what) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* IPv4 addresses of every interface but own_bridge (a /32 has no route in the main table). */
static int load_addresses(const char *own_bridge, local_net_cidr_uses *u)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) < 0)
        return 0;
    int r = 0;
    for (struct ifaddrs *i = ifa; i && r == 0; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask ||
            strcmp(i->ifa_name, own_bridge) == 0)
            continue;
        uint32_t a = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr),
                 m = ntohl(((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr);
        int prefix = __builtin_popcount(m);
        char what[128], c[20];
        if ((a >> 24) == 127)
            continue; /* loopback: never a pod CIDR (refused with 127/8 anyway) */
        cidr_str(a, prefix, c);
        snprintf(what, sizeof(what), "address %s of %s", c, i->ifa_name);
        r = local_net_cidr_uses_add(u, a, prefix, what);
    }
    freeifaddrs(ifa);
    return r;
}

static bool asb_table_name(const char *s)
{
    if (!s || strncmp(s, "asb_", 4) != 0 || strlen(s) != 12)
        return false;
    return strspn(s + 4, "0123456789abcdef") == 8;
}

/* Runs one nft command with JSON output; the parsed output or NULL. */
static json_t *nft_json(struct nft_ctx *nft, const char *cmd)
{
    unsigned flags = nft_ctx_output_get_flags(nft);
    nft_ctx_output_set_flags(nft, flags | NFT_CTX_OUTPUT_JSON);
    int k = nft_run_cmd_from_buffer(nft, cmd);
    nft_ctx_output_set_flags(nft, flags);
    const char *out = nft_ctx_get_output_buffer(nft);
    return k == 0 && out ? json_loads(out, 0, NULL) : NULL;
}

/* The pod CIDR of another asb serve's table: the `ip saddr A/N` match of its c_post chain. */
static int load_table(struct nft_ctx *nft, const char *table, local_net_cidr_uses *u)
{
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "list chain inet %s c_post", table);
    _cleanup_(json_decrefp) json_t *j = nft_json(nft, cmd);
    size_t i, k;
    json_t *e, *x;
    json_array_foreach (json_object_get(j, "nftables"), i, e) {
        json_array_foreach (json_object_get(json_object_get(e, "rule"), "expr"), k, x) {
            const json_t *m = json_object_get(x, "match");
            const json_t *pl = json_object_get(json_object_get(m, "left"), "payload");
            const json_t *pf = json_object_get(json_object_get(m, "right"), "prefix");
            const char *field = json_string_value(json_object_get(pl, "field"));
            const char *addr = json_string_value(json_object_get(pf, "addr"));
            json_int_t len = json_integer_value(json_object_get(pf, "len"));
            struct in_addr a;
            if (!field || strcmp(field, "saddr") != 0 || !addr ||
                inet_pton(AF_INET, addr, &a) != 1 || len < 1 || len > 32)
                continue;
            char what[128], c[20];
            cidr_str(ntohl(a.s_addr), (int)len, c);
            snprintf(what, sizeof(what), "nft table inet %s (pod CIDR %s)", table, c);
            return local_net_cidr_uses_add(u, ntohl(a.s_addr), (int)len, what);
        }
    }
    return 0;
}

static int load_tables(struct nft_ctx *nft, const char *own_table, local_net_cidr_uses *u)
{
    _cleanup_(json_decrefp) json_t *j = nft_json(nft, "list tables inet");
    size_t i;
    json_t *e;
    json_array_foreach (json_object_get(j, "nftables"), i, e) {
        const char *name = json_string_value(json_object_get(json_object_get(e, "table"), "name"));
        if (!asb_table_name(name) || strcmp(name, own_table) == 0)
            continue;
        int k = load_table(nft, name, u);
        if (k < 0)
            return k;
    }
    return 0;
}

int local_net_cidr_uses_load(struct nft_ctx *nft, const char *own_bridge, const char *own_table,
                             local_net_cidr_uses *ret)
{
    local_net_cidr_uses u = {0};
    int k = load_routes(own_bridge, &u);
    if (k == 0)
        k = load_addresses(own_bridge, &u);
    if (k == 0 && nft)
        k = load_tables(nft, own_table, &u);
    if (k < 0) {
        local_net_cidr_uses_clear(&u);
        return k;
    }
    *ret = u;
    return 0;
}

const char *local_net_cidr_conflict(const local_net_cidr_uses *u, uint32_t net, int prefix)
{
    for (size_t i = 0; i < u->n; i++) {
        uint32_t m = mask_of(MIN(prefix, u->v[i].prefix));
        if ((net & m) == (u->v[i].net & m))
            return u->v[i].what;
    }
    return NULL;
}

int local_net_cidr_pick(const local_net_cidr_uses *u, uint32_t *ret_net)
{
    uint32_t step = 1u << (32 - LOCAL_NET_CIDR_PICK_PREFIX);
    uint32_t count = 1u << (LOCAL_NET_CIDR_PICK_PREFIX - LOCAL_NET_CIDR_POOL_PREFIX);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t net = LOCAL_NET_CIDR_POOL_NET + i * step;
        if (!local_net_cidr_conflict(u, net, LOCAL_NET_CIDR_PICK_PREFIX)) {
            *ret_net = net;
            return 0;
        }
    }
    return -EADDRNOTAVAIL;
}

int local_net_cidr_lock(void)
{
    int fd = open("/run/asb-pod-cidr.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            int e = -errno;
            close(fd);
            return e;
        }
    }
    return fd;
}
