"""Parallel reconciliation (issue 16): container starts run on a bounded pool of start workers,
one object at a time, so that sandboxes created together start together and a deletion that
comes while a start runs waits for it. Real `asb serve` + runc, skipped without root or runc."""
import re

from asb_apiserver import CORE
from local_sandbox import create, runc_ids, sbx_state, start_sbx, wait_ready  # noqa: F401
from test_local_sandbox_runtime import wait_for


def path(asb, name=None):
    return asb.path(CORE, "sandboxes", "default", name)


def exists(asb, name):
    return asb.get(path(asb, name)).status_code == 200


def start_spans(output):
    spans = [(int(a), int(b)) for a, b in
             re.findall(r'"sandbox start finished".*?"start_usec":"?(\d+)"?.*?"end_usec":"?(\d+)"?',
                        output)]
    if not spans:  # text log format
        spans = [(int(a), int(b)) for a, b in
                 re.findall(r"sandbox start finished.*?start_usec=(\d+).*?end_usec=(\d+)", output)]
    return spans


def most_at_once(spans):
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    cur = best = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    return best


def test_sandboxes_created_together_start_in_parallel(start_sbx, sbx_state):
    asb = start_sbx(env={"ASB_START_WORKERS": "4"})
    names = [f"ps{i}" for i in range(8)]
    uids = [create(asb, n)["metadata"]["uid"] for n in names]
    for n in names:
        wait_ready(asb, n, timeout=60)
    spans = start_spans(asb.output())
    # Each object is started exactly once, and several ran at the same instant.
    assert len(spans) == 8, asb.output()
    assert most_at_once(spans) >= 2, spans
    assert set(uids) <= runc_ids(sbx_state)


def test_one_start_worker_starts_them_one_at_a_time(start_sbx, sbx_state):
    asb = start_sbx(env={"ASB_START_WORKERS": "1"})
    names = [f"one{i}" for i in range(3)]
    for n in names:
        create(asb, n)
    for n in names:
        wait_ready(asb, n, timeout=60)
    spans = start_spans(asb.output())
    assert len(spans) == 3, asb.output()
    assert most_at_once(spans) == 1, spans


def test_deleting_while_starting_leaves_nothing(start_sbx, sbx_state):
    asb = start_sbx(env={"ASB_START_WORKERS": "2"})
    names = [f"gone{i}" for i in range(6)]
    uids = [create(asb, n)["metadata"]["uid"] for n in names]
    # Deleted while queued or starting: each is torn down after its start, never during it.
    for n in names:
        assert asb.delete(path(asb, n)).status_code == 200
    assert wait_for(lambda: not any(exists(asb, n) for n in names), timeout=60), asb.output()
    assert wait_for(lambda: not set(uids) & runc_ids(sbx_state)), asb.output()
    # The server is still healthy: a new sandbox starts.
    create(asb, "after")
    wait_ready(asb, "after", timeout=60)
