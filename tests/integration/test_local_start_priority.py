"""Refill starts at a lower CPU priority (issue 16): a warm pool member's `runc run` runs at nice 5
(the start worker's thread, inherited by runc and so by the container), and the container's
processes are back at the server's own priority once it is up, so an adopted sandbox serves its
claim at normal priority. Real `asb serve` + runc, skipped without root or runc."""
import os

from asb_apiserver import EXT
from claims_helpers import claim, create, pool, template, wait_claim, wait_pool_ready
from local_sandbox import runc_list, sbx_state, start_sbx  # noqa: F401  (fixtures)


def tree_nices(pid):
    """{tid: nice} of every thread of pid and of its descendants."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            out[int(tid)] = os.getpriority(os.PRIO_PROCESS, int(tid))
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                children = f.read().split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        for c in children:
            out.update(tree_nices(int(c)))
    return out


def test_warm_members_and_claimed_sandbox_run_at_normal_priority(start_sbx, sbx_state):
    asb = start_sbx()
    server_nice = os.getpriority(os.PRIO_PROCESS, asb.proc.pid)
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    wait_pool_ready(asb, "wp", 2)
    containers = [c for c in runc_list(sbx_state) if c.get("status") == "running"]
    assert len(containers) == 2, containers
    for c in containers:
        nices = tree_nices(c["pid"])
        assert nices, c
        # Not the refill's nice 5 any more: every thread of the container, sandboxd's too.
        assert set(nices.values()) == {server_nice}, (c["id"], nices)
    # A claim adopts one; the replacement is started (held while the claim is adopted, then at
    # nice 5) and is back at normal priority once Ready too.
    create(asb, EXT, "sandboxclaims", claim("c1", "wp"))
    wait_claim(asb, "c1")
    wait_pool_ready(asb, "wp", 2)
    containers = [c for c in runc_list(sbx_state) if c.get("status") == "running"]
    assert len(containers) == 3, containers
    for c in containers:
        assert set(tree_nices(c["pid"]).values()) == {server_nice}, c["id"]
