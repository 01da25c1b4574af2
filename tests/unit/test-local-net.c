/* NetworkPolicy rules -> nft text (local-net.c): exact matches, fail-closed peers, no template
 * text copied verbatim. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "local/container/local-bundle.h"
#include "local/fs/local-fs.h"
#include "local/net/local-net.h"
#include "local/net/local-net-internal.h"
#include "unit.h"

static char *rules_of(const char *json, bool egress, char **note)
{
    json_error_t e;
    json_t *r = json_loads(json, 0, &e);
    char *out = NULL;
    *note = NULL;
    CHECK(r != NULL);
    CHECK_INT_EQ(local_net_policy_rules(r, egress, "accept", &out, note), 0);
    json_decref(r);
    return out;
}

TEST(empty_list_denies)
{
    char *note, *out = rules_of("[]", true, &note);
    CHECK_STR_EQ(out, "");
    CHECK(note == NULL);
    free(out);
    CHECK_INT_EQ(local_net_policy_rules(NULL, false, "accept", &out, &note), 0);
    CHECK_STR_EQ(out, "");
    free(out);
}

TEST(ipblock_except_ports)
{
    char *note, *out = rules_of(
        "[{\"to\":[{\"ipBlock\":{\"cidr\":\"10.99.0.5/24\",\"except\":[\"10.99.0.128/25\"]}}],"
        "\"ports\":[{\"protocol\":\"TCP\",\"port\":8080},{\"protocol\":\"UDP\",\"port\":53,"
        "\"endPort\":60}]}]",
        true, &note);
    CHECK_STR_EQ(out, "ip daddr 10.99.0.0/24 ip daddr != { 10.99.0.128/25 } meta l4proto tcp th dport 8080 accept\n"
                      "ip daddr 10.99.0.0/24 ip daddr != { 10.99.0.128/25 } meta l4proto udp th dport 53-60 accept\n");
    CHECK(note == NULL);
    free(out);
}

TEST(ingress_matches_source_and_any)
{
    char *note, *out = rules_of("[{}, {\"ports\":[{\"protocol\":\"SCTP\"}]}]", false, &note);
    CHECK_STR_EQ(out, "accept\nmeta l4proto sctp accept\n");
    free(out);
    out = rules_of("[{\"from\":[{\"ipBlock\":{\"cidr\":\"203.0.113.0/24\"}}]}]", false, &note);
    CHECK_STR_EQ(out, "ip saddr 203.0.113.0/24 accept\n");
    free(out);
}

TEST(fail_closed)
{
    char *note, *out = rules_of(
        "[{\"to\":[{\"podSelector\":{}},{\"ipBlock\":{\"cidr\":\"1.2.3.4/8; flush ruleset\"}},"
        "{\"ipBlock\":{\"cidr\":\"::/0\"}},"
        "{\"ipBlock\":{\"cidr\":\"0.0.0.0/0\",\"except\":[\"bad }\"]}}],"
        "\"ports\":[{\"port\":\"http\"},{\"protocol\":\"ICMP\",\"port\":1}]}]",
        true, &note);
    CHECK_STR_EQ(out, "");
    CHECK(note != NULL);
    CHECK(strstr(note, "podSelector") != NULL);
    CHECK(strstr(note, "flush") == NULL || strstr(note, "\"1.2.3.4/8; flush ruleset\"") != NULL);
    free(out);
    free(note);
    /* A good peer with only bad ports allows nothing. */
    out = rules_of("[{\"ports\":[{\"port\":70000}]}]", true, &note);
    CHECK_STR_EQ(out, "");
    free(out);
    free(note);
}

TEST(policy_kind)
{
    json_t *t = json_pack("{s:{s:s}}", "spec", "networkPolicyManagement", "Unmanaged");
    CHECK(local_net_policy_of(t, true) == NETPOL_UNMANAGED);
    json_decref(t);
    t = json_pack("{s:{s:{}}}", "spec", "networkPolicy");
    CHECK(local_net_policy_of(t, true) == NETPOL_CUSTOM);
    json_decref(t);
    t = json_pack("{s:{}}", "spec");
    CHECK(local_net_policy_of(t, true) == NETPOL_DEFAULT);
    json_decref(t);
    CHECK(local_net_policy_of(NULL, false) == NETPOL_DIRECT);
    CHECK(local_net_policy_of(NULL, true) == NETPOL_TEMPLATE_MISSING);
}

