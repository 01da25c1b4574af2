"""Helpers for the test_claims_* tests: SandboxTemplate / SandboxWarmPool / SandboxClaim bodies,
lookups and waits against an `asb serve` (fixtures from local_sandbox.py / asb_apiserver.py).
Imported explicitly, no conftest magic."""
import json
import socket
import threading
import time

import requests

from asb_apiserver import CORE, EXT, V
import waiting

POOL_LABEL = "agents.x-k8s.io/warm-pool-sandbox"


def name_hash(s):
    h = 0x811C9DC5
    for b in s.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def template(name, image="host", env=None, **spec):
    c = {"name": "main", "image": image}
    if env:
        c["env"] = env
    body = {"apiVersion": f"{EXT}/{V}", "kind": "SandboxTemplate", "metadata": {"name": name},
            "spec": {"podTemplate": {"spec": {"containers": [c]}}}}
    body["spec"].update(spec)
    return body


def pool(name, template_name, replicas=1, strategy=None):
    body = {"apiVersion": f"{EXT}/{V}", "kind": "SandboxWarmPool", "metadata": {"name": name},
            "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": template_name}}}
    if strategy:
        body["spec"]["updateStrategy"] = {"type": strategy}
    return body


def claim(name, pool_name, **spec):
    body = {"apiVersion": f"{EXT}/{V}", "kind": "SandboxClaim", "metadata": {"name": name},
            "spec": {"warmPoolRef": {"name": pool_name}}}
    body["spec"].update(spec)
    return body


def create(asb, group, plural, body, ns="default"):
    r = asb.post(asb.path(group, plural, ns), body)
    assert r.status_code == 201, r.text
    return r.json()


def get(asb, group, plural, name, ns="default"):
    r = asb.get(asb.path(group, plural, ns, name))
    return r.json() if r.status_code == 200 else None


def items(asb, group, plural, ns="default", selector=None):
    params = {"labelSelector": selector} if selector else None
    r = asb.get(asb.path(group, plural, ns), params=params)
    assert r.status_code == 200, r.text
    return r.json()["items"]


def condition(obj, ctype="Ready"):
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return c
    return None


def is_ready(obj):
    c = condition(obj)
    return bool(c and c["status"] == "True")


def members(asb, pool_name):
    return items(asb, CORE, "sandboxes", selector=f"{POOL_LABEL}={name_hash(pool_name)}")


def wait_for(what, fn, timeout=30, interval=0.02, asb=None):
    """waiting.wait_for(), with asb's output in the failure."""
    try:
        return waiting.wait_for(fn, timeout, what, interval)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{asb.output() if asb else ''}") from None


def wait_pool_ready(asb, pool_name, n, timeout=60):
    """Until the pool has exactly n members, all Ready, and its status says so."""
    def check():
        ms = members(asb, pool_name)
        p = get(asb, EXT, "sandboxwarmpools", pool_name)
        st = (p or {}).get("status") or {}
        if len(ms) == n and all(is_ready(m) for m in ms) and st.get("readyReplicas") == n \
                and st.get("replicas") == n:
            return ms
        return None
    return wait_for(f"pool {pool_name} with {n} Ready members", check, timeout, 0.05, asb)


def wait_claim(asb, name, timeout=30, reason=None):
    """Until the claim is Ready (or has Ready reason `reason`)."""
    def check():
        c = get(asb, EXT, "sandboxclaims", name)
        cond = condition(c)
        if not cond:
            return None
        if reason is None and cond["status"] == "True":
            return c
        if reason is not None and cond["reason"] == reason:
            return c
        return None
    return wait_for(f"claim {name} " + (reason or "Ready"), check, timeout, 0.02, asb)


class Watcher:
    """A background watch of one collection: every event as (monotonic time, type, object)."""

    def __init__(self, asb, group, plural, ns="default"):
        self.events = []
        self.error = None
        self.asb = asb
        r = asb.get(asb.path(group, plural, ns))
        rv = r.json()["metadata"]["resourceVersion"]
        self.session = requests.Session()
        self.session.headers.update(asb.session.headers)
        self.resp = self.session.get(asb.url + asb.path(group, plural, ns),
                                     params={"watch": "true", "resourceVersion": rv}, stream=True,
                                     timeout=60)
        assert self.resp.status_code == 200, self.resp.text
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for line in self.resp.iter_lines(chunk_size=None):
                if line:
                    e = json.loads(line)
                    self.events.append((time.monotonic(), e["type"], e["object"]))
                    self.last_rv = int(e["object"]["metadata"]["resourceVersion"])
        except Exception as e:  # closed by close()
            self.error = e

    def close(self):
        try:  # unblock the reader thread at once
            self.resp.raw.connection.sock.shutdown(socket.SHUT_RDWR)
        except Exception:
            pass
        self.resp.close()
        self.thread.join(5)
        self.session.close()
