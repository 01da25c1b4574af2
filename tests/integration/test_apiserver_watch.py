"""`asb serve` watches: prompt delivery, initial state, selectors, bookmarks, timeouts, 410."""
import json
import queue
import socket
import threading
import time

import requests

from asb_apiserver import CORE, asb, sandbox, start_asb  # noqa: F401 (fixtures)


class Watch:
    """Streams events of one watch request into a queue from a background thread."""

    def __init__(self, server, path, **params):
        self.events = queue.Queue()
        self.status = None
        self.done = threading.Event()
        self.resp = None
        params = {"watch": "true", **params}
        self.thread = threading.Thread(target=self._run, args=(server, path, params), daemon=True)
        self.thread.start()

    def _run(self, server, path, params):
        try:
            with server.session.get(server.url + path, params=params, stream=True, timeout=30) as r:
                self.resp = r
                self.status = r.status_code
                for line in r.iter_lines():
                    if line:
                        self.events.put((time.monotonic(), json.loads(line)))
        except (requests.RequestException, ValueError):
            pass
        finally:
            self.done.set()

    def next(self, timeout=5):
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no watch event within %.1fs" % timeout)

    def next_event(self, timeout=5):
        return self.next(timeout)[1]

    def close(self):
        """Hangs up from this side: shut the socket down so the reader thread wakes (closing the
        response from another thread would wait for its blocked read)."""
        conn = getattr(self.resp.raw, "_connection", None) if self.resp is not None else None
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.done.wait(5)

    def assert_quiet(self, seconds=0.3):
        try:
            _, ev = self.events.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected event {ev}")


def rv_of(obj):
    return obj["metadata"]["resourceVersion"]


def test_events_arrive_promptly(asb):
    p = asb.path(CORE, "sandboxes")
    rv = asb.get(p).json()["metadata"]["resourceVersion"]
    w = Watch(asb, p, resourceVersion=rv)
    time.sleep(0.2)
    created = asb.create_sandbox("w1")
    t_write = time.monotonic()
    t, ev = w.next()
    assert ev["type"] == "ADDED" and ev["object"] == created
    assert t - t_write < 0.5, f"ADDED took {t - t_write:.3f}s"
    patched = asb.merge_patch(asb.path(CORE, "sandboxes", name="w1"), {"spec": {"operatingMode": "Suspended"}}).json()
    t_write = time.monotonic()
    t, ev = w.next()
    assert ev["type"] == "MODIFIED" and ev["object"] == patched and t - t_write < 0.5
    st = asb.merge_patch(asb.path(CORE, "sandboxes", name="w1", sub="status"), {"status": {"podIPs": ["1.2.3.4"]}}).json()
    ev = w.next_event()
    assert ev["type"] == "MODIFIED" and ev["object"]["status"] == st["status"]
    gone = asb.delete(asb.path(CORE, "sandboxes", name="w1")).json()
    t_write = time.monotonic()
    t, ev = w.next()
    assert ev["type"] == "DELETED" and ev["object"]["metadata"]["name"] == "w1" and t - t_write < 0.5
    assert rv_of(ev["object"]) == rv_of(gone)
    assert w.status == 200
    # resourceVersions strictly increase
    assert int(rv_of(created)) < int(rv_of(patched)) < int(rv_of(st)) < int(rv_of(gone))
    w.close()


def test_initial_events_and_resume(asb):
    a = asb.create_sandbox("a")
    b = asb.create_sandbox("b")
    p = asb.path(CORE, "sandboxes")
    for params in ({}, {"resourceVersion": "0"}):
        w = Watch(asb, p, **params)
        got = sorted([w.next_event(), w.next_event()], key=lambda e: e["object"]["metadata"]["name"])
        assert [e["type"] for e in got] == ["ADDED", "ADDED"]
        assert [e["object"] for e in got] == [a, b]
        w.assert_quiet()
        w.close()
    # resuming from a's resourceVersion replays b's creation only
    w = Watch(asb, p, resourceVersion=rv_of(a))
    ev = w.next_event()
    assert ev["type"] == "ADDED" and ev["object"] == b
    w.assert_quiet()
    w.close()


