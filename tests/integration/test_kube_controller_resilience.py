"""asb-controller under adverse API-server behaviour: cut watches, 410 Gone mid-run, 409 storms,
restarts with work in flight, leader failover between two processes."""
import json
import time

import requests

from kube_fixtures import (Controller, condition, controller, fake, pool_obj,  # noqa: F401
                           sandbox_obj, template_obj, wait_for)


def test_watch_disconnect_and_410_mid_run(fake, controller):  # noqa: F811
    ctl = controller()
    fake.create("sandboxes", sandbox_obj("w1"))
    wait_for(lambda: fake.get("pods", "w1"), what="pod w1")
    fake.hook("disconnect")
    fake.create("sandboxes", sandbox_obj("w2"))
    wait_for(lambda: fake.get("pods", "w2"), what="pod w2 after a cut watch")
    # Compaction: every watch gets 410 Gone; the informers re-list and catch up, including a
    # deletion that happened while they were not watching.
    before = requests.get(f"http://{ctl.addr('metrics')}/metrics").text
    fake.hook("compact")
    fake.hook("disconnect")
    fake.create("sandboxes", sandbox_obj("w3"))
    fake.hook("compact")
    wait_for(lambda: fake.get("pods", "w3"), what="pod w3 after 410")
    def relists():
        m = requests.get(f"http://{ctl.addr('metrics')}/metrics").text
        for line in m.splitlines():
            if line.startswith('asb_controller_informer_relists_total{resource="sandboxes"}'):
                return int(line.split()[-1])
        return 0
    wait_for(lambda: relists() >= 2, what="a re-list of sandboxes")
    assert 'asb_controller_informer_relists_total{resource="sandboxes"} 1' in before
    assert "resourceVersion expired" in ctl.log_text()
    # Pod status change after all this still reaches the Sandbox.
    fake.set_pod_ready("w3")
    wait_for(lambda: (condition(fake.get("sandboxes", "w3"), "Ready") or {}).get("status") == "True",
             what="w3 Ready")


def test_conflict_storm(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxtemplates", template_obj("ct"))
    fake.create("sandboxwarmpools", pool_obj("cp", "ct", replicas=2))
    time.sleep(0.3)
    fake.hook("conflicts", n=40)  # the next 40 writes (any object) answer 409
    for i in range(5):
        fake.s.post(fake.path("sandboxes"), json=sandbox_obj(f"st{i}"))
    # Creates eaten by the storm are retried by the test; the controller retries its own.
    for i in range(5):
        if fake.get("sandboxes", f"st{i}") is None:
            wait_for(lambda: fake.s.post(fake.path("sandboxes"), json=sandbox_obj(f"st{i}")).status_code == 201,
                     what="create after storm")
    for i in range(5):
        wait_for(lambda: fake.get("pods", f"st{i}"), timeout=20, what=f"pod st{i}")
        wait_for(lambda: condition(fake.get("sandboxes", f"st{i}"), "Ready"), timeout=20, what="status")
    wait_for(lambda: len([s for s in fake.list("sandboxes") if s["metadata"]["name"].startswith("cp-")]) == 2,
             timeout=20, what="pool filled")
    time.sleep(1)  # the point: no extra member appears in the meantime
    assert len([s for s in fake.list("sandboxes") if s["metadata"]["name"].startswith("cp-")]) == 2
    assert fake.stats()["conflicts_left"] == 0


def test_restart_with_work_in_flight(fake, controller):  # noqa: F811
    c1 = controller("first")
    fake.create("sandboxtemplates", template_obj("rt"))
    fake.create("sandboxwarmpools", pool_obj("rp", "rt", replicas=5))
    for i in range(10):
        fake.create("sandboxes", sandbox_obj(f"r{i}"))
    time.sleep(0.15)
    c1.kill()  # SIGKILL mid-work
    c2 = controller("second")
    for i in range(10):
        wait_for(lambda: fake.get("pods", f"r{i}"), timeout=20, what=f"pod r{i}")
    wait_for(lambda: len([s for s in fake.list("sandboxes") if s["metadata"]["name"].startswith("rp-")]) == 5,
             timeout=20, what="pool of 5")
    time.sleep(1)  # the point: no extra member appears in the meantime
    assert len([s for s in fake.list("sandboxes") if s["metadata"]["name"].startswith("rp-")]) == 5
    assert len(fake.list("pods")) == 15, "one pod per sandbox, none duplicated"
    del c2


def test_leader_failover(fake, tmp_path):  # noqa: F811
    args = ["--leader-elect=true", "--leader-election-lease-duration", "2s",
            "--leader-election-renew-deadline", "1500ms", "--leader-election-retry-period", "200ms"]
    a = Controller(fake, tmp_path, "a", args)
    wait_for(lambda: "successfully acquired lease" in a.log_text(), what="a leads")
    b = Controller(fake, tmp_path, "b", args)
    try:
        time.sleep(1)  # the point: b does not take the lease while a renews it
        assert "successfully acquired lease" not in b.log_text()
        lease = fake.get("leases", "agent-sandbox-controller")
        assert lease["spec"]["holderIdentity"] in a.log_text()
        fake.create("sandboxes", sandbox_obj("l1"))
        wait_for(lambda: fake.get("pods", "l1"), what="leader reconciles")
        a.kill()  # no release: b takes over once the lease expires
        t0 = time.monotonic()
        wait_for(lambda: "successfully acquired lease" in b.log_text(), timeout=10, what="b takes over")
        assert time.monotonic() - t0 >= 1.0, "the lease must expire first"
        fake.create("sandboxes", sandbox_obj("l2"))
        wait_for(lambda: fake.get("pods", "l2"), what="new leader reconciles")
        lease = fake.get("leases", "agent-sandbox-controller")
        assert lease["spec"]["holderIdentity"] in b.log_text()
        assert lease["spec"]["leaseTransitions"] >= 2
        # A clean stop releases the lease at once.
        b.stop()
        lease = fake.get("leases", "agent-sandbox-controller")
        assert lease["spec"]["holderIdentity"] == ""
    finally:
        a.stop(check=False)
        b.stop(check=False)
        print(json.dumps(fake.stats()))
