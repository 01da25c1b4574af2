/* Network policy to nft rule text: a template's NetworkPolicy (or the secure default egress)
 * becomes the rules of a sandbox's o_/i_/h_ chains (local-net.h, docs/network.md). Pure text:
 * nothing here touches the host. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "local/net/local-net-internal.h"
#include "local/net/local-net.h"

/* "a.b.c.d/n" (or a bare address as /32): network and prefix. -EINVAL otherwise. */
int net_parse_cidr4(const char *s, uint32_t *ret_net, int *ret_prefix)
{
    char text[64];
    if (!s || strlen(s) >= sizeof(text))
        return -EINVAL;
    snprintf(text, sizeof(text), "%s", s);
    char *slash = strchr(text, '/');
    long prefix = 32;
    if (slash) {
        char *end;
        *slash = '\0';
        errno = 0;
        prefix = strtol(slash + 1, &end, 10);
        if (errno || end == slash + 1 || *end || prefix < 0 || prefix > 32)
            return -EINVAL;
    }
    struct in_addr a;
    if (inet_pton(AF_INET, text, &a) != 1)
        return -EINVAL;
    uint32_t mask = prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
    *ret_net = ntohl(a.s_addr) & mask;
    *ret_prefix = (int)prefix;
    return 0;
}

static bool cidr4_contains(uint32_t net, int prefix, uint32_t inner, int inner_prefix)
{
    uint32_t mask = prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
    return inner_prefix >= prefix && (inner & mask) == net;
}

/* ---- policy -> nft rule text ---- */