def test_namespace_and_selectors(asb):
    p = asb.path(CORE, "sandboxes")
    rv = asb.get(p).json()["metadata"]["resourceVersion"]
    by_label = Watch(asb, p, resourceVersion=rv, labelSelector="app=web")
    by_name = Watch(asb, p, resourceVersion=rv, fieldSelector="metadata.name=target")
    cluster = Watch(asb, asb.path(CORE, "sandboxes", ns=None), resourceVersion=rv)
    time.sleep(0.2)
    asb.create_sandbox("other", ns="elsewhere", labels={"app": "web"})
    asb.create_sandbox("target", labels={"app": "db"})
    # namespaced watches see only "default": "other" never shows up there
    ev = by_name.next_event()
    assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "target"
    names = [cluster.next_event()["object"]["metadata"]["name"] for _ in range(2)]
    assert names == ["other", "target"]
    # relabel into and out of the selector: ADDED then DELETED, as kube-apiserver does
    path = asb.path(CORE, "sandboxes", name="target")
    asb.merge_patch(path, {"metadata": {"labels": {"app": "web"}}})
    ev = by_label.next_event()
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "target")
    asb.merge_patch(path, {"metadata": {"labels": {"app": "db"}}})
    ev = by_label.next_event()
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("DELETED", "target")
    assert ev["object"]["metadata"]["labels"] == {"app": "db"}
    assert by_name.next_event()["type"] == "MODIFIED"
    assert by_name.next_event()["type"] == "MODIFIED"
    by_label.assert_quiet()
    for w in (by_label, by_name, cluster):
        w.close()


def test_namespaced_watch_ignores_other_namespaces(asb):
    p = asb.path(CORE, "sandboxes")
    rv = asb.get(p).json()["metadata"]["resourceVersion"]
    w = Watch(asb, p, resourceVersion=rv)
    time.sleep(0.2)
    asb.create_sandbox("x", ns="elsewhere")
    asb.create_sandbox("y")
    ev = w.next_event()
    assert ev["object"]["metadata"]["name"] == "y"
    w.close()


def test_bookmarks_and_timeout(start_asb):
    asb = start_asb(env={"ASB_BOOKMARK_INTERVAL": "200ms"})
    o = asb.create_sandbox("bm")
    p = asb.path(CORE, "sandboxes")
    t0 = time.monotonic()
    w = Watch(asb, p, resourceVersion=rv_of(o), allowWatchBookmarks="true", timeoutSeconds="2")
    ev = w.next_event()
    assert ev["type"] == "BOOKMARK"
    assert ev["object"]["kind"] == "Sandbox" and ev["object"]["metadata"]["resourceVersion"] == rv_of(o)
    assert w.done.wait(5), "watch did not end after timeoutSeconds"
    assert 1.5 < time.monotonic() - t0 < 4
    # without allowWatchBookmarks there are none; the stream still ends at the timeout
    w = Watch(asb, p, resourceVersion=rv_of(o), timeoutSeconds="1")
    assert w.done.wait(5)
    assert w.events.empty()


def test_expired_resource_version_gets_410(start_asb):
    asb = start_asb(env={"ASB_WATCH_WINDOW": "3"})
    first = asb.create_sandbox("e0")
    for i in range(1, 6):
        asb.create_sandbox(f"e{i}")
    p = asb.path(CORE, "sandboxes")
    w = Watch(asb, p, resourceVersion=rv_of(first))
    ev = w.next_event()
    assert w.status == 200
    assert ev["type"] == "ERROR"
    st = ev["object"]
    assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired"
    assert st["status"] == "Failure" and "too old resource version" in st["message"]
    assert w.done.wait(5)
    # within the window works
    cur = asb.get(p).json()["metadata"]["resourceVersion"]
    w = Watch(asb, p, resourceVersion=str(int(cur) - 2))
    assert [w.next_event()["type"] for _ in range(2)] == ["ADDED", "ADDED"]
    w.close()
    # a slow watcher that falls out of the window also gets 410
    bad = asb.get(p, params={"watch": "1", "resourceVersion": "1", "timeoutSeconds": "1"})
    assert bad.status_code == 200 and json.loads(bad.text.splitlines()[0])["object"]["code"] == 410


