"""Pod CIDR ownership (issue 13, hole 6; docs/network.md): each `asb serve` owns its pod CIDR in
its network namespace. A second server on an overlapping CIDR, or a CIDR overlapping a route,
is refused at start and leaves the first server's sandboxes working; without --pod-cidr each
server picks a free /24 of 10.244.0.0/16 and keeps it across restarts. Runs inside a private
network lab (netpol_lab.py)."""
import os
import re
import subprocess
import tempfile

import pytest

import asb_cli
from asb_apiserver import AsbServer, asb_binary, stop_servers
from local_sandbox import (RUNC, cleanup_state, injected_sandboxd, sbx_state,  # noqa: F401
                           start_sbx)
from netpol_lab import lab, run  # noqa: F401
from test_netpol_local import CORP, DNS_ANSWER, PUB, create_sb, pod_ip, probe, setup_hosts

DNS_PROBE = "import socket; print(socket.gethostbyname('anything.example'))"


def env_of(**extra):
    return {"ASB_NETWORK": "bridge", "ASB_RESYNC_INTERVAL": "500ms", "ASB_DNS_UPSTREAM": CORP,
            **extra}


@pytest.fixture
def other_state():
    """Further state directories (another `asb serve`), cleaned like sbx_state."""
    dirs = []

    def make():
        d = tempfile.mkdtemp(prefix="asb-", dir="/tmp")
        dirs.append(d)
        return d

    yield make
    for d in dirs:
        cleanup_state(d)


def refused_start(state_dir, env):
    """Runs `asb serve` that must refuse to start; returns its exit code and output."""
    e = {**os.environ, "ASB_STATE_DIR": state_dir, "ASB_RUNTIME": RUNC,
         "ASB_SANDBOXD": injected_sandboxd(), **env}
    r = subprocess.run([asb_binary(), "serve", "--listen", "127.0.0.1:0"], capture_output=True,
                       text=True, env=e, timeout=60)
    return r.returncode, r.stdout + r.stderr


def nft_tables():
    return sorted(re.findall(r"table inet (asb_[0-9a-f]{8})", run("nft", "list", "tables").stdout))


def test_overlapping_pod_cidr_refused_first_server_keeps_working(lab, start_sbx, other_state):
    setup_hosts(lab)
    asb = start_sbx(env_of(ASB_POD_CIDR="10.244.0.0/24"))
    create_sb(asb, "cidr-first")
    tables = nft_tables()
    assert len(tables) == 1

    for cidr in ("10.244.0.0/24", "10.244.0.128/25", "10.244.0.0/16"):
        code, out = refused_start(other_state(), env_of(ASB_POD_CIDR=cidr))
        assert code != 0, out
        assert "pod CIDR refused" in out and "overlaps" in out, out
        assert re.search(r"route 10\.244\.0\.0/24 dev asb[0-9a-f]{8}", out), out
    # Nothing of the refused servers reached the network; the first server's sandbox works.
    assert nft_tables() == tables
    assert probe(asb, "cidr-first", PUB, 8080) == "OK public"
    out = asb_cli.ok(asb, "exec", "cidr-first", "--", "python3", "-c", DNS_PROBE)
    assert out.strip() == DNS_ANSWER


def test_no_flag_picks_free_24s_and_keeps_them(lab, start_sbx, other_state, tmp_path):
    setup_hosts(lab)
    a = start_sbx(env_of())
    ip_a = pod_ip(create_sb(a, "cidr-auto-a"))
    assert ip_a.startswith("10.244.0."), ip_a
    assert "pod CIDR picked" in a.output() and "10.244.0.0/24" in a.output()

    d = other_state()
    e = {"ASB_RUNTIME": RUNC, "ASB_SANDBOXD": injected_sandboxd(), **env_of()}
    servers = [AsbServer(d, tmp_path / "b.log", e)]
    try:
        b = servers[0].start()
        ip_b = pod_ip(create_sb(b, "cidr-auto-b"))
        assert ip_b.startswith("10.244.1."), ip_b
        assert open(os.path.join(d, "net", "pod-cidr")).read().strip() == "10.244.1.0/24"
        assert len(nft_tables()) == 2
        for srv, name in ((a, "cidr-auto-a"), (b, "cidr-auto-b")):
            assert probe(srv, name, PUB, 8080) == "OK public"
            assert asb_cli.ok(srv, "exec", name, "--", "python3", "-c",
                              DNS_PROBE).strip() == DNS_ANSWER

        # A restart keeps the recorded CIDR: its own bridge and table are not a conflict.
        assert b.stop() == 0
        b = AsbServer(d, tmp_path / "b2.log", e)
        servers.append(b)
        b.start()
        assert "pod CIDR refused" not in b.output()
        assert probe(b, "cidr-auto-b", PUB, 8080) == "OK public"
        obj = b.get(b.path("agents.x-k8s.io", "sandboxes", name="cidr-auto-b")).json()
        assert pod_ip(obj) == ip_b
    finally:
        stop_servers(servers)


def test_pod_cidr_overlapping_a_route_refused(lab, other_state, start_sbx):
    # A test host on 10.244.0.0/24 (its link takes that prefix) with a route behind it.
    lab.add_host("rt", "10.244.0.10", "10.244.0.5")
    link = f"h{lab.tag}{len(lab.namespaces) - 1}"
    run("ip", "route", "add", "10.250.0.0/16", "via", "10.244.0.10")

    code, out = refused_start(other_state(), env_of(ASB_POD_CIDR="10.250.7.0/24"))
    assert code != 0 and f"route 10.250.0.0/16 dev {link}" in out, out
    code, out = refused_start(other_state(), env_of(ASB_POD_CIDR="10.244.0.0/16"))
    assert code != 0 and "overlaps" in out and link in out, out
    assert nft_tables() == []

    # Without a flag the taken /24 is skipped.
    asb = start_sbx(env_of())
    ip = pod_ip(create_sb(asb, "cidr-route"))
    assert ip.startswith("10.244.1."), ip
