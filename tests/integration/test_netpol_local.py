"""Network policy of local sandboxes (issue 8, docs/network.md): a real `asb serve` with runc
sandboxes inside a private network lab (netpol_lab.py), test hosts in namespaces of their own,
and every verdict checked by connecting from inside a sandbox."""
import json
import re
import subprocess

import asb_cli
from asb_apiserver import CORE, EXT, sandbox
from local_sandbox import get_sandbox, condition, sbx_state, start_sbx, wait_ready  # noqa: F401
from netpol_lab import DNS_TCP_QUERY, PROBE, lab, run, wait_for  # noqa: F401

PUB, PUB_GW = "203.0.113.10", "203.0.113.1"
CORP, CORP_GW = "10.99.0.10", "10.99.0.1"
POD_CIDR = "10.244.0.0/24"
BRIDGE_IP = "10.244.0.1"
DNS_ANSWER = "203.0.113.77"

# The main process of a "server" sandbox: listens on every address of the sandbox.
SERVE_8000 = ["python3", "-c",
              "import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
              "s.bind(('0.0.0.0',8000));s.listen(8)\n"
              "while True:\n c,_=s.accept();c.sendall(b'sandbox');c.close()"]


def net_env(**extra):
    return {"ASB_NETWORK": "bridge", "ASB_POD_CIDR": POD_CIDR, "ASB_RESYNC_INTERVAL": "500ms",
            "ASB_DNS_UPSTREAM": CORP, **extra}


def setup_hosts(lab):
    pub = lab.add_host("pub", PUB, PUB_GW)
    corp = lab.add_host("corp", CORP, CORP_GW)
    lab.serve_tcp(pub, "public", "0.0.0.0:8080")
    lab.serve_tcp(corp, "corporate", "0.0.0.0:8080", "0.0.0.0:8081")
    lab.serve_dns(corp, CORP, DNS_ANSWER)
    # Services of the host itself (the lab namespace): all addresses, and loopback.
    lab.serve_tcp(None, "host", "0.0.0.0:7999")
    return pub, corp


def host_probe(addr, port, ns=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["python3", "-c", PROBE, addr, str(port), "2"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()


def probe(asb, name, addr, port, timeout=1.0):
    out = asb_cli.ok(asb, "exec", name, "--", "python3", "-c", PROBE, addr, str(port), str(timeout))
    return out.strip()


def name_hash(s):
    """NameHash (UPSTREAM.md §2.3): FNV-1a 32, 8 lowercase hex digits."""
    h = 0x811c9dc5
    for b in s.encode():
        h = ((h ^ b) * 0x01000193) & 0xffffffff
    return f"{h:08x}"


def create_sb(asb, name, annotations=None, command=None, labels=None):
    body = sandbox(name, labels=labels)
    if annotations:
        body["metadata"]["annotations"] = annotations
    if command:
        body["spec"]["podTemplate"]["spec"]["containers"][0]["command"] = command
    r = asb.post(asb.path(CORE, "sandboxes", "default"), body)
    assert r.status_code == 201, r.text
    return wait_ready(asb, name, timeout=30)


def create_template(asb, name, **spec):
    body = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": name},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}},
                     **spec}}
    r = asb.post(asb.path(EXT, "sandboxtemplates", "default"), body)
    assert r.status_code == 201, r.text


def pod_ip(obj):
    ips = (obj.get("status") or {}).get("podIPs") or []
    assert len(ips) == 1, obj.get("status")
    return ips[0]


def nft_table():
    out = run("nft", "list", "tables").stdout
    tables = re.findall(r"table inet (asb_[0-9a-f]{8})", out)
    assert len(tables) == 1, out
    return tables[0]


def spare_ids(state_dir):
    """Ids of the networks asb serve prepared ahead for its next sandboxes (docs/network.md):
    their veths and (empty) chains exist before any sandbox has them."""
    import glob
    import os
    if not state_dir:
        return set()
    return {os.path.basename(d)[len("spare-"):] for d in glob.glob(os.path.join(state_dir, "net", "spare-*"))}


def nft_sandbox_chains(table, state_dir=None):
    """The sandboxes' chains (those of networks prepared ahead left out), and the table."""
    spares = spare_ids(state_dir)
    out = run("nft", "list", "table", "inet", table).stdout
    return sorted(c for c in re.findall(r"chain ([oih]_[0-9a-f]{12}) ", out) if c[2:] not in spares), out


