"""Fair DNS (issue 13, hole 7; docs/network.md): the forwarder on the bridge gives every sandbox
its own budget (rate, burst, queries in flight), so a UDP flood from one sandbox does not make DNS
time out for another, and only well-formed queries reach the upstream resolver (a test server in
the lab that counts what it receives). Runs inside a private network lab (netpol_lab.py)."""
import json
import os
import subprocess
import time

import asb_cli
from asb_apiserver import asb_binary
from local_sandbox import sbx_state, start_sbx  # noqa: F401
from netpol_lab import lab  # noqa: F401
from test_netpol_local import CORP, DNS_ANSWER, create_sb, setup_hosts

BRIDGE_IP = "10.244.0.1"

# An upstream that answers every query with one A record and counts what it receives (datagrams
# and garbage) into a file.
COUNTING_DNS = r"""
import socket, struct, sys
addr, answer, path = sys.argv[1], socket.inet_aton(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, 5353))
seen = 0
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(4096)
    seen += 1
    with open(path + ".tmp", "w") as f:
        f.write(str(seen))
    import os; os.replace(path + ".tmp", path)
    try:
        end = 12
        while q[end] != 0:
            end += q[end] + 1
        r = q[:2] + b"\x81\x80" + struct.pack(">HHHH", 1, 1, 0, 0) + q[12:end + 5] + \
            b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + answer
        s.sendto(r, peer)
    except IndexError:
        pass
"""

# Inside a sandbox: one A query per line of argv[2:] kinds, prints what came back as JSON.
QUERY = r"""
import json, socket, struct, sys, time
def q(name, qid):
    n = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + n + struct.pack(">HH", 1, 1)
server, count, gap, at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
time.sleep(max(0.0, at - time.time()))
out = []
for i in range(count):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.0)
    t0 = time.time()
    s.sendto(q(f"q{i}.victim.example", 0x4000 + i), (server, 53))
    try:
        r = s.recv(512)
        out.append({"t": t0, "ms": (time.time() - t0) * 1000, "rcode": r[3] & 15,
                    "ip": socket.inet_ntoa(r[-4:])})
    except socket.timeout:
        out.append({"t": t0, "ms": None})
    s.close()
    time.sleep(gap)
print(json.dumps(out))
"""

# Inside a sandbox: from wall-clock time `at`, floods the forwarder with well-formed queries for
# `secs` seconds or `limit` datagrams, whichever comes first; prints start, end and the count.
FLOOD = r"""
import json, socket, struct, sys, time
server, secs, limit, at = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
time.sleep(max(0.0, at - time.time()))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setblocking(False)
q = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x05flood\x07example\x00" + struct.pack(">HH", 1, 1)
t0 = time.time(); sent = 0
while sent < limit and time.time() - t0 < secs:
    try:
        s.sendto(q, (server, 53)); sent += 1
    except BlockingIOError:
        time.sleep(0.0005)
    if sent % 256 == 0:
        try:
            while True:
                s.recv(512)
        except BlockingIOError:
            pass
print(json.dumps({"start": t0, "end": time.time(), "sent": sent}))
"""

# Inside a sandbox: malformed messages (a header, then junk), each answered FORMERR/NOTIMP or
# dropped, never relayed. Prints the rcodes of the answers received.
GARBAGE = r"""
import json, os, socket, struct, sys
server = sys.argv[1]
h = lambda flags, qd=1, an=0, ar=0: struct.pack(">HHHHHH", 0x5151, flags, qd, an, 0, ar)
name = b"\x07example\x03com\x00"
msgs = [
    h(0x0100) + b"\x03abc\xc0\x0c" + struct.pack(">HH", 1, 1),       # compression pointer
    h(0x0100) + b"\x40" + b"a" * 64 + b"\x00" + struct.pack(">HH", 1, 1),  # label > 63
    h(0x0100) + name + struct.pack(">HH", 1, 1) + b"trailing",       # trailing bytes
    h(0x0100, qd=2) + name + struct.pack(">HH", 1, 1) * 2,           # two questions
    h(0x0100) + name + struct.pack(">HH", 252, 1),                   # AXFR over UDP
    h(0x0100) + name + struct.pack(">HH", 0, 1),                     # QTYPE 0
    h(0x0100) + name + struct.pack(">HH", 1, 1)[:3],                 # cut short
    h(0x2800) + name + struct.pack(">HH", 6, 1),                     # UPDATE: NOTIMP
    h(0x8180) + name + struct.pack(">HH", 1, 1),                     # a response: dropped
    b"\x00" * 13, os.urandom(40), b"GET / HTTP/1.1\r\n\r\n",          # junk
]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.5)
rcodes = []
for m in msgs:
    s.sendto(m, (server, 53))
    try:
        r = s.recv(512)
        rcodes.append(r[3] & 15)
    except socket.timeout:
        rcodes.append(None)
print(json.dumps(rcodes))
"""


