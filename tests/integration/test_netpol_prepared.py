"""Networks prepared ahead (issue 16, docs/network.md "Prepared ahead"): `asb serve` keeps a few
sandbox networks (namespace, veth on the bridge, address, empty chains and counters) ready, and a
start renames one into place and fills its chains. Checked here, inside the private network lab
of netpol_lab.py: a sandbox on a prepared network gets exactly its policy, fresh counters and the
blocked-connection count; `asb serve` killed with networks prepared leaves none behind once it
started and stopped again; ASB_NET_PREPARED=off prepares nothing."""
import os

from asb_apiserver import CORE
from local_sandbox import condition, get_sandbox, sbx_state, start_sbx  # noqa: F401
from netpol_lab import lab, run, wait_for  # noqa: F401
from test_netpol_local import CORP, PUB, create_sb, create_template, net_env, probe, setup_hosts, spare_ids


def ready_spares(state_dir):
    """Prepared networks whose namespace is mounted and whose host veth exists."""
    links = set(veths())
    return {i for i in spare_ids(state_dir)
            if os.path.ismount(os.path.join(state_dir, "net", "spare-" + i, "ns")) and "asv" + i in links}


def veths():
    return [x.split()[0].split("@")[0] for x in run("ip", "-br", "link").stdout.splitlines()
            if x.startswith("asv")]


def gone_dirs(state_dir):
    """Torn-down sandboxes' networks the preparer has still to destroy (net/gone-<id>)."""
    return [x for x in os.listdir(os.path.join(state_dir, "net")) if x.startswith("gone-")]


def nft_text():
    return run("nft", "list", "ruleset").stdout


def blocked(asb, name):
    return (get_sandbox(asb, name).get("status") or {}).get("blockedConnections")


def test_sandbox_takes_a_prepared_network_with_its_own_policy(lab, start_sbx):
    setup_hosts(lab)
    asb = start_sbx(net_env(ASB_NET_PREPARED="2"))
    before = wait_for(lambda: ready_spares(asb.state_dir) if len(ready_spares(asb.state_dir)) >= 2 else None,
                      timeout=30, what="two networks prepared ahead")
    a = create_sb(asb, "prep-a")
    uid = a["metadata"]["uid"]
    net_id = open(os.path.join(asb.state_dir, "net", uid, "id")).read().strip()
    assert net_id in before, (net_id, before)  # renamed into place, not made anew
    assert not os.path.exists(os.path.join(asb.state_dir, "net", "spare-" + net_id))
    # Its chains hold its policy now (the secure default), its counters start at zero.
    c = condition(a, "NetworkPolicyEnforced")
    assert c and c["status"] == "True" and c["reason"] == "SecureDefault", c
    assert blocked(asb, "prep-a") == 0
    assert probe(asb, "prep-a", PUB, 8080) == "OK public"
    assert probe(asb, "prep-a", CORP, 8080).startswith("FAIL")
    wait_for(lambda: (blocked(asb, "prep-a") or 0) >= 1, what="the blocked connection counted")
    # A custom policy on a prepared network: only what it allows, and no DNS.
    create_template(asb, "prep-corp", networkPolicy={"egress": [
        {"to": [{"ipBlock": {"cidr": CORP + "/32"}}], "ports": [{"protocol": "TCP", "port": 8081}]}]})
    b = create_sb(asb, "prep-b", annotations={"agents.x-k8s.io/sandbox-template-ref": "prep-corp"})
    assert condition(b, "NetworkPolicyEnforced")["reason"] == "NetworkPolicy"
    assert blocked(asb, "prep-b") == 0  # nothing of prep-a's counts
    assert probe(asb, "prep-b", CORP, 8081) == "OK corporate"
    assert probe(asb, "prep-b", CORP, 8080).startswith("FAIL")
    assert probe(asb, "prep-b", PUB, 8080).startswith("FAIL")
    # The preparer made up for what the two starts took.
    wait_for(lambda: len(ready_spares(asb.state_dir)) >= 2, timeout=30, what="the spares made again")
    assert net_id not in spare_ids(asb.state_dir)
    # Deleted: its nft objects go at teardown, its veth and namespace with the preparer (off the
    # lock a start waits for), and nothing is left under net/ for it.
    r = asb.delete(asb.path(CORE, "sandboxes", "default", "prep-a"))
    assert r.status_code == 200, r.text
    wait_for(lambda: "asv" + net_id not in set(veths()) and net_id not in nft_text()
             and not os.path.exists(os.path.join(asb.state_dir, "net", uid))
             and not gone_dirs(asb.state_dir), what="prep-a's network destroyed")
    assert probe(asb, "prep-b", CORP, 8081) == "OK corporate"  # the other one keeps its own


def test_killed_with_prepared_networks_leaves_none_behind(lab, start_sbx):
    setup_hosts(lab)
    asb = start_sbx(net_env(ASB_NET_PREPARED="3"))
    old = wait_for(lambda: ready_spares(asb.state_dir) if len(ready_spares(asb.state_dir)) >= 3 else None,
                   timeout=30, what="three networks prepared ahead")
    asb.kill9()
    assert old <= spare_ids(asb.state_dir)  # what a crash leaves
    # A crash between a teardown and the preparer's destroying its network leaves net/gone-<id>.
    left = sorted(old)[0]
    os.rename(os.path.join(asb.state_dir, "net", "spare-" + left),
              os.path.join(asb.state_dir, "net", "gone-" + left))
    asb2 = start_sbx(net_env(ASB_NET_PREPARED="3"))
    create_sb(asb2, "prep-after-crash")
    assert probe(asb2, "prep-after-crash", PUB, 8080) == "OK public"

    def stale_gone():
        links, text = set(veths()), nft_text()
        return not (old & spare_ids(asb2.state_dir)) and not any("asv" + i in links for i in old) \
            and not any(i in text for i in old)
    wait_for(stale_gone, timeout=30, what="the networks of the killed server removed")
    assert not gone_dirs(asb2.state_dir)
    wait_for(lambda: len(ready_spares(asb2.state_dir)) >= 3, timeout=30, what="new networks prepared")
    new = ready_spares(asb2.state_dir)
    assert asb2.stop() == 0
    # A clean stop takes its prepared networks along: directories, namespaces, veths.
    assert not spare_ids(asb2.state_dir)
    wait_for(lambda: not any("asv" + i in set(veths()) for i in new), what="the prepared veths gone")


def test_preparing_off(lab, start_sbx):
    setup_hosts(lab)
    asb = start_sbx(net_env(ASB_NET_PREPARED="off"))
    create_sb(asb, "prep-off")
    assert probe(asb, "prep-off", PUB, 8080) == "OK public"
    assert not spare_ids(asb.state_dir)
    assert len(veths()) == 1