def bridge_mac(name=None):
    """(MAC address, name) of the one bridge of the lab, or of bridge `name`."""
    links = json.loads(run("ip", "-j", "link", "show", "type", "bridge").stdout)
    found = [(x["address"], x["ifname"]) for x in links if name in (None, x["ifname"])]
    assert len(found) == 1, links
    return found[0]


def add_low_port(lab, bridge):
    """A port with the lowest possible MAC on the bridge: an unpinned bridge takes it."""
    veth = f"l{lab.tag}"
    run("ip", "link", "add", veth, "address", "00:00:00:00:00:01", "type", "veth", "peer", "name",
        veth + "p", "address", "00:00:00:00:00:02")
    run("ip", "link", "set", veth, "master", bridge)
    run("ip", "link", "set", veth, "up")
    return veth


def test_default_policy_public_only(lab, start_sbx):
    pub, corp = setup_hosts(lab)
    asb = start_sbx(net_env())
    a = create_sb(asb, "netpol-a")
    b = create_sb(asb, "netpol-b", command=SERVE_8000)
    ip_a, ip_b = pod_ip(a), pod_ip(b)
    assert ip_a != ip_b and ip_a.startswith("10.244.0.") and ip_b.startswith("10.244.0.")
    c = condition(a, "NetworkPolicyEnforced")
    assert c and c["status"] == "True" and c["reason"] == "SecureDefault", c

    # The lab itself reaches every test host: a FAIL below is the policy, not the routing.
    assert host_probe(CORP, 8080) == "OK corporate"
    assert host_probe(PUB, 8080) == "OK public"
    assert host_probe(ip_b, 8000, ns=None).startswith("FAIL")  # no ingress, even from the host

    assert probe(asb, "netpol-a", PUB, 8080) == "OK public"
    assert probe(asb, "netpol-a", CORP, 8080).startswith("FAIL")
    assert probe(asb, "netpol-a", PUB_GW, 7999).startswith("FAIL")      # the host's own address
    assert probe(asb, "netpol-a", BRIDGE_IP, 7999).startswith("FAIL")   # the host, via the bridge
    port = int(asb.url.rsplit(":", 1)[1])
    assert probe(asb, "netpol-a", BRIDGE_IP, port).startswith("FAIL")   # the control plane
    assert probe(asb, "netpol-a", "127.0.0.1", 7999).startswith("FAIL")  # its own loopback only
    assert probe(asb, "netpol-a", ip_b, 8000).startswith("FAIL")        # another sandbox
    # b's server is up: it answers on its own loopback.
    assert probe(asb, "netpol-b", "127.0.0.1", 8000) == "OK sandbox"

    # DNS through the forwarder on the bridge to the test DNS server.
    out = asb_cli.ok(asb, "exec", "netpol-a", "--", "python3", "-c",
                     "import socket; print(socket.gethostbyname('anything.example'))")
    assert out.strip() == DNS_ANSWER
    assert asb_cli.ok(asb, "exec", "netpol-a", "--", "cat", "/etc/resolv.conf").strip() == \
        f"nameserver {BRIDGE_IP}"
    out = asb_cli.ok(asb, "exec", "netpol-a", "--", "python3", "-c", DNS_TCP_QUERY, BRIDGE_IP)
    assert out.strip() == DNS_ANSWER  # DNS over TCP through the forwarder too
    # The test DNS server itself is private: not reachable from the sandbox directly.
    assert probe(asb, "netpol-a", CORP, 53).startswith("FAIL")

    # Blocked connections are counted and shown by `asb get -o wide`.
    def blocked():
        out = asb_cli.ok(asb, "get", "sandbox", "netpol-a", "-o", "wide")
        lines = out.strip().splitlines()
        hdr, row = lines[0].split(), lines[1].split()
        n = row[hdr.index("BLOCKED")]
        return int(n) if n.isdigit() and int(n) > 0 else None
    assert wait_for(blocked, what="a blocked count in asb get -o wide") >= 5
    # The count is a structured status field (the column reads it, not the condition message).
    st = get_sandbox(asb, "netpol-a")["status"]
    assert isinstance(st["blockedConnections"], int) and st["blockedConnections"] >= 5, st
    # /metrics: the DNS forwarder counted the queries above (UDP and TCP, relayed), and the
    # blocked connections are the live sandboxes' counts summed.
    assert asb.metric("asb_dns_queries_total") >= 2
    assert asb.metric("asb_blocked_connections") >= st["blockedConnections"]
    # `asb describe` shows the pod IP and the policy's state with the blocked count.
    out = asb_cli.ok(asb, "describe", "sandbox", "netpol-a")
    assert re.search(rf"^Pod IPs:\s+{re.escape(ip_a)}$", out, re.M), out
    assert re.search(r"^Network Policy:\s+SecureDefault \(enforced\), \d+ blocked connections$",
                     out, re.M), out
    ip_col = asb_cli.ok(asb, "get", "sandbox", "netpol-a", "-o", "wide")
    assert ip_a in ip_col


