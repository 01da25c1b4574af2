"""Deletion that finishes and PID 1 death seen at once (issue 13, holes 5 and 8): a deleted
Sandbox stays visible with a deletionTimestamp until its container is gone; deletions run in
parallel; SIGTERM of `asb serve` completes pending teardowns or leaves them recorded for the next
start; `asb serve --cleanup` removes everything a state directory made on the host. Real
`asb serve` + runc, skipped without root or runc."""
import json
import os
import re
import signal
import subprocess
import threading
import time

from asb_apiserver import CORE, asb_binary
from local_sandbox import (RUNC, condition, create, get_sandbox, leftovers, runc_ids, runc_list,  # noqa: F401
                          sbx_state, start_sbx, wait_ready)
from test_local_sandbox_runtime import run, wait_for
from grpc_helpers import Client
from local_sandbox import sockets

FINALIZER = "local.agents.x-k8s.io/teardown"


def path(asb, name=None):
    return asb.path(CORE, "sandboxes", "default", name)


def exists(asb, name):
    return asb.get(path(asb, name)).status_code == 200


def container_pids(state_dir):
    """Host pids of live processes (zombies are dead, waiting for the host's init to reap them)
    whose cgroup names a container of this state dir."""
    uids = set(os.listdir(os.path.join(state_dir, "sandboxes"))) if os.path.isdir(
        os.path.join(state_dir, "sandboxes")) else set()
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cg = open(f"/proc/{pid}/cgroup").read()
            if re.search(r"^State:\s+[ZX]", open(f"/proc/{pid}/status").read(), re.M):
                continue
        except OSError:
            continue
        if any(f"/asb/{u}" in cg for u in uids):
            pids.append(int(pid))
    return pids


def test_deleted_sandbox_is_visible_until_its_container_is_gone(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "fin")["metadata"]["uid"]
    obj = wait_ready(asb, "fin")
    assert FINALIZER in obj["metadata"]["finalizers"]
    rv = obj["metadata"]["resourceVersion"]
    r = asb.get(path(asb), stream=True, timeout=20,
                params={"watch": "true", "resourceVersion": rv, "fieldSelector": "metadata.name=fin"})
    d = asb.delete(path(asb, "fin"))
    assert d.status_code == 200, d.text
    assert d.json()["metadata"].get("deletionTimestamp"), d.json()
    events = []
    try:
        for line in r.iter_lines():
            if not line:
                continue
            ev = json.loads(line)
            # The moment the object disappears, its container must already be gone.
            running_at_event = uid in runc_ids(sbx_state)
            events.append((ev["type"], bool(ev["object"]["metadata"].get("deletionTimestamp")),
                           running_at_event))
            if ev["type"] == "DELETED":
                break
    finally:
        r.close()
    assert events[0][:2] == ("MODIFIED", True), events
    assert events[-1] == ("DELETED", True, False), events
    assert not exists(asb, "fin")
    assert not os.path.exists(os.path.join(sbx_state, "run", uid))
    assert not os.path.exists(os.path.join(sbx_state, "sandboxes", uid))
    assert "sandbox torn down" in asb.output()


def test_sigterm_right_after_deleting_six_leaves_no_container(start_sbx, sbx_state):
    asb = start_sbx()
    names = [f"six{i}" for i in range(6)]
    uids = [create(asb, n)["metadata"]["uid"] for n in names]
    for n in names:
        wait_ready(asb, n)
    for n in names:
        assert asb.delete(path(asb, n)).status_code == 200
    assert asb.stop(signal.SIGTERM) == 0
    assert not set(uids) & runc_ids(sbx_state), asb.output()
    assert container_pids(sbx_state) == []
    # Whatever was still recorded (deletionTimestamp) is finished by the next start.
    asb2 = start_sbx()
    assert wait_for(lambda: not any(exists(asb2, n) for n in names)), asb2.output()
    assert not set(uids) & runc_ids(sbx_state)


