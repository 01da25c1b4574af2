"""The shutdown sequence of shared/spec/UPSTREAM.md §1.6 seen from outside: health flips to 503
while children get their grace period, a child that ignores SIGTERM is SIGKILLed after it, its
Start stream still ends with an exit event, a second signal does not disturb the exit, and the
daemon exits 0 within --shutdown-timeout."""
import os
import signal
import threading
import time

import requests

from grpc_helpers import Client, collect, pid_alive, wait_for


def test_health_503_during_grace_then_clean_exit(start_sandboxd):
    d = start_sandboxd(extra_args=["--shutdown-timeout", "5s"])
    c = Client(d.grpc_addr)
    result = {}
    stream = c.start(["sh", "-c", "trap '' TERM; echo $$ > pid; echo ready; sleep 60"])

    def drain():
        result["collected"] = collect(stream)

    t = threading.Thread(target=drain)
    t.start()
    pidfile = os.path.join(d.root, "pid")
    assert wait_for(lambda: os.path.exists(pidfile) and open(pidfile).read().strip())
    child = int(open(pidfile).read())

    began = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    statuses = []
    while time.monotonic() - began < 1.5:
        try:
            r = requests.get(d.url("/v1/health"), timeout=1)
            statuses.append(r.status_code)
            if r.status_code == 503:
                assert r.json() == {"code": "UNAVAILABLE", "message": "sandboxd is shutting down"}
                break
        except requests.RequestException:
            statuses.append("refused")
        time.sleep(0.05)
    assert 503 in statuses, statuses

    d.proc.send_signal(signal.SIGTERM)  # a second signal changes nothing
    t.join(timeout=20)
    assert not t.is_alive()
    events, pid, out, err, code = result["collected"]
    assert events[0] == "init" and events[-1] == "exit"
    assert b"ready" in out
    assert code == -1, "SIGTERM ignored: the child is SIGKILLed after the grace period"
    assert d.stop() == 0
    assert time.monotonic() - began < 6
    assert not pid_alive(child)
    c.close()
