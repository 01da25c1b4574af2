#!/usr/bin/python3
"""`make chaos`: crash consistency of `asb serve` under a mixed workload.

For each round a few client threads run a random mix of operations against one `asb serve`
(Sandbox create/delete, SandboxClaim create/delete from a warm pool, suspend, resume, `asb exec`,
file writes through a sandbox's own socket) while a killer thread sends the server SIGKILL at a
random moment. The server is restarted and, once it has had time to converge, the invariants are
checked:

  * every object whose create was acknowledged (2xx) and whose delete was not requested is present;
    every object whose delete was acknowledged is gone (or going: deletionTimestamp) and then gone;
  * no sandbox is handed out twice: no two claims name one sandbox, no sandbox has two
    controller owners;
  * nothing on the host without an object: no runc container of the state dir, no cgroup and no
    sandbox directory or socket whose uid no object has;
  * files written through acknowledged PUTs are intact (byte for byte) in sandboxes that live on.

It prints the rounds run, the kills and every violation, and exits 1 when there was one. Options:
--rounds N (default 20; `make chaos CHAOS_ROUNDS=200`), --seed S, --network none|bridge.
Needs root and runc. Leaves nothing behind (every object is deleted, the server stopped, its
state directory removed)."""
import argparse
import glob
import hashlib
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
ASB = os.path.join(BUILD, "bin", "asb")
RUNC = shutil.which("runc") or "/usr/sbin/runc"
CORE = "agents.x-k8s.io"
EXT = "extensions.agents.x-k8s.io"
POOL = "chaos-pool"
MAX_SANDBOXES = 8  # live Sandboxes the clients keep at most (creates turn into deletes)
MAX_CLAIMS = 4


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def sandbox_rest(state, uid, method, path, body=None):
    c = UnixHTTPConnection(os.path.join(state, "run", uid, "rest.sock"))
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Server:
    def __init__(self, state, network):
        self.state, self.network = state, network
        self.proc = None
        self.log = open(os.path.join(state, "serve.log"), "ab")
        self.s = requests.Session()

    def start(self, timeout=60):
        env = {**os.environ, "ASB_STATE_DIR": self.state, "ASB_RUNTIME": RUNC,
               "ASB_NETWORK": self.network, "ASB_RESYNC_INTERVAL": "2s",
               "ASB_SANDBOXD": os.path.join(BUILD, "bin", "sandboxd")}
        self.proc = subprocess.Popen([ASB, "serve", "--listen", "127.0.0.1:0",
                                      "--router-listen", "127.0.0.1:0"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        server = os.path.join(self.state, "server")
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"asb serve exited ({self.proc.returncode}): see {self.state}/serve.log")
            if os.path.exists(server):
                self.url = open(server).read().strip()
                self.s.headers["Authorization"] = "Bearer " + open(
                    os.path.join(self.state, "token")).read().strip()
                try:
                    if self.s.get(self.url + "/version", timeout=2).status_code == 200:
                        return
                except requests.RequestException:
                    pass
            time.sleep(0.02)
        raise RuntimeError("asb serve did not start")

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill9()

    def coll(self, group, plural):
        return f"{self.url}/apis/{group}/v1beta1/namespaces/default/{plural}"

    def list(self, group, plural):
        r = self.s.get(self.coll(group, plural), timeout=10)
        r.raise_for_status()
        return r.json()["items"]


def sandbox_body(name):
    return {"apiVersion": f"{CORE}/v1beta1", "kind": "Sandbox", "metadata": {"name": name},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "host"}]}}}}