def test_custom_policy_exactly(lab, start_sbx):
    pub, corp = setup_hosts(lab)
    asb = start_sbx(net_env(ASB_RESYNC_INTERVAL="60s"))  # template edits must not wait for it
    create_template(asb, "corp-only", networkPolicy={
        "egress": [{"to": [{"ipBlock": {"cidr": "10.99.0.0/24", "except": ["10.99.0.128/25"]}}],
                    "ports": [{"protocol": "TCP", "port": 8080}]}],
        "ingress": [{"from": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
                     "ports": [{"port": 8000}]}]})
    create_template(asb, "unmanaged", networkPolicyManagement="Unmanaged")
    s = create_sb(asb, "netpol-custom", annotations={"agents.x-k8s.io/sandbox-template-ref": "corp-only"},
                  command=SERVE_8000)
    c = condition(s, "NetworkPolicyEnforced")
    assert c and c["status"] == "True" and c["reason"] == "NetworkPolicy", c
    ip = pod_ip(s)
    assert probe(asb, "netpol-custom", CORP, 8080) == "OK corporate"
    assert probe(asb, "netpol-custom", CORP, 8081).startswith("FAIL")
    assert probe(asb, "netpol-custom", PUB, 8080).startswith("FAIL")
    # No egress rule allows port 53: no DNS, not even through the forwarder.
    r = asb_cli.run(asb, "exec", "netpol-custom", "--", "python3", "-c", DNS_TCP_QUERY, BRIDGE_IP)
    assert r.returncode != 0 and DNS_ANSWER not in r.stdout
    assert "nameserver" not in asb_cli.ok(asb, "exec", "netpol-custom", "--", "cat", "/etc/resolv.conf")
    # Ingress: from the public range on port 8000 only.
    assert host_probe(ip, 8000, ns=pub) == "OK sandbox"
    assert host_probe(ip, 8000, ns=corp).startswith("FAIL")

    # Editing the template re-applies the rules of its running sandbox.
    r = asb.merge_patch(asb.path(EXT, "sandboxtemplates", "default", "corp-only"), {"spec": {
        "networkPolicy": {"egress": [{"to": [{"ipBlock": {"cidr": "10.99.0.0/24"}}],
                                      "ports": [{"port": 8081}]}], "ingress": []}}})
    assert r.status_code == 200, r.text
    # Applied by the template's event, not by a resync (every 60 s here).
    assert probe(asb, "netpol-custom", CORP, 8081) == "OK corporate"
    assert probe(asb, "netpol-custom", CORP, 8080).startswith("FAIL")
    assert host_probe(ip, 8000, ns=pub).startswith("FAIL")  # ingress now an empty list

    # The template label (NameHash of its name, as upstream's podSelector) finds it too.
    u = create_sb(asb, "netpol-unmanaged",
                  labels={"agents.x-k8s.io/sandbox-template-ref-hash": name_hash("unmanaged")})
    c = condition(u, "NetworkPolicyEnforced")
    assert c and c["status"] == "False" and c["reason"] == "Unmanaged", c
    assert not (u.get("status") or {}).get("podIPs")
    assert probe(asb, "netpol-unmanaged", PUB, 8080).startswith("FAIL")
    out = asb_cli.ok(asb, "exec", "netpol-unmanaged", "--", "cat", "/proc/net/dev")
    assert "eth0" not in out and "lo:" in out