def upstream_count(path):
    try:
        return int(open(path).read())
    except (FileNotFoundError, ValueError):
        return 0


def exec_json(asb, name, code, *args):
    return json.loads(asb_cli.ok(asb, "exec", name, "--", "python3", "-c", code, *args,
                                 timeout=120).strip().splitlines()[-1])


def test_flood_from_one_sandbox_does_not_starve_another(lab, start_sbx, tmp_path):
    _, corp = setup_hosts(lab)
    counter = str(tmp_path / "upstream-count")
    lab._spawn(corp, COUNTING_DNS, CORP, DNS_ANSWER, counter)
    asb = start_sbx({"ASB_NETWORK": "bridge", "ASB_POD_CIDR": "10.244.0.0/24",
                     "ASB_RESYNC_INTERVAL": "500ms", "ASB_DNS_UPSTREAM": f"{CORP}:5353"})
    create_sb(asb, "dns-flooder")
    create_sb(asb, "dns-victim")

    # Garbage is answered locally (or dropped) and never reaches the upstream.
    refused0 = asb.metric("asb_dns_queries_blocked_total")
    rcodes = exec_json(asb, "dns-flooder", GARBAGE, BRIDGE_IP)
    assert rcodes[:7] == [1] * 7, rcodes          # FORMERR
    assert rcodes[7] == 4, rcodes                 # NOTIMP
    assert rcodes[8:] == [None, None, None, None] or rcodes[8] is None, rcodes
    assert upstream_count(counter) == 0
    refused = asb.metric("asb_dns_queries_blocked_total")
    assert refused - refused0 >= 8, (refused0, refused)  # the FORMERR and NOTIMP ones at least
    queries = asb.metric("asb_dns_queries_total")
    ok = exec_json(asb, "dns-victim", QUERY, BRIDGE_IP, "1", "0", "0")
    assert ok[0]["ms"] is not None and ok[0]["ip"] == DNS_ANSWER, ok
    assert upstream_count(counter) == 1

    # A flood of well-formed queries from one sandbox (4 s, at most 250k datagrams), the other
    # one asking 15 times meanwhile (both start at a common wall-clock time).
    at = time.time() + 4
    before = upstream_count(counter)
    flood = subprocess.Popen(
        [asb_binary(), "exec", "dns-flooder", "--", "python3", "-c", FLOOD, BRIDGE_IP, "4",
         "250000", str(at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=asb_cli.cli_env(asb))
    victim = exec_json(asb, "dns-victim", QUERY, BRIDGE_IP, "15", "0.1", str(at + 0.5))
    out, err = flood.communicate(timeout=120)
    assert flood.returncode == 0, err
    f = json.loads(out.strip().splitlines()[-1])
    relayed = upstream_count(counter) - before

    during = [v for v in victim if f["start"] <= v["t"] <= f["end"]]
    assert len(during) >= 5, (f, victim)          # the flood really overlapped the queries
    assert f["sent"] >= 5000, f
    for v in victim:
        assert v["ms"] is not None and v["ms"] < 1000 and v["ip"] == DNS_ANSWER, victim
    # The flooder got its own budget only: burst 100 + 50/s (plus the victim's 15).
    secs = f["end"] - f["start"]
    assert relayed <= 100 + 50 * (secs + 2) + 15, (relayed, f)
    assert "DNS: queries of a sandbox dropped" in asb.output()
    # /metrics: the relayed query counted, and the flood's queries over budget refused
    assert asb.metric("asb_dns_queries_total") - queries >= 1 + relayed
    assert asb.metric("asb_dns_queries_blocked_total") - refused >= 100


def test_dns_budget_flags_validated(tmp_path):
    env = {**os.environ, "ASB_STATE_DIR": str(tmp_path / "s"), "ASB_RUNTIME": "none"}
    for args in (["--dns-rate", "0"], ["--dns-burst", "x"], ["--dns-inflight", "-3"]):
        r = subprocess.run([asb_binary(), "serve", "--listen", "127.0.0.1:0", *args],
                           capture_output=True, text=True, env=env, timeout=20)
        assert r.returncode != 0 and "from 1 to 1000000" in r.stderr, (args, r.stderr)
