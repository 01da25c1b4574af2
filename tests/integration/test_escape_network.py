"""Escape suite, the control plane over the network (issue 13): with bridge networking on, a
sandbox tries the API server and the router on its loopback, on the bridge address (the host's
side of the sandbox's link) and on the host's own addresses, plus a cloud metadata address. All
must fail; asb serve and a witness sandbox stay healthy. Runs in the private network lab of
netpol_lab.py, so nothing touches the machine's own network."""
import os

from escape_sandbox import start_escape_server
from netpol_lab import PROBE, lab  # noqa: F401

POD_CIDR = "10.244.0.0/24"
BRIDGE_IP = "10.244.0.1"
PUB, PUB_GW = "203.0.113.10", "203.0.113.1"
METADATA = "169.254.169.254"


def test_control_plane_unreachable_with_networking_on(lab, tmp_path_factory):
    lab.add_host("pub", PUB, PUB_GW)
    # A service of the host on its loopback, as a developer's database or agent would be.
    lab.serve_tcp(None, "host-loopback", "127.0.0.1:7999")
    esc, cleanup = start_escape_server(tmp_path_factory, env={
        "ASB_NETWORK": "bridge", "ASB_POD_CIDR": POD_CIDR, "ASB_DNS_UPSTREAM": PUB})
    try:
        box = esc.sandbox("attacker")
        api_port = int(esc.asb.url.rsplit(":", 1)[1])
        with open(os.path.join(esc.state_dir, "router")) as f:
            router_port = int(f.read().strip().rstrip("/").rsplit(":", 1)[1])
        targets = [(addr, port) for addr in ("127.0.0.1", BRIDGE_IP, PUB_GW)
                   for port in (api_port, router_port, 7999)]
        targets.append((METADATA, 80))
        for addr, port in targets:
            code, out, err = box.run("python3", "-c", PROBE, addr, str(port), "1")
            assert code == 0, err
            assert out.strip().startswith("FAIL"), (addr, port, out)
        # The sandbox does have a network: its own address on the bridge, a default route.
        code, out, _ = box.run("ip", "-o", "-4", "addr")
        assert code == 0 and "10.244.0." in out, out
        esc.assert_healthy()
    finally:
        esc.close()
        cleanup()