def test_rules_survive_restart_and_vanish_with_the_sandbox(lab, start_sbx):
    import os
    from local_sandbox import RUNC
    pub, corp = setup_hosts(lab)
    asb = start_sbx(net_env())
    a = create_sb(asb, "netpol-r1")     # first address
    b = create_sb(asb, "netpol-r2")
    d = create_sb(asb, "netpol-a-dies")  # listed before the others at the restart
    table = nft_table()

    def three():
        # o_/i_/h_ per sandbox. Waited for: a network being prepared ahead has its chains a
        # moment before its directory marks it as a spare (local-net-prepared.c, build).
        c, _ = nft_sandbox_chains(table, asb.state_dir)
        return c if len(c) == 9 else None
    chains = wait_for(three, what="the chains of the three sandboxes, and only those")
    # Both talk before the restart, so their ARP caches hold the gateway's (the bridge's) MAC.
    assert probe(asb, "netpol-r1", PUB, 8080) == "OK public"
    assert probe(asb, "netpol-r2", PUB, 8080) == "OK public"
    mac, _ = bridge_mac()
    asb.stop()
    # A stale rule left in the table while asb serve is down must not survive the restart.
    run("nft", "add", "chain", "inet", table, "o_deadbeef0000")
    run("nft", "add", "rule", "inet", table, "o_deadbeef0000", "accept")
    # A container that died while asb serve was down: started anew at the restart, with an
    # address that none of the surviving sandboxes holds (they are re-adopted later in the pass).
    run(RUNC, "--root", os.path.join(asb.state_dir, "runc"), "delete", "--force", d["metadata"]["uid"])
    asb2 = start_sbx(net_env())
    assert get_sandbox(asb2, "netpol-r1")["metadata"]["uid"] == a["metadata"]["uid"]
    d2 = wait_ready(asb2, "netpol-a-dies", timeout=30)

    def rebuilt():
        c, text = nft_sandbox_chains(table, asb2.state_dir)
        return c if len(c) == 9 and "deadbeef" not in text else None
    after = wait_for(rebuilt, what="the rules of the three sandboxes, and only those")
    assert [x for x in after if x in chains] == [x for x in chains if x in after]
    ips = {pod_ip(get_sandbox(asb2, n)) for n in ("netpol-r1", "netpol-r2", "netpol-a-dies")}
    assert len(ips) == 3, ips
    assert pod_ip(get_sandbox(asb2, "netpol-r1")) == pod_ip(a)
    assert pod_ip(get_sandbox(asb2, "netpol-r2")) == pod_ip(b)
    # netpol-a-dies got a new veth: the bridge keeps its address all the same (it used to take
    # the lowest of its ports', and r1 then sent to a stale MAC until its ARP entry expired).
    assert bridge_mac()[0] == mac
    assert probe(asb2, "netpol-r1", PUB, 8080) == "OK public"
    assert probe(asb2, "netpol-r1", CORP, 8080).startswith("FAIL")
    assert probe(asb2, "netpol-a-dies", PUB, 8080) == "OK public"
    assert pod_ip(d2)

    r = asb2.delete(asb2.path(CORE, "sandboxes", "default", "netpol-r1"))
    assert r.status_code == 200, r.text

    def gone():
        # The reconciler tears down after the object is deleted: the veth goes first, the
        # namespace's directory a moment later.
        c, _ = nft_sandbox_chains(table, asb2.state_dir)
        spares = spare_ids(asb2.state_dir)
        links = [x.split()[0].split("@")[0] for x in run("ip", "-br", "link").stdout.splitlines()]
        veths = [x for x in links if x.startswith("asv") and x[3:] not in spares]
        net_dir = os.path.join(asb2.state_dir, "net", a["metadata"]["uid"])
        return len(c) == 6 and len(veths) == 2 and not os.path.exists(net_dir)
    wait_for(gone, what="the rules, veth and namespace of the deleted sandbox gone")
    out = run("nft", "list", "table", "inet", table).stdout
    assert pod_ip(a) + " " not in out and pod_ip(b) + " " in out
    assert os.path.ismount(os.path.join(asb2.state_dir, "net", b["metadata"]["uid"], "ns"))
    assert bridge_mac()[0] == mac
    assert probe(asb2, "netpol-r2", PUB, 8080) == "OK public"


