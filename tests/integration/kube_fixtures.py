"""Helpers for the Kubernetes tests: the strict test API server (tests/kube/fake_apiserver.py) on
a loopback port with a kubeconfig pointing at it, a small REST client for it, and asb-controller
processes. Imported by test_kube_*.py (no conftest magic)."""
import json
import os
import signal
import subprocess
import sys

import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry
import waiting

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
FAKE = os.path.join(ROOT, "tests", "kube", "fake_apiserver.py")
SANITIZER_EXIT_CODES = {86: "AddressSanitizer/LeakSanitizer report", 87: "UBSan report"}

CORE = "agents.x-k8s.io"
EXT = "extensions.agents.x-k8s.io"
PATHS = {
    "pods": "/api/v1", "services": "/api/v1", "persistentvolumeclaims": "/api/v1",
    "events": "/api/v1",
    "networkpolicies": "/apis/networking.k8s.io/v1", "leases": "/apis/coordination.k8s.io/v1",
    "sandboxes": f"/apis/{CORE}/v1beta1", "sandboxtemplates": f"/apis/{EXT}/v1beta1",
    "sandboxwarmpools": f"/apis/{EXT}/v1beta1", "sandboxclaims": f"/apis/{EXT}/v1beta1",
    "sandboxsnapshots": f"/apis/{EXT}/v1beta1",
    "volumesnapshots": "/apis/snapshot.storage.k8s.io/v1",
    "customresourcedefinitions": "/apis/apiextensions.k8s.io/v1",
}


def wait_for(fn, timeout=30.0, interval=0.05, what="condition"):
    return waiting.wait_for(fn, timeout, what, interval)


class FakeApi:
    """The test API server process plus a REST client for it."""

    def __init__(self, tmp, token="test-token", tls=None, rbac=None):
        self.tmp = str(tmp)
        self.token = token
        port_file = os.path.join(self.tmp, "fake.port")
        cmd = [sys.executable if sys.executable.startswith("/usr/bin") else "/usr/bin/python3",
               FAKE, "--port", "0", "--port-file", port_file, "--token", token]
        if tls:
            cmd += ["--tls-cert", tls[0], "--tls-key", tls[1]]
        if rbac is not None:
            rbac_file = os.path.join(self.tmp, "rbac.json")
            with open(rbac_file, "w") as f:
                json.dump(rbac, f)
            cmd += ["--rbac", rbac_file, "--admin-token", "admin-" + token]
        self.log = open(os.path.join(self.tmp, "fake.log"), "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log)
        wait_for(lambda: os.path.exists(port_file), 10, what="fake apiserver port")
        self.port = int(open(port_file).read())
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.s = requests.Session()
        # A keep-alive connection closed under load by the server is retried for idempotent
        # methods, as client-go does; POSTs are never retried.
        retry = Retry(total=3, connect=3, read=2, status=0, backoff_factor=0.05)
        self.s.mount("http://", HTTPAdapter(max_retries=retry))
        self.s.mount("https://", HTTPAdapter(max_retries=retry))
        self.s.headers["Authorization"] = f"Bearer {'admin-' + token if rbac is not None else token}"
        if tls:
            self.s.verify = tls[2]
            self.s.trust_env = False  # REQUESTS_CA_BUNDLE would override verify
        self.kubeconfig = os.path.join(self.tmp, "kubeconfig")
        cluster = {"server": self.url}
        if tls:
            cluster["certificate-authority"] = tls[2]
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
               "clusters": [{"name": "fake", "cluster": cluster}],
               "users": [{"name": "u", "user": {"token": token}}],
               "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u",
                                                         "namespace": "default"}}]}
        with open(self.kubeconfig, "w") as f:
            json.dump(cfg, f)  # JSON is YAML

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def path(self, plural, ns="default", name=None, sub=None):
        p = PATHS[plural]
        if ns is not None:
            p += f"/namespaces/{ns}"
        p += f"/{plural}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return self.url + p

    def get(self, plural, name, ns="default"):
        r = self.s.get(self.path(plural, ns, name))
        if r.status_code == 404:
            return None
        r.raise_for_status()
        return r.json()

    def list(self, plural, ns="default", selector=None):
        r = self.s.get(self.path(plural, ns), params={"labelSelector": selector} if selector else None)
        r.raise_for_status()
        return r.json()["items"]

    def create(self, plural, obj, ns="default"):
        r = self.s.post(self.path(plural, ns), json=obj)
        assert r.status_code == 201, r.text
        return r.json()

    def patch(self, plural, name, patch, ns="default", sub=None):
        r = self.s.patch(self.path(plural, ns, name, sub), data=json.dumps(patch),
                         headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        return r.json()

    def delete(self, plural, name, ns="default", policy=None):
        params = {"propagationPolicy": policy} if policy else None
        return self.s.delete(self.path(plural, ns, name), params=params)

    def hook(self, name, **params):
        r = self.s.post(f"{self.url}/fake/{name}", params=params)
        r.raise_for_status()
        return r.json()

    def stats(self):
        return self.s.get(f"{self.url}/fake/stats").json()

    def set_pod_ready(self, name, ready=True, ip="10.1.2.3", ns="default", phase="Running", node="node-1"):
        pod = self.get("pods", name, ns)
        assert pod, f"pod {name} missing"
        if node:
            self.patch("pods", name, {"spec": {"nodeName": node}}, ns)
        st = {"phase": phase,
              "conditions": [{"type": "PodScheduled", "status": "True"},
                             {"type": "Ready", "status": "True" if ready else "False"}]}
        if ip:
            st["podIP"] = ip
            st["podIPs"] = [{"ip": ip}]
        return self.patch("pods", name, {"status": st}, ns, sub="status")


def sandbox_obj(name, image="busybox", **spec):
    body = {"apiVersion": f"{CORE}/v1beta1", "kind": "Sandbox", "metadata": {"name": name},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": image}]}}}}
    body["spec"].update(spec)
    return body


def template_obj(name, **spec):
    body = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": name},
            "spec": {"podTemplate": {"metadata": {"labels": {"app": "agent"}},
                                     "spec": {"containers": [{"name": "main", "image": "busybox",
                                                              "ports": [{"containerPort": 8888}]}]}}}}
    body["spec"].update(spec)
    return body


def pool_obj(name, template, replicas=2, **spec):
    return {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool", "metadata": {"name": name},
            "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": template}, **spec}}


