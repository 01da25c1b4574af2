"""Helpers for the test_local_sandbox_* tests: an `asb serve` with the runc runtime on, a short
state directory (unix socket paths must stay under 108 bytes), and clients for a sandbox's
sockets. Imported explicitly, no conftest magic."""
import glob
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from asb_apiserver import CORE, ROOT, BUILD, AsbServer, sandbox, stop_servers

RUNC = shutil.which("runc") or "/usr/sbin/runc"


def runtime_available():
    """Why sandboxes cannot run here, or None."""
    if os.geteuid() != 0:
        return "local sandboxes need root (rootless runc is not supported yet)"
    if not os.path.exists(RUNC):
        return "runc is not installed (scripts/deps.sh installs it)"
    return None


def injected_sandboxd():
    """The sandboxd injected into containers: the release build, while `asb serve` itself runs
    sanitized. A sanitizer report from inside a container would never be seen (teardown is
    `runc delete --force`, SIGKILL) and LeakSanitizer's exit check needs ptrace, which the
    seccomp profile denies; sandboxd has its own sanitized tests. ASB_SANDBOXD overrides."""
    env = os.environ.get("ASB_SANDBOXD")
    if env:
        return env
    for path in (os.path.join(ROOT, "build", "bin", "sandboxd"), os.path.join(BUILD, "bin", "sandboxd")):
        if os.path.exists(path):
            return path
    pytest.fail("no sandboxd binary: run make first")


def runc_list(state_dir):
    out = subprocess.run([RUNC, "--root", os.path.join(state_dir, "runc"), "list", "--format", "json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return []
    return json.loads(out.stdout or "null") or []


def runc_ids(state_dir):
    return {c["id"] for c in runc_list(state_dir)}


def leftovers(state_dir):
    """What a state directory still has on the host: containers in its runtime roots, cgroups of
    its sandboxes, namespace (or any) mounts under it. Empty when nothing is left."""
    left = []
    roots = [os.path.join(state_dir, "runc")] + glob.glob(os.path.join(state_dir, "oci-*"))
    for root in roots:
        if not os.path.isdir(root):
            continue
        binary = RUNC if root.endswith("/runc") else (shutil.which(os.path.basename(root)[4:]) or "")
        if not binary:
            continue
        out = subprocess.run([binary, "--root", root, "list", "--format", "json"],
                             capture_output=True, text=True)
        left += [f"container {c['id']} ({root})" for c in json.loads(out.stdout or "null") or []]
    uids = set()
    for area in ("sandboxes", "run", "net", "volumes"):
        d = os.path.join(state_dir, area)
        if os.path.isdir(d):
            uids.update(os.listdir(d))
    for uid in uids:
        left += [f"cgroup {p}" for p in glob.glob(f"/sys/fs/cgroup/*/asb/{uid}") +
                 glob.glob(f"/sys/fs/cgroup/asb/{uid}")]
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if mp.startswith(state_dir.rstrip("/") + "/"):
                left.append(f"mount {mp}")
    return left


def cleanup_state(state_dir, env=None):
    """Fixture teardown: `asb serve --cleanup` removes what the state dir made on the host, and
    nothing may be left; then the directory goes."""
    from asb_apiserver import asb_binary
    if os.path.isdir(state_dir):
        e = {**os.environ, "ASB_STATE_DIR": state_dir, "ASB_RUNTIME": RUNC, **(env or {})}
        out = subprocess.run([asb_binary(), "serve", "--cleanup"], env=e, capture_output=True,
                             text=True, timeout=120)
        left = leftovers(state_dir)
        shutil.rmtree(state_dir, ignore_errors=True)
        assert out.returncode == 0 and not left, f"{out.stderr}\nleft behind: {left}"


@pytest.fixture
def sbx_state():
    why = runtime_available()
    if why:
        pytest.skip(why)
    d = tempfile.mkdtemp(prefix="asb-", dir="/tmp")
    yield d
    cleanup_state(d)


@pytest.fixture
def start_sbx(sbx_state, tmp_path):
    """Factory: start_sbx(env=None) -> AsbServer with the runc runtime on sbx_state."""
    servers = []

    def start(env=None):
        e = {"ASB_RUNTIME": RUNC, "ASB_SANDBOXD": injected_sandboxd(), **(env or {})}
        s = AsbServer(sbx_state, tmp_path / f"asb-serve-{len(servers)}.log", e)
        servers.append(s)
        return s.start()

    yield start
    stop_servers(servers)


def condition(obj, ctype):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return c
    return None


def get_sandbox(asb, name, ns="default"):
    r = asb.get(asb.path(CORE, "sandboxes", ns, name))
    assert r.status_code == 200, r.text
    return r.json()


def wait_ready(asb, name, timeout=15, want="True", reason=None):
    deadline = time.monotonic() + timeout
    obj = None
    while time.monotonic() < deadline:
        obj = get_sandbox(asb, name)
        c = condition(obj, "Ready")
        if c and c["status"] == want and (reason is None or c["reason"] == reason):
            return obj
        if c and want == "True" and c["reason"] in ("ImageNotSupported", "ImageNotFound",
                                                         "ImageUnpackFailed", "ReconcilerError"):
            raise AssertionError(f"sandbox {name} failed: {c}\n{asb.output()}")
        time.sleep(0.01)
    raise AssertionError(f"sandbox {name} not Ready={want} within {timeout}s: {obj}\n{asb.output()}")


def create(asb, name, image="host", container=None, **spec):
    body = sandbox(name, image=image, **spec)
    if container:
        body["spec"]["podTemplate"]["spec"]["containers"][0].update(container)
    r = asb.post(asb.path(CORE, "sandboxes", "default"), body)
    assert r.status_code == 201, r.text
    return r.json()


def sockets(state_dir, uid):
    d = os.path.join(state_dir, "run", uid)
    return os.path.join(d, "rest.sock"), os.path.join(d, "grpc.sock")