def test_bridge_address_stays_when_ports_come_and_go(lab, start_sbx):
    """docs/network.md, "Restart": the bridge's MAC is pinned, so a sandbox's cached gateway
    address stays right whatever veths join or leave and across restarts."""
    setup_hosts(lab)
    asb = start_sbx(net_env())
    create_sb(asb, "netpol-arp")
    assert probe(asb, "netpol-arp", PUB, 8080) == "OK public"  # caches the gateway's MAC
    mac, bridge = bridge_mac()
    add_low_port(lab, bridge)
    assert bridge_mac()[0] == mac
    assert probe(asb, "netpol-arp", PUB, 8080) == "OK public"
    asb.stop()
    asb2 = start_sbx(net_env())
    create_sb(asb2, "netpol-arp-2")
    assert bridge_mac()[0] == mac
    assert probe(asb2, "netpol-arp", PUB, 8080) == "OK public"


def test_existing_bridge_keeps_its_address(lab, start_sbx):
    """A bridge that exists already (made by an older asb serve, or by hand for --bridge) keeps
    the address it has, and from then on no port changes it."""
    bridge = f"asbt{lab.tag}"
    run("ip", "link", "add", "name", bridge, "type", "bridge")
    mac, _ = bridge_mac(bridge)
    start_sbx(net_env(ASB_BRIDGE=bridge))
    add_low_port(lab, bridge)
    assert bridge_mac(bridge)[0] == mac


def test_network_none_keeps_loopback_only(lab, start_sbx):
    asb = start_sbx({"ASB_NETWORK": "none"})
    s = create_sb(asb, "netpol-none")
    c = condition(s, "NetworkPolicyEnforced")
    assert c and c["status"] == "False" and c["reason"] == "NetworkUnavailable", c
    assert "--network=none" in c["message"]
    assert not (s.get("status") or {}).get("podIPs")
    out = asb_cli.ok(asb, "exec", "netpol-none", "--", "cat", "/proc/net/dev")
    assert "eth0" not in out
    assert run("nft", "list", "tables").stdout.strip() == ""


def test_bad_network_options_refused(tmp_path):
    import os
    from asb_apiserver import asb_binary
    for args, msg in ((["--network", "bogus"], "want bridge or none"),
                      (["--pod-cidr", "10.0.0.0/30"], "pod CIDR"),
                      (["--bridge", "name;with;junk"], "bridge name")):
        env = {**os.environ, "ASB_STATE_DIR": str(tmp_path / "s"), "ASB_RUNTIME": "runc"}
        r = subprocess.run([asb_binary(), "serve", "--listen", "127.0.0.1:0", *args],
                           capture_output=True, text=True, env=env, timeout=20)
        assert r.returncode == 1 and msg in r.stderr, (args, r.stderr)


def test_sandboxes_reach_each_other_only_when_both_sides_allow(lab, start_sbx):
    asb = start_sbx(net_env())
    pods = {"ipBlock": {"cidr": POD_CIDR}}
    create_template(asb, "peers", networkPolicy={
        "egress": [{"to": [pods], "ports": [{"port": 8000}]}],
        "ingress": [{"from": [pods], "ports": [{"port": 8000}]}]})
    create_template(asb, "egress-only", networkPolicy={
        "egress": [{"to": [pods], "ports": [{"port": 8000}]}], "ingress": []})
    ref = "agents.x-k8s.io/sandbox-template-ref"
    srv = create_sb(asb, "peer-server", annotations={ref: "peers"}, command=SERVE_8000)
    create_sb(asb, "peer-client", annotations={ref: "peers"})
    lone = create_sb(asb, "lone-server", annotations={ref: "egress-only"}, command=SERVE_8000)
    create_sb(asb, "default-client")
    # Both sides allow: routed through the host (isolated bridge ports, /32 addresses).
    assert probe(asb, "peer-client", pod_ip(srv), 8000) == "OK sandbox"
    # The receiver's ingress denies it.
    assert probe(asb, "peer-client", pod_ip(lone), 8000).startswith("FAIL")
    # The sender's egress (secure default: no private ranges) denies it.
    assert probe(asb, "default-client", pod_ip(srv), 8000).startswith("FAIL")