def test_pending_deletions_survive_a_stop_and_finish_at_the_next_start(start_sbx, sbx_state):
    # No grace at all: SIGTERM leaves the teardowns it did not start recorded in the store.
    asb = start_sbx(env={"ASB_TEARDOWN_GRACE": "1us", "ASB_TEARDOWN_WORKERS": "1"})
    names = [f"rec{i}" for i in range(4)]
    uids = [create(asb, n)["metadata"]["uid"] for n in names]
    keep = create(asb, "keeper")["metadata"]["uid"]
    for n in names + ["keeper"]:
        wait_ready(asb, n)
    for n in names:
        assert asb.delete(path(asb, n)).status_code == 200
    assert asb.stop(signal.SIGTERM) == 0
    asb2 = start_sbx()
    assert wait_for(lambda: not any(exists(asb2, n) for n in names), timeout=20), asb2.output()
    assert wait_for(lambda: not set(uids) & runc_ids(sbx_state))
    # The undeleted sandbox survived both restarts, re-adopted, not restarted.
    obj = wait_ready(asb2, "keeper")
    assert condition(obj, "Ready")["status"] == "True"
    assert keep in runc_ids(sbx_state)
    assert "re-adopted sandbox container" in asb2.output()


def test_deleting_twenty_runs_teardowns_in_parallel(start_sbx, sbx_state):
    asb = start_sbx()
    names = [f"par{i:02d}" for i in range(20)]
    for n in names:
        create(asb, n)
    for n in names:
        wait_ready(asb, n, timeout=60)
    for n in names:
        assert asb.delete(path(asb, n)).status_code == 200
    assert wait_for(lambda: not any(exists(asb, n) for n in names), timeout=60), asb.output()
    spans = [(int(a), int(b)) for a, b in
             re.findall(r'"sandbox torn down".*?"start_usec":"?(\d+)"?.*?"end_usec":"?(\d+)"?',
                        asb.output())]
    if not spans:  # text log format
        spans = [(int(a), int(b)) for a, b in
                 re.findall(r"sandbox torn down.*?start_usec=(\d+).*?end_usec=(\d+)", asb.output())]
    assert len(spans) == 20, asb.output()
    # Structural parallelism: the most teardowns running at one instant.
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    cur = best = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    assert best >= 2, spans
    assert not runc_list(sbx_state)