def claim_obj(name, pool, **spec):
    return {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim", "metadata": {"name": name},
            "spec": {"warmPoolRef": {"name": pool}, **spec}}


def condition(obj, typ):
    for c in (obj or {}).get("status", {}).get("conditions", []) or []:
        if c.get("type") == typ:
            return c
    return None


class Controller:
    def __init__(self, fake, tmp, name="ctl", args=(), kubeconfig=True, env=None):
        self.fake = fake
        binary = os.path.join(BUILD, "bin", "asb-controller")
        if not os.path.exists(binary):
            pytest.fail(f"{binary} missing: run make first")
        self.log_path = os.path.join(str(tmp), f"{name}.log")
        self.log = open(self.log_path, "ab")
        self.cmd = [binary, *(["--kubeconfig", fake.kubeconfig] if kubeconfig else []),
                    "--metrics-bind-address", "127.0.0.1:0",
                    "--health-probe-bind-address", "127.0.0.1:0", "--extensions",
                    "--leader-elect=false", "--sandbox-warm-pool-readiness-grace-period", "1h",
                    "--zap-log-level", "debug", *args]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=self.log,
                                     env={**os.environ, **(env or {})})

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def addr(self, which):
        """The bound address the controller logged for 'metrics' or 'health'."""
        def find():
            for line in self.log_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == f"{which} listening":
                    return rec["address"]
            return None
        return wait_for(find, 10, what=f"{which} address")

    def kill(self):
        self.killed = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, check=True):
        rc = self.proc.poll()
        if rc is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
                if check:
                    raise AssertionError("asb-controller did not stop on SIGTERM:\n" + self.log_text()[-3000:])
        self.log.close()
        if getattr(self, "killed", False):
            return
        if check and rc in SANITIZER_EXIT_CODES:
            raise AssertionError(f"{SANITIZER_EXIT_CODES[rc]}:\n" + self.log_text()[-6000:])
        if check:
            assert rc == 0, f"asb-controller exited {rc}:\n" + self.log_text()[-3000:]


@pytest.fixture
def fake(tmp_path):
    f = FakeApi(tmp_path)
    yield f
    f.stop()


@pytest.fixture
def controller(fake, tmp_path):
    started = []

    def start(name="ctl", args=()):
        c = Controller(fake, tmp_path, name, args)
        started.append(c)
        return c
    yield start
    for c in started:
        c.stop()
