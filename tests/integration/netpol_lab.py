"""A network lab for the test_netpol_* tests: the test process moves into a private network
namespace (so `asb serve`, its bridge, its nft table and every route live there and nothing
touches the machine's own network), and "test hosts" are further namespaces wired to it with a
veth each: documentation-range "public" hosts (203.0.113.0/24) and private "corporate" ones
(10.99.0.0/24), each serving TCP banners (and, on request, DNS). Names carry a random tag so
parallel runs never collide. Imported explicitly, no conftest magic."""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import uuid

import pytest

from waiting import wait_for  # noqa: F401 (re-exported to the netpol tests)

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)

# A TCP server that answers every connection with its banner; one process per host.
TCP_SERVER = r"""
import socket, sys, threading
def serve(addr, port, banner):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(64)
    while True:
        c, _ = s.accept()
        try:
            c.sendall(banner.encode())
        finally:
            c.close()
banner = sys.argv[1]
for spec in sys.argv[2:]:
    a, p = spec.rsplit(":", 1)
    threading.Thread(target=serve, args=(a, int(p), banner), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

# A DNS server answering every A query with one fixed address (enough to prove forwarding).
DNS_SERVER = r"""
import socket, struct, sys, threading
addr, answer = sys.argv[1], socket.inet_aton(sys.argv[2])
def reply(q):
    end = 12
    while q[end] != 0:
        end += q[end] + 1
    hdr = q[:2] + b"\x81\x80" + struct.pack(">HHHH", 1, 1, 0, 0)
    return hdr + q[12:end + 5] + b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + answer
def tcp():
    t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((addr, 53)); t.listen(8)
    while True:
        c, _ = t.accept()
        n = struct.unpack(">H", c.recv(2))[0]
        q = b""
        while len(q) < n:
            q += c.recv(n - len(q))
        r = reply(q)
        c.sendall(struct.pack(">H", len(r)) + r)
        c.close()
threading.Thread(target=tcp, daemon=True).start()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(512)
    if len(q) >= 12:
        s.sendto(reply(q), peer)
"""

# Run inside a sandbox: one A query over TCP to argv[1]:53, prints the answer's address.
DNS_TCP_QUERY = r"""
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x03tcp\x07example\x00" + struct.pack(">HH", 1, 1)
s = socket.create_connection((sys.argv[1], 53), timeout=3)
s.sendall(struct.pack(">H", len(q)) + q)
n = struct.unpack(">H", s.recv(2))[0]
r = b""
while len(r) < n:
    r += s.recv(n - len(r))
print(socket.inet_ntoa(r[-4:]))
"""

# Run inside a sandbox: connect and print the banner, or FAIL.
PROBE = r"""
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
    print("OK " + s.recv(64).decode())
except Exception as e:
    print("FAIL " + type(e).__name__)
"""


def run(*cmd, check=True):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: {r.stderr}")
    return r


def lab_unavailable():
    if os.geteuid() != 0:
        return "the network lab needs root"
    for tool in ("ip", "nft", "runc"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            return f"{tool} is not installed (scripts/deps.sh installs it)"
    return None


class Lab:
    def __init__(self):
        self.tag = uuid.uuid4().hex[:6]
        self.saved = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        if _libc.unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
        self.namespaces = []
        self.procs = []
        run("ip", "link", "set", "lo", "up")

    def add_host(self, name, host_ip, gw_ip, prefix=24):
        """A namespace `name` with host_ip, routed through this (lab) namespace whose side of the
        link has gw_ip. Returns the namespace name."""
        ns = f"asbt-{self.tag}-{name}"
        veth = f"h{self.tag}{len(self.namespaces)}"
        run("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "addr", "add", f"{gw_ip}/{prefix}", "dev", veth)
        run("ip", "link", "set", veth, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "addr", "add", f"{host_ip}/{prefix}", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        run("ip", "-n", ns, "route", "add", "default", "via", gw_ip)
        return ns

    def _spawn(self, ns, code, *args):
        cmd = ([] if ns is None else ["ip", "netns", "exec", ns]) + [sys.executable, "-c", code, *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        self.procs.append(p)
        line = p.stdout.readline()
        assert line.strip() == "ready", f"{cmd}: {line}"
        return p

    def serve_tcp(self, ns, banner, *addr_ports):
        """TCP banner servers in namespace ns (None: the lab namespace, i.e. the host)."""
        return self._spawn(ns, TCP_SERVER, banner, *addr_ports)

    def serve_dns(self, ns, addr, answer):
        return self._spawn(ns, DNS_SERVER, addr, answer)

    def close(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        for ns in self.namespaces:
            run("ip", "netns", "del", ns, check=False)
        if _libc.setns(self.saved, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back to the original network namespace")
        os.close(self.saved)


@pytest.fixture
def lab():
    why = lab_unavailable()
    if why:
        pytest.skip(why)
    lb = Lab()
    try:
        yield lb
    finally:
        lb.close()