def test_cleanup_removes_everything_the_state_dir_made(start_sbx, sbx_state):
    env = {"ASB_NETWORK": "bridge", "ASB_POD_CIDR": "10.251.7.0/24"}
    asb = start_sbx(env=env)
    uids = [create(asb, n)["metadata"]["uid"] for n in ("c1", "c2")]
    for n in ("c1", "c2"):
        wait_ready(asb, n)
    assert set(uids) <= runc_ids(sbx_state)
    bridge = re.search(r'"bridge":"(asb[0-9a-f]{8})"', asb.output()) or \
        re.search(r"bridge=(asb[0-9a-f]{8})", asb.output())
    assert bridge, asb.output()
    bridge = bridge.group(1)
    table = "asb_" + bridge[3:]
    asb.kill9()  # sandboxes keep running, as after a crash
    assert leftovers(sbx_state)
    out = subprocess.run([asb_binary(), "serve", "--cleanup"], capture_output=True, text=True,
                         env={**os.environ, "ASB_STATE_DIR": sbx_state, "ASB_RUNTIME": RUNC},
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "removed 2 containers" in out.stderr, out.stderr
    assert leftovers(sbx_state) == []
    assert container_pids(sbx_state) == []
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
    assert subprocess.run(["nft", "list", "table", "inet", table],
                          capture_output=True).returncode != 0
    # A second run finds nothing and still succeeds.
    again = subprocess.run([asb_binary(), "serve", "--cleanup"], capture_output=True, text=True,
                           env={**os.environ, "ASB_STATE_DIR": sbx_state, "ASB_RUNTIME": RUNC},
                           timeout=120)
    assert again.returncode == 0 and "removed 0 containers" in again.stderr, again.stderr


def test_pid1_death_turns_ready_false_within_two_seconds(start_sbx, sbx_state):
    # A long resync: only the pidfd can make this quick.
    asb = start_sbx(env={"ASB_RESYNC_INTERVAL": "60s"})
    uid = create(asb, "pid1")["metadata"]["uid"]
    obj = wait_ready(asb, "pid1")
    rv = obj["metadata"]["resourceVersion"]
    r = asb.get(path(asb), stream=True, timeout=20,
                params={"watch": "true", "resourceVersion": rv, "fieldSelector": "metadata.name=pid1"})
    seen = []

    def watch():
        try:
            for line in r.iter_lines():
                if line:
                    c = condition(json.loads(line)["object"], "Ready")
                    seen.append((time.monotonic(), c and c["status"]))
        except Exception:
            pass
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    grpc_sock = sockets(sbx_state, uid)[1]
    client = Client(f"unix:{grpc_sock}")
    t0 = time.monotonic()
    try:
        run(client, "/bin/sh", "-c", "kill -TERM 1")
    except Exception:
        pass  # the connection may go with sandboxd
    assert wait_for(lambda: any(s == "False" for _, s in seen), timeout=5), (seen, asb.output())
    t_false = next(ts for ts, s in seen if s == "False")
    r.close()
    assert t_false - t0 < 2.0, (t_false - t0, seen)
    # Restarted (no main process): Ready again.
    obj = wait_ready(asb, "pid1", timeout=20)
    assert "sandbox's first process exited" in asb.output()


def sandboxd_log(state_dir, uid):
    base = os.path.join(state_dir, "sandboxes", uid, "sandboxd.log")
    out = b""
    for p in (base + ".1", base):
        if os.path.exists(p):
            out += open(p, "rb").read()
    return out


def test_pid1_output_pipe_is_not_even_openable_inside(start_sbx, sbx_state):
    """Hole 4 with the default user namespace: the sandbox cannot even look at sandboxd's fds
    (sandboxd is not dumpable, test_escape_proc.py) nor reopen /proc/1/fd/1 for writing;
    sandboxd writes its own fd 1 only."""
    asb = start_sbx()
    uid = create(asb, "sealed")["metadata"]["uid"]
    wait_ready(asb, "sealed")
    client = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    code, out, err = run(client, "/bin/sh", "-c", "readlink -v /proc/1/fd/1 /proc/1/fd/2")
    assert code != 0 and "Permission denied" in err and not out, (code, out, err)
    code, _, err = run(client, "/bin/sh", "-c", "echo marker-from-inside >> /proc/1/fd/1")
    assert code != 0 and "Permission denied" in err, (code, err)
    assert b"marker-from-inside" not in sandboxd_log(sbx_state, uid)


def write_pid1_stdout(state_dir, uid, data):
    """Writes into sandboxd's stdout pipe from the host, as sandboxd itself would: the sandbox's
    own processes cannot (sandboxd is not dumpable, test_escape_proc.py)."""
    pid = int(open(os.path.join(state_dir, "sandboxes", uid, "bundle", "pid")).read())
    with open(f"/proc/{pid}/fd/1", "wb") as f:
        f.write(data)


def test_pid1_output_is_a_pipe_capped_by_asb_serve(start_sbx, sbx_state):
    """Hole 4: sandboxd's stdout/stderr is a pipe asb serve reads, not a host file: whatever
    reaches it lands in asb serve's capped log only. Without user namespaces (uid 1000 is then
    not other to the pipe) the sandbox still cannot reach it through /proc/1/fd/1, and the cap
    holds for a flood written into it."""
    cap = 64 * 1024
    asb = start_sbx(env={"ASB_SANDBOX_LOG_MAX": str(cap), "ASB_USERNS_RANGE": "off"})
    uid = create(asb, "piped")["metadata"]["uid"]
    wait_ready(asb, "piped")
    client = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    code, _, err = run(client, "/bin/sh", "-c", "echo marker-from-inside >> /proc/1/fd/1")
    assert code != 0 and "Permission denied" in err, (code, err)
    pid = int(open(os.path.join(sbx_state, "sandboxes", uid, "bundle", "pid")).read())
    assert os.readlink(f"/proc/{pid}/fd/1").startswith("pipe:")
    # Whatever is written, only asb serve's log (written by asb serve) changes, capped.
    write_pid1_stdout(sbx_state, uid, b"marker-from-the-pipe\n")
    assert wait_for(lambda: b"marker-from-the-pipe" in sandboxd_log(sbx_state, uid)), asb.output()
    write_pid1_stdout(sbx_state, uid, b"x" * 4000000 + b"\nend-of-flood\n")
    assert wait_for(lambda: b"end-of-flood" in sandboxd_log(sbx_state, uid), timeout=20)
    assert b"marker-from-inside" not in sandboxd_log(sbx_state, uid)
    base = os.path.join(sbx_state, "sandboxes", uid, "sandboxd.log")
    sizes = [os.path.getsize(p) for p in (base, base + ".1") if os.path.exists(p)]
    assert sum(sizes) <= 2 * cap, sizes
    # The file is asb serve's: not reachable from inside (no bind of it), owned by root, 0600.
    st = os.stat(base)
    assert st.st_uid == 0 and (st.st_mode & 0o077) == 0
    # The sandbox still works after the flood.
    assert run(client, "/bin/echo", "ok")[1] == "ok\n"


def test_output_pipe_survives_an_asb_serve_restart(start_sbx, sbx_state):
    asb = start_sbx(env={"ASB_USERNS_RANGE": "off"})
    uid = create(asb, "relay")["metadata"]["uid"]
    wait_ready(asb, "relay")
    pid = int(open(os.path.join(sbx_state, "sandboxes", uid, "bundle", "pid")).read())
    asb.kill9()
    # No reader now: sandboxd's log lines are dropped (EPIPE), it keeps serving.
    client = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    assert run(client, "/bin/echo", "still")[1] == "still\n"
    asb2 = start_sbx(env={"ASB_USERNS_RANGE": "off"})
    wait_ready(asb2, "relay")
    # Ready may be the stored status from before: wait for the re-adoption itself.
    assert wait_for(lambda: "re-adopted sandbox container" in asb2.output()), asb2.output()
    assert int(open(os.path.join(sbx_state, "sandboxes", uid, "bundle", "pid")).read()) == pid
    write_pid1_stdout(sbx_state, uid, b"after-restart\n")
    assert wait_for(lambda: b"after-restart" in sandboxd_log(sbx_state, uid)), asb2.output()
    # And the sandbox survives a SIGTERM restart as well.
    assert asb2.stop(signal.SIGTERM) == 0
    assert run(client, "/bin/echo", "again")[1] == "again\n"
    asb3 = start_sbx(env={"ASB_USERNS_RANGE": "off"})
    wait_ready(asb3, "relay")
    assert wait_for(lambda: "re-adopted sandbox container" in asb3.output()), asb3.output()
    write_pid1_stdout(sbx_state, uid, b"after-sigterm\n")
    assert wait_for(lambda: b"after-sigterm" in sandboxd_log(sbx_state, uid)), asb3.output()


def test_delete_right_after_create_and_of_a_frozen_sandbox(start_sbx, sbx_state):
    asb = start_sbx()
    # Deleted before (or while) its container starts: the object goes only once nothing runs.
    early = create(asb, "early")["metadata"]["uid"]
    assert asb.delete(path(asb, "early")).status_code == 200
    # Suspended (frozen by the cgroup freezer), then deleted: thawed and killed.
    frozen = create(asb, "frozen")["metadata"]["uid"]
    wait_ready(asb, "frozen")
    assert asb.merge_patch(path(asb, "frozen"), {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    assert wait_for(lambda: {c["id"]: c["status"] for c in runc_list(sbx_state)}.get(frozen) == "paused")
    assert asb.delete(path(asb, "frozen")).status_code == 200
    assert wait_for(lambda: not exists(asb, "early") and not exists(asb, "frozen"), timeout=20), \
        asb.output()
    assert not {early, frozen} & runc_ids(sbx_state)
    assert container_pids(sbx_state) == []
    # A new sandbox under a deleted one's name is a new object with its own container.
    again = create(asb, "early")["metadata"]["uid"]
    assert again != early
    wait_ready(asb, "early")