class Ledger:
    """What the clients were told: the server acknowledged these creates, deletes and writes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.present = {"sandboxes": set(), "sandboxclaims": set()}
        self.deleted = {"sandboxes": set(), "sandboxclaims": set()}
        self.unsure = {"sandboxes": set(), "sandboxclaims": set()}  # a delete with no answer
        self.files = {}  # (sandbox name, uid, path) -> sha256
        self.uids = set()  # every sandbox uid ever seen


class Workload:
    def __init__(self, srv, ledger, rnd, prefix):
        self.srv, self.ledger, self.rnd, self.prefix = srv, ledger, rnd, prefix
        self.stop = threading.Event()
        self.n = 0
        self.ops = 0

    def name(self, kind):
        with self.ledger.lock:
            self.n += 1
            return f"{self.prefix}-{kind}-{self.n}"

    def pick(self, plural):
        with self.ledger.lock:
            names = sorted(self.ledger.present[plural])
        return self.rnd.choice(names) if names else None

    def op(self):
        srv, L = self.srv, self.ledger
        kind = self.rnd.choice(["create", "create", "delete", "claim", "claim", "release",
                                "suspend", "resume", "exec", "write", "write"])
        with L.lock:  # a bounded population: churn, not an ever-growing pile
            if kind == "create" and len(L.present["sandboxes"]) >= MAX_SANDBOXES:
                kind = "delete"
            if kind == "claim" and len(L.present["sandboxclaims"]) >= MAX_CLAIMS:
                kind = "release"
        if kind == "create":
            n = self.name("sb")
            r = srv.s.post(srv.coll(CORE, "sandboxes"), json=sandbox_body(n), timeout=10)
            if r.status_code == 201:
                with L.lock:
                    L.present["sandboxes"].add(n)
        elif kind == "claim":
            n = self.name("cl")
            body = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim", "metadata": {"name": n},
                    "spec": {"warmPoolRef": {"name": POOL}}}
            r = srv.s.post(srv.coll(EXT, "sandboxclaims"), json=body, timeout=10)
            if r.status_code == 201:
                with L.lock:
                    L.present["sandboxclaims"].add(n)
        elif kind in ("delete", "release"):
            plural = "sandboxes" if kind == "delete" else "sandboxclaims"
            group = CORE if kind == "delete" else EXT
            n = self.pick(plural)
            if not n:
                return
            with L.lock:  # from now on its fate is open until the answer comes
                L.present[plural].discard(n)
                L.unsure[plural].add(n)
            r = srv.s.delete(srv.coll(group, plural) + "/" + n, timeout=10)
            if r.status_code in (200, 202):
                with L.lock:
                    L.unsure[plural].discard(n)
                    L.deleted[plural].add(n)
                    for k in [k for k in L.files if k[0] == n]:
                        del L.files[k]
        elif kind in ("suspend", "resume"):
            n = self.pick("sandboxes")
            if n:
                mode = "Suspended" if kind == "suspend" else "Running"
                srv.s.patch(srv.coll(CORE, "sandboxes") + "/" + n,
                            data=json.dumps({"spec": {"operatingMode": mode}}),
                            headers={"Content-Type": "application/merge-patch+json"}, timeout=10)
        elif kind == "exec":
            n = self.pick("sandboxes")
            if n:
                subprocess.run([ASB, "exec", n, "--", "sh", "-c", "echo ok"], capture_output=True,
                               timeout=30, env={**os.environ, "ASB_STATE_DIR": srv.state})
        elif kind == "write":
            n = self.pick("sandboxes")
            if not n:
                return
            r = srv.s.get(srv.coll(CORE, "sandboxes") + "/" + n, timeout=10)
            if r.status_code != 200:
                return
            uid = r.json()["metadata"]["uid"]
            data = os.urandom(self.rnd.randint(1, 256 * 1024))
            path = f"chaos/{self.n}-{self.rnd.randint(0, 1 << 30)}.bin"
            try:
                st, _ = sandbox_rest(srv.state, uid, "PUT", "/v1/files/" + path, data)
            except OSError:
                return
            if st in (200, 201, 204):
                with L.lock:
                    if n in L.present["sandboxes"]:
                        L.files[(n, uid, path)] = hashlib.sha256(data).hexdigest()
        self.ops += 1

    def run(self):
        while not self.stop.is_set():
            try:
                self.op()
            except (requests.RequestException, subprocess.TimeoutExpired, OSError, ValueError):
                time.sleep(0.05)  # the server is down: keep trying until the round ends


def runc_ids(state):
    ids = set()
    for root in [os.path.join(state, "runc")] + glob.glob(os.path.join(state, "oci-*")):
        if os.path.isdir(root):
            out = subprocess.run([RUNC, "--root", root, "list", "-q"], capture_output=True,
                                 text=True).stdout
            ids |= set(out.split())
    return ids


def cgroup_uids(uids):
    found = set()
    for uid in uids:
        if glob.glob(f"/sys/fs/cgroup/*/asb/{uid}") or os.path.isdir(f"/sys/fs/cgroup/asb/{uid}"):
            found.add(uid)
    return found


def converge(srv, ledger, timeout):
    """Waits until objects deleted on acknowledgement are gone and the host matches the objects."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            sbs = srv.list(CORE, "sandboxes")
            claims = srv.list(EXT, "sandboxclaims")
        except requests.RequestException as e:
            last = f"API: {e}"
            time.sleep(0.2)
            continue
        names = {o["metadata"]["name"] for o in sbs}
        cnames = {o["metadata"]["name"] for o in claims}
        uids = {o["metadata"]["uid"] for o in sbs}
        with ledger.lock:
            ledger.uids |= uids
            gone_sb = ledger.deleted["sandboxes"] & names
            gone_cl = ledger.deleted["sandboxclaims"] & cnames
            seen = set(ledger.uids)
        extra_ct = runc_ids(srv.state) - uids
        # Every uid the state dir has a trace of, seen in a list or not (a sandbox can be created
        # and deleted between two looks).
        on_disk = set()
        for area in ("run", "sandboxes", "net"):
            d = os.path.join(srv.state, area)
            if os.path.isdir(d):
                on_disk |= {u for u in os.listdir(d) if len(u) == 36}
        extra_cg = cgroup_uids((seen | on_disk) - uids)
        extra_dir = on_disk - uids
        mounts = set()
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4]
                if mp.startswith(os.path.join(srv.state, "sandboxes") + "/"):
                    mounts.add(mp.split("/")[-2] if mp.endswith("/disk") else mp)
        extra_dir |= mounts - uids
        if not (gone_sb or gone_cl or extra_ct or extra_cg or extra_dir):
            return sbs, claims, None
        last = (f"deleted but present: {sorted(gone_sb | gone_cl)}; containers without object: "
                f"{sorted(extra_ct)}; cgroups without object: {sorted(extra_cg)}; dirs without "
                f"object: {sorted(extra_dir)}")
        time.sleep(0.2)
    try:
        return srv.list(CORE, "sandboxes"), srv.list(EXT, "sandboxclaims"), last
    except requests.RequestException:
        return [], [], last