def test_bad_watch_parameters(asb):
    p = asb.path(CORE, "sandboxes")
    for params in ({"resourceVersion": "abc"}, {"timeoutSeconds": "x"}, {"labelSelector": "a in (b"}):
        r = asb.get(p, params={"watch": "true", **params})
        assert r.status_code == 400 and r.json()["reason"] == "BadRequest", r.text


def test_sigterm_with_open_watches_exits_cleanly(start_asb):
    asb = start_asb()
    p = asb.path(CORE, "sandboxes")
    watches = [Watch(asb, p, resourceVersion="0") for _ in range(4)]
    asb.create_sandbox("s")
    for w in watches:
        assert w.next_event()["type"] == "ADDED"
    t0 = time.monotonic()
    assert asb.stop() == 0
    assert time.monotonic() - t0 < 5
    for w in watches:
        assert w.done.wait(5)


def test_graceful_delete_events(asb):
    p = asb.path(CORE, "sandboxes")
    body = sandbox("g")
    body["metadata"]["finalizers"] = ["x.io/hold"]
    created = asb.post(p, body).json()
    w = Watch(asb, p, resourceVersion=rv_of(created))
    time.sleep(0.1)
    asb.delete(asb.path(CORE, "sandboxes", name="g"))
    ev = w.next_event()
    assert ev["type"] == "MODIFIED" and ev["object"]["metadata"]["deletionTimestamp"]
    asb.merge_patch(asb.path(CORE, "sandboxes", name="g"), {"metadata": {"finalizers": []}})
    ev = w.next_event()
    assert ev["type"] == "DELETED" and ev["object"]["metadata"]["finalizers"] == []
    w.close()


def test_hung_up_watches_are_reaped(asb):
    """A client that hangs up on an idle watch frees its server thread within seconds."""
    import os

    def threads():
        return len(os.listdir(f"/proc/{asb.proc.pid}/task"))

    base = threads()
    ws = [Watch(asb, asb.path(CORE, "sandboxes"), resourceVersion="0") for _ in range(5)]
    deadline = time.monotonic() + 5
    while threads() < base + 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threads() >= base + 4  # one watch may reuse the keep-alive connection
    for w in ws:
        w.close()
    deadline = time.monotonic() + 15
    while threads() > base and time.monotonic() < deadline:
        time.sleep(0.1)
    assert threads() <= base


def test_send_initial_events_ends_with_bookmark(asb):
    """client-go's WatchList: sendInitialEvents=true, then a bookmark marking the end."""
    a = asb.create_sandbox("a")
    w = Watch(asb, asb.path(CORE, "sandboxes"), sendInitialEvents="true", allowWatchBookmarks="true",
              resourceVersionMatch="NotOlderThan", resourceVersion="")
    ev = w.next_event()
    assert ev["type"] == "ADDED" and ev["object"] == a
    ev = w.next_event()
    assert ev["type"] == "BOOKMARK"
    assert ev["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert ev["object"]["metadata"]["resourceVersion"] == rv_of(a)
    b = asb.create_sandbox("b")
    ev = w.next_event()
    assert ev["type"] == "ADDED" and ev["object"] == b
    w.close()


def test_watch_single_object_path(asb):
    """The older GET .../<name>?watch=true form watches one object."""
    a = asb.create_sandbox("a")
    asb.create_sandbox("b")
    w = Watch(asb, asb.path(CORE, "sandboxes", name="a"))
    ev = w.next_event()
    assert ev["type"] == "ADDED" and ev["object"] == a
    asb.merge_patch(asb.path(CORE, "sandboxes", name="b"), {"metadata": {"labels": {"x": "1"}}})
    asb.merge_patch(asb.path(CORE, "sandboxes", name="a"), {"metadata": {"labels": {"x": "2"}}})
    ev = w.next_event()
    assert ev["type"] == "MODIFIED" and ev["object"]["metadata"]["name"] == "a"
    w.close()
