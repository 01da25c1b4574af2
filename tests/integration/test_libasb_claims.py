"""libasb's claim client (tests/integration/libasb_claim_probe.c, linked with libasb.so) and the
`asb claim` / `asb release` verbs against a real `asb serve`.

They run with ASB_RUNTIME=none (no containers: fast) and the real claim and warm pool
controllers of `asb serve`; a thread of this test stands in for the runtime by marking pool
members Ready, so the client's rules -- wait on a watch, rollback, attach, close vs disconnect,
lifecycle, signals -- are tested without runc. The data plane through a router is tested against stand-ins that
check the routing headers: a grpcio server (gRPC over TCP h2c) and an HTTP/1.1 server (REST).
End-to-end claims from real warm pools are in test_cli_claim.py."""
import http.server
import json
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent import futures

import grpc
import pytest

from asb_apiserver import CORE, EXT, SANITIZER_EXIT_CODES, asb, asb_binary, start_asb  # noqa: F401 (fixtures)
from asb_cli import cli_env, ok, run
from grpc_helpers import pb
from test_libasb_example import LIB, instrumented, pkg_config

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("claimprobe") / "libasb_claim_probe")
    san = ["-fsanitize=address,undefined"] if instrumented() else []
    subprocess.run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", *san,
                    os.path.join(HERE, "libasb_claim_probe.c"),
                    *pkg_config("--cflags", "--libs"), "-lpthread", f"-Wl,-rpath,{LIB}", "-o", out],
                   check=True)
    return out


def run_probe(probe, server, *args, env=None, expect_ok=True, timeout=60):
    p = subprocess.run([probe, *args], capture_output=True, text=True,
                       env=env or cli_env(server), timeout=timeout)
    assert p.returncode not in SANITIZER_EXIT_CODES, p.stderr
    assert "ERROR: AddressSanitizer" not in p.stderr and "runtime error:" not in p.stderr, p.stderr
    if expect_ok:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def kv(stdout):
    out = {}
    for line in stdout.splitlines():
        k, _, v = line.partition(" ")
        out.setdefault(k, v)
    return out


def claim_path(asb, name=None, sub=None):
    return asb.path(EXT, "sandboxclaims", "default", name, sub=sub)


def claims(asb):
    r = asb.get(claim_path(asb))
    assert r.status_code == 200, r.text
    return {c["metadata"]["name"]: c for c in r.json()["items"]}