def check(srv, ledger, rnd_no, converge_timeout):
    violations = []
    sbs, claims, stuck = converge(srv, ledger, converge_timeout)
    if stuck:
        violations.append(f"round {rnd_no}: not converged after {converge_timeout}s: {stuck}")
    names = {o["metadata"]["name"]: o for o in sbs}
    cnames = {o["metadata"]["name"]: o for o in claims}
    with ledger.lock:
        for n in ledger.present["sandboxes"]:
            if n not in names:
                violations.append(f"round {rnd_no}: acknowledged Sandbox {n} is missing")
        for n in ledger.present["sandboxclaims"]:
            if n not in cnames:
                violations.append(f"round {rnd_no}: acknowledged SandboxClaim {n} is missing")
        files = dict(ledger.files)
    holders = {}
    for c in claims:
        sb = ((c.get("status") or {}).get("sandbox") or {}).get("name")
        if sb:
            holders.setdefault(sb, []).append(c["metadata"]["name"])
    for sb, cs in holders.items():
        if len(cs) > 1:
            violations.append(f"round {rnd_no}: sandbox {sb} handed out to {len(cs)} claims: {cs}")
    for o in sbs:
        owners = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("controller")]
        if len(owners) > 1:
            violations.append(f"round {rnd_no}: sandbox {o['metadata']['name']} has "
                              f"{len(owners)} controllers")
    for (n, uid, path), sha in files.items():
        o = names.get(n)
        if not o or o["metadata"]["uid"] != uid or o["metadata"].get("deletionTimestamp"):
            continue
        if (o.get("spec") or {}).get("operatingMode", "Running") != "Running":
            srv.s.patch(srv.coll(CORE, "sandboxes") + "/" + n,
                        data=json.dumps({"spec": {"operatingMode": "Running"}}),
                        headers={"Content-Type": "application/merge-patch+json"}, timeout=10)
        got = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                st, body = sandbox_rest(srv.state, uid, "GET", "/v1/files/" + path)
                got = (st, hashlib.sha256(body).hexdigest())
                if st == 200:
                    break
            except OSError as e:
                got = (None, str(e))
            time.sleep(0.2)
        if not got or got[0] != 200 or got[1] != sha:
            violations.append(f"round {rnd_no}: file {path} of {n} written and acknowledged: "
                              f"now {got}")
    return violations