void net_append_rule_text(buf *b, int *r, const char *fmt, ...)
{
    if (*r < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    *r = buf_appendv(b, fmt, ap);
    va_end(ap);
}

/* The address match of one peer ("" = any), or NULL when it matches nothing here. */
static char *peer_match(const json_t *peer, const char *field, buf *note, int *note_r)
{
    const json_t *ipb = json_object_get(peer, "ipBlock");
    if (!json_is_object(ipb)) {
        net_append_rule_text(note, note_r, "%s%s", note->len ? "; " : "",
                             "podSelector/namespaceSelector peers match nothing locally");
        return NULL;
    }
    const char *cidr = json_string_value(json_object_get(ipb, "cidr"));
    uint32_t net;
    int prefix;
    if (cidr && strchr(cidr, ':'))
        return NULL; /* IPv6: sandboxes have IPv4 only */
    if (net_parse_cidr4(cidr, &net, &prefix) < 0) {
        net_append_rule_text(note, note_r,
                             "%sipBlock.cidr \"%.64s\" is not an IPv4 CIDR: matches nothing",
                             note->len ? "; " : "", cidr ? cidr : "");
        return NULL;
    }
    char a[16];
    net_ip_str(net, a);
    _cleanup_buf_ buf ex = BUF_INIT, m = BUF_INIT;
    int r = 0;
    size_t i;
    json_t *e;
    json_array_foreach (json_object_get(ipb, "except"), i, e) {
        const char *es = json_string_value(e);
        uint32_t en;
        int ep;
        if (es && strchr(es, ':'))
            continue;
        if (net_parse_cidr4(es, &en, &ep) < 0) {
            net_append_rule_text(
                note, note_r,
                "%sipBlock.except \"%.64s\" is not an IPv4 CIDR: the peer matches nothing",
                note->len ? "; " : "", es ? es : "");
            return NULL;
        }
        char b[16];
        net_ip_str(en, b);
        net_append_rule_text(&ex, &r, "%s%s/%d", ex.len ? ", " : "", b, ep);
    }
    net_append_rule_text(&m, &r, "ip %s %s/%d", field, a, prefix);
    if (ex.len)
        net_append_rule_text(&m, &r, " ip %s != { %s }", field, ex.data);
    return r < 0 ? NULL : buf_steal(&m, NULL);
}

/* The port match of one NetworkPolicyPort ("" = any), or NULL when it matches nothing. */
static char *port_match(const json_t *port, buf *note, int *note_r)
{
    const char *proto = json_string_value(json_object_get(port, "protocol"));
    if (!proto)
        proto = "TCP";
    const char *p = strcmp(proto, "TCP") == 0    ? "tcp"
                    : strcmp(proto, "UDP") == 0  ? "udp"
                    : strcmp(proto, "SCTP") == 0 ? "sctp"
                                                 : NULL;
    if (!p) {
        net_append_rule_text(note, note_r, "%sprotocol \"%.16s\" matches nothing",
                             note->len ? "; " : "", proto);
        return NULL;
    }
    const json_t *pv = json_object_get(port, "port"), *ev = json_object_get(port, "endPort");
    char *out = NULL;
    if (!pv) {
        if (asprintf(&out, "meta l4proto %s", p) < 0)
            return NULL;
        return out;
    }
    if (!json_is_integer(pv) || json_integer_value(pv) < 1 || json_integer_value(pv) > 65535) {
        net_append_rule_text(note, note_r, "%snamed or invalid port matches nothing locally",
                             note->len ? "; " : "");
        return NULL;
    }
    json_int_t lo = json_integer_value(pv), hi = lo;
    if (json_is_integer(ev) && json_integer_value(ev) >= lo && json_integer_value(ev) <= 65535)
        hi = json_integer_value(ev);
    int k = hi > lo ? asprintf(&out, "meta l4proto %s th dport %d-%d", p, (int)lo, (int)hi)
                    : asprintf(&out, "meta l4proto %s th dport %d", p, (int)lo);
    return k < 0 ? NULL : out;
}

int local_net_policy_rules(const json_t *rules, bool egress, const char *verdict, char **ret,
                           char **ret_note)
{
    _cleanup_buf_ buf out = BUF_INIT, note = BUF_INIT;
    int r = 0, note_r = 0;
    const char *peers_key = egress ? "to" : "from", *field = egress ? "daddr" : "saddr";
    size_t i;
    json_t *rule;
    net_append_rule_text(&out, &r, "%s", "");
    json_array_foreach (rules, i, rule) {
        const json_t *peers = json_object_get(rule, peers_key),
                     *ports = json_object_get(rule, "ports");
        size_t np = json_array_size(peers), nq = json_array_size(ports);
        for (size_t a = 0; a < MAX(np, (size_t)1); a++) {
            _cleanup_free_ char *pm =
                np ? peer_match(json_array_get(peers, a), field, &note, &note_r) : strdup("");
            if (!pm)
                continue;
            for (size_t b = 0; b < MAX(nq, (size_t)1); b++) {
                _cleanup_free_ char *qm =
                    nq ? port_match(json_array_get(ports, b), &note, &note_r) : strdup("");
                if (!qm)
                    continue;
                net_append_rule_text(&out, &r, "%s%s%s%s%s\n", pm, *pm && *qm ? " " : "", qm,
                                     *pm || *qm ? " " : "", verdict);
            }
        }
    }
    if (r < 0 || note_r < 0)
        return -ENOMEM;
    /* No note stays NULL; the rule text is "" when no rule matches anything. */
    bool has_note = note.len > 0;
    _cleanup_free_ char *text = buf_steal(&out, NULL);
    _cleanup_free_ char *why = has_note ? buf_steal(&note, NULL) : NULL;
    if (!text || (has_note && !why))
        return -ENOMEM;
    *ret = TAKE_PTR(text);
    *ret_note = TAKE_PTR(why);
    return 0;
}

/* The secure default egress (UPSTREAM.md §2.5) plus what reaches this host locally. */
static json_t *default_egress(const local_net *n)
{
    static const char *const blocked[] = {"10.0.0.0/8",     "172.16.0.0/12", "192.168.0.0/16",
                                          "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8",
                                          "0.0.0.0/8"};
    json_t *except = json_array();
    bool pool_covered = false;
    for (size_t i = 0; i < ELEMENTSOF(blocked); i++) {
        uint32_t net;
        int prefix;
        json_array_append_new(except, json_string(blocked[i]));
        if (net_parse_cidr4(blocked[i], &net, &prefix) == 0 &&
            cidr4_contains(net, prefix, n->pool, n->prefix))
            pool_covered = true;
    }
    if (!pool_covered)
        json_array_append_new(except, json_string(n->pool_s));
    return json_pack("[{s:[{s:{s:s, s:o}}]}]", "to", "ipBlock", "cidr", "0.0.0.0/0", "except",
                     except);
}

local_net_policy_kind local_net_policy_of(const json_t *tpl, bool names_template)
{
    if (!tpl)
        return names_template ? NETPOL_TEMPLATE_MISSING : NETPOL_DIRECT;
    const json_t *spec = json_object_get(tpl, "spec");
    const char *m = json_string_value(json_object_get(spec, "networkPolicyManagement"));
    if (m && strcmp(m, "Unmanaged") == 0)
        return NETPOL_UNMANAGED;
    return json_is_object(json_object_get(spec, "networkPolicy")) ? NETPOL_CUSTOM : NETPOL_DEFAULT;
}

/* Whether an egress rule list lets DNS out: a rule allowing UDP or TCP port 53, or all ports.
 * Only then may the sandbox use the forwarder (an empty egress list means no DNS either). */
bool net_dns_allowed(const json_t *egress)
{
    size_t i, j;
    json_t *rule, *port;
    json_array_foreach (egress, i, rule) {
        const json_t *ports = json_object_get(rule, "ports");
        if (json_array_size(ports) == 0)
            return true;
        json_array_foreach (ports, j, port) {
            const char *proto = json_string_value(json_object_get(port, "protocol"));
            const json_t *pv = json_object_get(port, "port"),
                         *ev = json_object_get(port, "endPort");
            if (proto && strcmp(proto, "TCP") != 0 && strcmp(proto, "UDP") != 0)
                continue;
            if (!pv)
                return true;
            json_int_t lo = json_integer_value(pv),
                       hi = json_is_integer(ev) ? json_integer_value(ev) : lo;
            if (json_is_integer(pv) && lo <= 53 && 53 <= hi)
                return true;
        }
    }
    return false;
}

/* The per-sandbox chains' rules (no chain/counter declarations). */
int net_sandbox_rules(local_net *n, const net_sandbox *s, local_net_policy_kind kind,
                      const json_t *tpl, char **ret, char **ret_note)
{
    _cleanup_(json_decrefp) json_t *def = NULL;
    const json_t *eg, *in;
    if (kind == NETPOL_CUSTOM) {
        const json_t *np = json_object_get(json_object_get(tpl, "spec"), "networkPolicy");
        eg = json_object_get(np, "egress");
        in = json_object_get(np, "ingress");
    } else {
        if (!(def = default_egress(n)))
            return -ENOMEM;
        eg = def;
        in = NULL; /* only the router, which uses unix sockets */
    }
    _cleanup_free_ char *e = NULL, *en = NULL, *i = NULL, *inote = NULL;
    int k = local_net_policy_rules(eg, true, "goto c_dst", &e, &en);
    if (k < 0 || (k = local_net_policy_rules(in, false, "accept", &i, &inote)) < 0)
        return k;
    _cleanup_buf_ buf out = BUF_INIT;
    int r = 0;
    for (char *line = e, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        *nl = '\0';
        net_append_rule_text(&out, &r, "add rule inet %s o_%s %s\n", n->table, s->id, line);
    }
    net_append_rule_text(&out, &r, "add rule inet %s o_%s counter name \"eg_%s\" drop\n", n->table,
                         s->id, s->id);
    for (char *line = i, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        *nl = '\0';
        net_append_rule_text(&out, &r, "add rule inet %s i_%s %s\n", n->table, s->id, line);
    }
    net_append_rule_text(&out, &r, "add rule inet %s i_%s counter name \"ig_%s\" drop\n", n->table,
                         s->id, s->id);
    /* Traffic to the host itself: only the DNS forwarder, and only when egress allows DNS. */
    if (net_dns_allowed(eg)) {
        net_append_rule_text(&out, &r,
                             "add rule inet %1$s h_%2$s ip daddr %3$s udp dport 53 limit rate over "
                             "%4$u/second burst %5$u packets drop\n",
                             n->table, s->id, n->gw_s, n->dns_kernel_rate, n->dns_kernel_burst);
        net_append_rule_text(&out, &r,
                             "add rule inet %1$s h_%2$s ip daddr %3$s meta l4proto { tcp, udp } th "
                             "dport 53 accept\n",
                             n->table, s->id, n->gw_s);
    }
    net_append_rule_text(&out, &r, "add rule inet %s h_%s counter name \"eg_%s\" drop\n", n->table,
                         s->id, s->id);
    if (r < 0 || !(*ret = buf_steal(&out, NULL)))
        return -ENOMEM;
    *ret_note = NULL;
    if (en || inote) {
        if (asprintf(ret_note, "%s%s%s", en ? en : "", en && inote ? "; " : "",
                     inote ? inote : "") < 0)
            *ret_note = NULL;
    }
    return 0;
}