TEST(bundle_joins_the_namespace_and_names_the_forwarder)
{
    char tmpl[] = "/tmp/asb-net-unit-XXXXXX", bundle[256], path[512], buf[256];
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    snprintf(bundle, sizeof(bundle), "%s/bundle", dir);
    local_bundle_params p = {
        .bundle_dir = bundle, .hostname = "net", .uid = 1000, .gid = 1000,
        .workspace_dir = "/nonexistent/ws", .home_dir = "/nonexistent/home",
        .inject_bin = "/nonexistent/bin", .inject_lib = "/nonexistent/lib", .pids_limit = 64,
        .cgroups_path = "/asb/test", .netns_path = "/state/net/uid/ns", .nameserver = "10.244.0.1",
    };
    char *err = NULL;
    CHECK_INT_EQ(local_bundle_write(&p, &err), 0);
    snprintf(path, sizeof(path), "%s/config.json", bundle);
    json_t *cfg = json_load_file(path, 0, NULL);
    CHECK(cfg != NULL);
    size_t i, found = 0;
    json_t *ns;
    json_array_foreach(json_object_get(json_object_get(cfg, "linux"), "namespaces"), i, ns) {
        const char *t = json_string_value(json_object_get(ns, "type"));
        if (t && strcmp(t, "network") == 0) {
            CHECK_STR_EQ(json_string_value(json_object_get(ns, "path")), "/state/net/uid/ns");
            found++;
        }
    }
    CHECK(found == 1);
    json_decref(cfg);
    snprintf(path, sizeof(path), "%s/etc/resolv.conf", bundle);
    FILE *f = fopen(path, "re");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    CHECK_STR_EQ(buf, "nameserver 10.244.0.1\n");
    CHECK_INT_EQ(fs_rm_rf(dir), 0);
}

/* The names of bridges, tables and veths on existing hosts come from this hash: the values are
 * the ones the hand-written FNV-1a in local-net.c produced before it moved to basic/hash.h. */
TEST(addresses_next_fit_and_spares_reserved)
{
    /* A /29: .2 to .6 for sandboxes (.1 is the bridge). */
    const uint32_t pool = 0x0af40000;
    net_sandbox sb[8] = {{0}};
    net_spare spare = {.ip = pool + 4, .ready = true};
    local_net n = {.pool = pool, .prefix = 29, .mask = 0xfffffff8u, .sb = sb};
    CHECK(net_allocate_ip(&n) == pool + 2);
    sb[0].ip = pool + 2;
    n.n_sb = 1;
    CHECK(net_allocate_ip(&n) == pool + 3);
    sb[1].ip = pool + 3;
    n.n_sb = 2;
    n.prep.spares = &spare; /* a network prepared ahead holds .4 */
    n.prep.n_spares = 1;
    CHECK(net_ip_used(&n, pool + 4));
    CHECK(net_allocate_ip(&n) == pool + 5);
    sb[2].ip = pool + 5;
    n.n_sb = 3;
    /* .2 is given back: it is the last to be handed out again. */
    sb[0] = sb[2];
    n.n_sb = 2;
    CHECK(net_allocate_ip(&n) == pool + 6);
    sb[2].ip = pool + 6;
    n.n_sb = 3;
    CHECK(net_allocate_ip(&n) == pool + 2);
    sb[3].ip = pool + 2;
    n.n_sb = 4;
    CHECK(net_allocate_ip(&n) == 0); /* full */
    /* A torn-down sandbox's network the preparer has not destroyed yet keeps its address. */
    net_spare gone = {.ip = pool + 3};
    sb[1] = sb[3];
    n.n_sb = 3;
    n.prep.gone = &gone;
    n.prep.n_gone = 1;
    CHECK(net_ip_used(&n, pool + 3));
    CHECK(net_allocate_ip(&n) == 0);
    n.prep.n_gone = 0; /* destroyed: free again */
    CHECK(net_allocate_ip(&n) == pool + 3);
}

TEST(name_hash_is_stable)
{
    CHECK(local_net_name_hash("/var/lib/asb", "bridge-mac") == UINT64_C(0xf0261eee966d4cec));
    CHECK(local_net_name_hash("/var/lib/asb", "") == UINT64_C(0xa954aa264cc596bf));
    CHECK(local_net_name_hash("/tmp/x", "0b6c2f7e-uid") == UINT64_C(0xf3e0016681d91cc7));
    CHECK(local_net_name_hash(NULL, NULL) == UINT64_C(0xaf63a24c860189fe));
}