def setup_pool(srv):
    tpl = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": "chaos"},
           "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "host"}]}}}}
    pool = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool", "metadata": {"name": POOL},
            "spec": {"replicas": 3, "sandboxTemplateRef": {"name": "chaos"}}}
    for plural, body in (("sandboxtemplates", tpl), ("sandboxwarmpools", pool)):
        r = srv.s.post(srv.coll(EXT, plural), json=body, timeout=10)
        if r.status_code not in (201, 409):
            raise RuntimeError(f"{plural}: {r.status_code} {r.text}")


def teardown(srv, ledger):
    """Deletes everything and checks that the host is clean."""
    problems = []
    try:
        for plural, group in (("sandboxclaims", EXT), ("sandboxwarmpools", EXT),
                              ("sandboxtemplates", EXT), ("sandboxes", CORE)):
            for o in srv.list(group, plural):
                srv.s.delete(srv.coll(group, plural) + "/" + o["metadata"]["name"], timeout=10)
        deadline = time.monotonic() + 120
        while True:
            objs = [o["metadata"]["name"] for o in srv.list(CORE, "sandboxes")]
            cts = runc_ids(srv.state)
            if not objs and not cts:
                break
            if time.monotonic() > deadline:
                problems.append(f"teardown: after 120 s Sandboxes {objs} and containers {cts}")
                break
            time.sleep(0.2)
    except requests.RequestException as e:
        problems.append(f"teardown: {e}")
    srv.stop()
    left = cgroup_uids(ledger.uids)
    if left:
        problems.append(f"teardown: cgroups left: {sorted(left)}")
    return problems


def force_clean(state):
    """Last resort so that a failed run leaves nothing: kill and delete containers, unmount."""
    for root in [os.path.join(state, "runc")] + glob.glob(os.path.join(state, "oci-*")):
        if os.path.isdir(root):
            for cid in subprocess.run([RUNC, "--root", root, "list", "-q"], capture_output=True,
                                      text=True).stdout.split():
                subprocess.run([RUNC, "--root", root, "delete", "--force", cid],
                               capture_output=True)
    subprocess.run([ASB, "serve", "--cleanup"], capture_output=True,
                   env={**os.environ, "ASB_STATE_DIR": state}, timeout=120)
    with open("/proc/self/mountinfo") as f:
        mounts = [l.split()[4] for l in f if state in l.split()[4]]
    for m in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("CHAOS_ROUNDS", "20")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", time.time())))
    ap.add_argument("--network", default=os.environ.get("ASB_NETWORK", "none"))
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--converge-timeout", type=float, default=60)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("chaos: needs root (runc sandboxes)")
        return 2
    rnd = random.Random(args.seed)
    state = tempfile.mkdtemp(prefix="asb-chaos-", dir="/tmp")
    srv = Server(state, args.network)
    ledger = Ledger()
    violations, kills, ops = [], 0, 0
    t_start = time.monotonic()
    print(f"chaos: seed {args.seed}, {args.rounds} rounds, {args.clients} clients, "
          f"network {args.network}, state {state}")
    try:
        srv.start()
        setup_pool(srv)
        for rno in range(1, args.rounds + 1):
            works = [Workload(srv, ledger, random.Random(rnd.random()), f"r{rno}c{i}")
                     for i in range(args.clients)]
            threads = [threading.Thread(target=w.run, daemon=True) for w in works]
            for t in threads:
                t.start()
            time.sleep(rnd.uniform(0.05, 2.0))
            srv.kill9()
            kills += 1
            time.sleep(rnd.uniform(0, 0.5))  # clients keep trying against a dead server
            srv.start()
            time.sleep(rnd.uniform(0, 1.0))  # and against a server that is coming back
            for w in works:
                w.stop.set()
            for t in threads:
                t.join(timeout=60)
            ops += sum(w.ops for w in works)
            v = check(srv, ledger, rno, args.converge_timeout)
            for line in v:
                print("VIOLATION", line, flush=True)
            violations += v
            if rno % 10 == 0 or rno == args.rounds:
                print(f"chaos: {rno} rounds, {kills} kills, {ops} operations, "
                      f"{len(violations)} violations", flush=True)
        for line in teardown(srv, ledger):
            print("VIOLATION", line)
            violations.append(line)
    finally:
        srv.kill9()
        force_clean(state)
        shutil.rmtree(state, ignore_errors=True)
    took = time.monotonic() - t_start
    print()
    print("| rounds | kills | operations | violations | seconds |")
    print("|---|---|---|---|---|")
    print(f"| {args.rounds} | {kills} | {ops} | {len(violations)} | {took:.0f} |")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