class StandInKubelet:
    """With ASB_RUNTIME=none nothing runs the sandboxes: this thread marks the members of the
    pool "fake-pool" Ready (as the local runtime would once sandboxd answers), so the real claim
    controller of `asb serve` adopts them. Members of "slow-pool" never get Ready."""

    def __init__(self, asb):
        self.asb = asb
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        a = self.asb
        while not self.stop.is_set():
            try:
                r = a.get(a.path(CORE, "sandboxes", "default"))
                for s in r.json()["items"]:
                    name = s["metadata"]["name"]
                    conds = (s.get("status") or {}).get("conditions") or []
                    if name.startswith("fake-pool-") and not any(
                            c["type"] == "Ready" and c["status"] == "True" for c in conds):
                        a.merge_patch(a.path(CORE, "sandboxes", "default", name, sub="status"),
                                      {"status": {"conditions": [{
                                          "type": "Ready", "status": "True",
                                          "reason": "DependenciesReady", "message": "",
                                          "observedGeneration": s["metadata"].get("generation", 1),
                                          "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}})
            except Exception:  # noqa: BLE001 (server going away at teardown)
                pass
            time.sleep(0.01)

    def close(self):
        self.stop.set()
        self.thread.join()


TEMPLATE = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": "t"},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}}


def pool(name, replicas):
    return {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool", "metadata": {"name": name},
            "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": "t"}}}


def ready_members(asb, prefix="fake-pool-"):
    r = asb.get(asb.path(CORE, "sandboxes", "default"))
    return [s["metadata"]["name"] for s in r.json()["items"]
            if s["metadata"]["name"].startswith(prefix)
            and any(c["type"] == "Ready" and c["status"] == "True"
                    for c in (s.get("status") or {}).get("conditions") or [])]


@pytest.fixture
def ctl(asb):
    """Template t, pools fake-pool (2, Ready members) and slow-pool (1, never Ready)."""
    for body, plural in ((TEMPLATE, "sandboxtemplates"), (pool("fake-pool", 2), "sandboxwarmpools"),
                         (pool("slow-pool", 1), "sandboxwarmpools")):
        r = asb.post(asb.path(EXT, plural, "default"), body)
        assert r.status_code == 201, r.text
    k = StandInKubelet(asb)
    deadline = time.monotonic() + 10
    while len(ready_members(asb)) < 2:
        assert time.monotonic() < deadline, "warm pool not filled"
        time.sleep(0.02)
    yield k
    k.close()


def wait_gone(asb, name, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if asb.get(claim_path(asb, name)).status_code == 404:
            return
        time.sleep(0.02)
    raise AssertionError(f"claim {name} still exists")


def test_claim_ready_then_close_deletes_the_claim(probe, asb, ctl):
    out = kv(run_probe(probe, asb, "create", "fake-pool", "10000", "nc").stdout)
    name = out["claim"]
    assert name.startswith("sandbox-claim-")
    assert out["sandbox"].startswith("fake-pool-")  # adopted warm: not the claim name
    assert 0 < int(out["ready_usec"]) < 10_000_000
    assert out["has_handle"] == "0"
    assert out["close"] == "0"
    wait_gone(asb, name)


def test_claim_object_shape(probe, asb, ctl):
    out = kv(run_probe(probe, asb, "create", "fake-pool", "10000", "nt").stdout)
    c = claims(asb)[out["claim"]]
    assert c["metadata"]["annotations"]["agents.x-k8s.io/sandbox-name"] == out["sandbox"]
    assert c["status"]["sandbox"]["name"] == out["sandbox"]
    assert c["spec"]["warmPoolRef"] == {"name": "fake-pool"}
    assert c["metadata"]["labels"]["agents.x-k8s.io/created-by"] == "libasb"
    req = c["metadata"]["annotations"]["agents.x-k8s.io/client-first-requested-at"]
    assert len(req) == 30 and req.endswith("Z")  # RFC3339Nano
    shutdown = time.mktime(time.strptime(c["spec"]["lifecycle"]["shutdownTime"], "%Y-%m-%dT%H:%M:%SZ"))
    now = time.mktime(time.gmtime())
    assert 3500 < shutdown - now < 3700


def test_disconnect_keeps_the_claim_and_attach_finds_it(probe, asb, ctl):
    out = kv(run_probe(probe, asb, "create", "fake-pool", "10000", "n").stdout)
    assert "disconnect" in out
    name = out["claim"]
    assert name in claims(asb)
    again = kv(run_probe(probe, asb, "attach", name, "10000", "nc").stdout)
    assert again["sandbox"] == out["sandbox"]
    assert again["close"] == "0"
    wait_gone(asb, name)
    gone = run_probe(probe, asb, "attach", name, "2000", "n", expect_ok=False)
    assert gone.returncode != 0 and "error attach -4 not found" in gone.stdout


def test_terminal_reason_fails_fast_and_rolls_back(probe, asb, ctl):
    """slow-pool never has a Ready member; a 1 s lifetime expires the claim first: ClaimExpired
    is terminal, the client stops waiting and deletes its claim."""
    start = time.monotonic()
    p = run_probe(probe, asb, "create", "slow-pool", "30000", "ne", expect_ok=False)
    assert time.monotonic() - start < 15
    assert "error create -20 claim failed | ClaimExpired |" in p.stdout
    assert claims(asb) == {}  # rolled back


def test_timeout_reports_last_condition_and_rolls_back(probe, asb, ctl):
    start = time.monotonic()
    p = run_probe(probe, asb, "create", "slow-pool", "1500", "n", expect_ok=False)
    assert 1.4 < time.monotonic() - start < 10
    assert "error create -14 timed out" in p.stdout
    assert "not ready after 1500 ms (last condition: " in p.stdout
    assert claims(asb) == {}


def test_claim_deleted_while_waiting(probe, asb, ctl):
    """Nobody answers pool "slow-pool"; the claim is deleted under the waiting client."""
    proc = subprocess.Popen([probe, "create", "slow-pool", "20000", "n"], stdout=subprocess.PIPE,
                            text=True, env=cli_env(asb))
    deadline = time.monotonic() + 10
    while not claims(asb):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    name = next(iter(claims(asb)))
    assert asb.delete(claim_path(asb, name)).status_code == 200
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "error create -20 claim failed | ClaimDeleted |" in out


class WatchHoldingProxy:
    """A TCP relay to `asb serve` that holds the first watch request until the test releases it,
    so the test can act between a client's create and its watch reaching the server."""

    def __init__(self, upstream_url):
        host, _, port = upstream_url.split("//", 1)[1].rstrip("/").rpartition(":")
        self.upstream = (host, int(port))
        self.watch_seen = threading.Event()
        self.release = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            threading.Thread(target=self.pump, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(up, down, False), daemon=True).start()

    def pump(self, src, dst, to_server):
        try:
            while data := src.recv(65536):
                if to_server and data.startswith(b"GET ") and b"watch=true" in data.split(b"\r\n")[0]:
                    self.watch_seen.set()
                    self.release.wait(15)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.release.set()
        self.listener.close()


def test_claim_deleted_before_the_wait_watches(probe, asb, ctl):
    """The claim is deleted after its create answered but before the client's watch reaches the
    server: the client fails at once with ClaimDeleted instead of waiting out its timeout."""
    proxy = WatchHoldingProxy(asb.url)
    try:
        env = cli_env(asb, ASB_SERVER=proxy.url, ASB_TOKEN=asb.token)
        proc = subprocess.Popen([probe, "create", "slow-pool", "8000", "n"], stdout=subprocess.PIPE,
                                text=True, env=env)
        assert proxy.watch_seen.wait(10), "the client never watched its claim"
        names = list(claims(asb))
        assert len(names) == 1
        assert asb.delete(claim_path(asb, names[0])).status_code == 200
        t0 = time.monotonic()
        proxy.release.set()
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 1
        assert "error create -20 claim failed | ClaimDeleted |" in out
        assert time.monotonic() - t0 < 4  # not the 8 s ready timeout
    finally:
        proxy.close()


def test_lifecycle_extend_claim_and_sandbox(probe, asb):
    asb.create_sandbox("plain")
    r = asb.post(claim_path(asb), {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim",
                                   "metadata": {"name": "c-ext"},
                                   "spec": {"warmPoolRef": {"name": "nobody"},
                                            "lifecycle": {"shutdownPolicy": "Delete"}}})
    assert r.status_code == 201, r.text
    run_probe(probe, asb, "extend", "SandboxClaim", "c-ext", "600")
    run_probe(probe, asb, "extend", "sandbox", "plain", "1200")
    now = time.mktime(time.gmtime())
    lc = claims(asb)["c-ext"]["spec"]["lifecycle"]
    assert lc["shutdownPolicy"] == "Delete"  # kept
    assert 590 < time.mktime(time.strptime(lc["shutdownTime"], "%Y-%m-%dT%H:%M:%SZ")) - now < 700
    s = asb.get(asb.path(CORE, "sandboxes", "default", "plain")).json()
    assert 1190 < time.mktime(time.strptime(s["spec"]["shutdownTime"], "%Y-%m-%dT%H:%M:%SZ")) - now < 1300
    p = run_probe(probe, asb, "extend", "sandboxwarmpool", "x", "10", expect_ok=False)
    assert "error extend -3" in p.stdout
    p = run_probe(probe, asb, "extend", "sandbox", "missing", "10", expect_ok=False)
    assert "error extend -4" in p.stdout


def test_concurrent_claims_get_distinct_sandboxes(probe, asb, ctl):
    """8 threads of one process (a client each) claim at once from a pool of 8: every claim gets
    its own sandbox; half are closed, the rest deleted through the cleanup registry."""
    r = asb.merge_patch(asb.path(EXT, "sandboxwarmpools", "default", "fake-pool"),
                        {"spec": {"replicas": 8}})
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 20
    while len(ready_members(asb)) < 8:
        assert time.monotonic() < deadline, "pool of 8 not filled"
        time.sleep(0.02)
    p = run_probe(probe, asb, "burst", "fake-pool", "8", timeout=120)
    got = [l.split()[1] for l in p.stdout.splitlines() if l.startswith("got ")]
    assert len(got) == 8 and len(set(got)) == 8, p.stdout
    assert "cleanup_failed 0" in p.stdout
    deadline = time.monotonic() + 10
    while claims(asb):
        assert time.monotonic() < deadline, claims(asb).keys()
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_auto_cleanup_on_signal(probe, asb, ctl, sig):
    proc = subprocess.Popen([probe, "hold", "fake-pool"], stdout=subprocess.PIPE, text=True,
                            env=cli_env(asb))
    line = proc.stdout.readline()
    assert line.startswith("claim "), line
    name = line.split()[1]
    assert name in claims(asb)
    proc.send_signal(sig)
    proc.wait(timeout=20)
    assert proc.returncode == -sig  # the signal was re-raised: the process died of it
    wait_gone(asb, name, timeout=1)  # deleted before the process died


# ---- the data plane through a router (stand-ins checking the routing headers) ----

class GrpcRouter:
    def __init__(self, token):
        self.seen = []
        p = pb()

        def execute(request, context):
            md = dict(context.invocation_metadata())
            self.seen.append(md)
            if md.get("authorization") != f"Bearer {token}":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
            argv = list(request.config.command) if hasattr(request.config, "command") else []
            return p.ExecuteResponse(exit_code=0, stdout=f"routed to {md.get('x-sandbox-id')} "
                                     f"port {md.get('x-sandbox-port')}\n".encode())

        handler = grpc.method_handlers_generic_handler("process.v1.ProcessService", {
            "Execute": grpc.unary_unary_rpc_method_handler(
                execute, request_deserializer=p.ExecuteRequest.FromString,
                response_serializer=p.ExecuteResponse.SerializeToString)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()


class RestRouter(http.server.ThreadingHTTPServer):
    def __init__(self):
        self.files, self.seen = {}, []
        router = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_PUT(self):
                router.seen.append(dict(self.headers))
                n = int(self.headers.get("Content-Length", 0))
                router.files[self.path.split("?")[0]] = self.rfile.read(n)
                self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                router.seen.append(dict(self.headers))
                body = router.files.get(self.path.split("?")[0])
                if body is None:
                    data = json.dumps({"detail": "no such file"}).encode()
                    self.send_response(404)
                else:
                    data = body
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(("127.0.0.1", 0), H)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_router_data_plane_grpc_and_rest(probe, asb, ctl):
    g = GrpcRouter(asb.token)
    try:
        env = cli_env(asb, ASB_ROUTER=f"http://127.0.0.1:{g.port}")
        out = kv(run_probe(probe, asb, "create", "fake-pool", "10000", "rxc", env=env).stdout)
        assert out["exec"] == f"0 routed to {out['sandbox']} port 9090"
        md = g.seen[0]
        assert md["x-sandbox-id"] == out["sandbox"]
        assert md["x-sandbox-namespace"] == "default"
    finally:
        g.server.stop(0)
    rest = RestRouter()
    try:
        env = cli_env(asb, ASB_ROUTER=f"http://127.0.0.1:{rest.server_address[1]}")
        out = kv(run_probe(probe, asb, "create", "fake-pool", "10000", "rfc", env=env).stdout)
        assert out["read"] == "via-handle"
        assert rest.files == {"/v1/files/probe.txt": b"via-handle"}
        h = rest.seen[0]
        assert h["X-Sandbox-ID"] == out["sandbox"]
        assert h["X-Sandbox-Port"] == "8080"
        assert h["Authorization"] == f"Bearer {asb.token}"
    finally:
        rest.shutdown()


def test_router_missing_is_a_config_error_and_rolls_back(probe, asb, ctl, tmp_path):
    # The control plane found by ASB_SERVER/ASB_TOKEN, a state dir without a `router` file.
    env = cli_env(asb, ASB_STATE_DIR=str(tmp_path), ASB_SERVER=asb.url,
                  ASB_TOKEN=open(os.path.join(asb.state_dir, "token")).read().strip())
    env.pop("ASB_ROUTER", None)
    p = run_probe(probe, asb, "create", "fake-pool", "10000", "rx", env=env, expect_ok=False)
    assert "error create -17" in p.stdout and "router" in p.stdout
    assert claims(asb) == {}


# ---- the CLI ----

def test_cli_claim_prints_only_the_sandbox_name(asb, ctl):
    p = run(asb, "claim", "--pool", "fake-pool", "--ttl", "1h", "--timeout", "10s")
    assert p.returncode == 0, p.stderr
    sbx = p.stdout.strip()
    assert p.stdout == f"{sbx}\n" and sbx.startswith("fake-pool-")
    (claim,) = claims(asb)
    assert f"claim {claim} ready in " in p.stderr and f" ms (sandbox {sbx})" in p.stderr
    table = ok(asb, "get", "claims").splitlines()
    assert table[0].split()[:4] == ["NAME", "READY", "SANDBOX", "LATENCY"]
    row = next(l.split() for l in table[1:] if l.startswith(claim))
    assert row[1] == "True" and row[2] == sbx
    assert row[3].endswith("ms") or row[3].endswith("s"), row
    pools = ok(asb, "get", "warmpools").splitlines()
    assert pools[0].split()[:3] == ["NAME", "READY", "DESIRED"]
    assert ok(asb, "release", claim) == f'sandboxclaim.extensions.agents.x-k8s.io "{claim}" released\n'
    wait_gone(asb, claim)


def test_cli_claim_named_and_failures(asb, ctl):
    p = run(asb, "claim", "--pool", "fake-pool", "--name", "mine")
    assert p.returncode == 0 and p.stdout.startswith("fake-pool-"), p.stderr
    p = run(asb, "claim", "--pool", "slow-pool", "--ttl", "1s", "--timeout", "20s")
    assert p.returncode == 1 and "ClaimExpired" in p.stderr and p.stdout == "", p.stderr
    t0 = time.monotonic()
    p = run(asb, "claim", "--pool", "no-such-pool", "--timeout", "60s")  # ends at once
    assert p.returncode == 1 and "claim failed" in p.stderr, p.stderr
    assert "WarmPoolNotFound" in p.stderr and time.monotonic() - t0 < 20
    assert set(claims(asb)) == {"mine"}
    assert run(asb, "claim").returncode == 2
    assert run(asb, "claim", "--pool", "p", "--ttl", "bogus").returncode == 2
    assert run(asb, "release", "nope").returncode == 1
    assert ok(asb, "delete", "claim", "mine") == 'sandboxclaim.extensions.agents.x-k8s.io "mine" deleted\n'


def test_cli_claim_interrupted_deletes_the_claim(asb, ctl):
    proc = subprocess.Popen([asb_binary(), "claim", "--pool", "slow-pool"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(asb))
    deadline = time.monotonic() + 10
    while not claims(asb):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGINT
    assert claims(asb) == {}


def test_cli_extend_claim_then_sandbox(asb):
    asb.create_sandbox("plain2")
    r = asb.post(claim_path(asb), {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim",
                                   "metadata": {"name": "c-cli"},
                                   "spec": {"warmPoolRef": {"name": "nobody"}}})
    assert r.status_code == 201, r.text
    assert ok(asb, "extend", "c-cli", "--ttl", "10m", "--policy", "Delete") == \
        "sandboxclaim.extensions.agents.x-k8s.io/c-cli extended by 600s\n"
    assert ok(asb, "extend", "plain2", "--ttl", "90") == "sandbox.agents.x-k8s.io/plain2 extended by 90s\n"
    now = time.mktime(time.gmtime())
    lc = claims(asb)["c-cli"]["spec"]["lifecycle"]
    assert lc["shutdownPolicy"] == "Delete"
    assert 590 < time.mktime(time.strptime(lc["shutdownTime"], "%Y-%m-%dT%H:%M:%SZ")) - now < 700
    s = asb.get(asb.path(CORE, "sandboxes", "default", "plain2")).json()
    assert 80 < time.mktime(time.strptime(s["spec"]["shutdownTime"], "%Y-%m-%dT%H:%M:%SZ")) - now < 200
    p = run(asb, "extend", "ghost", "--ttl", "1m")
    assert p.returncode == 1 and "not found" in p.stderr
    assert run(asb, "extend", "c-cli").returncode == 2
