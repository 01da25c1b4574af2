"""`asb mcp` against a cluster: asb-controller --extensions on the strict test API server of the
Kubernetes tests (tests/kube/fake_apiserver.py), the data plane through a real sandbox-router,
driven by the official MCP TypeScript SDK client as test_mcp_sdk.py drives it against `asb serve`
(issue 17: the tools work the same on both backends, built on libasb).

The test API server runs no kubelet: a helper thread marks each Pod Ready, as a node would, and
the router's template resolver sends every sandbox to one real sandboxd on unix sockets."""
import os
import socket
import subprocess
import threading

import pytest

from asb_apiserver import asb_binary
from kube_fixtures import (BUILD, controller, fake, pool_obj, template_obj,  # noqa: F401
                           wait_for)
from mcp_helpers import POOL, drive
from test_mcp_sdk import check_every_tool


class PodsBecomeReady(threading.Thread):
    """Marks every Pod of the test API server Ready (a kubelet's part) until stopped."""

    def __init__(self, fake):  # noqa: F811
        super().__init__(daemon=True)
        self.fake, self.done, self.errors = fake, threading.Event(), []

    def run(self):
        n = 0
        while not self.done.wait(0.1):
            try:
                for pod in self.fake.list("pods"):
                    ready = [c for c in pod.get("status", {}).get("conditions", []) or []
                             if c["type"] == "Ready" and c["status"] == "True"]
                    if not ready and not pod["metadata"].get("deletionTimestamp"):
                        n += 1
                        self.fake.set_pod_ready(pod["metadata"]["name"], ip=f"10.7.{n // 250}.{n % 250 + 1}")
            except Exception as e:  # a pod deleted meanwhile: try again on the next round
                self.errors.append(repr(e))

    def stop(self):
        self.done.set()
        self.join(10)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv, tmp_path, name, **kw):
    log = open(tmp_path / f"{name}.log", "wb")
    return subprocess.Popen(argv, stderr=log, **kw), log


def stop(proc, log):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log.close()
    return proc.returncode


@pytest.fixture
def cluster(fake, controller, tmp_path):  # noqa: F811
    """(env for drive(): the API server, its token and the router) of a cluster with a warm pool
    of one Ready sandbox."""
    for b in ("sandboxd", "sandbox-router"):
        if not os.path.exists(os.path.join(BUILD, "bin", b)):
            pytest.fail(f"{b} missing: run make first")
    ctl = controller()
    root = tmp_path / "root"
    root.mkdir()
    sandboxd, dlog = start([os.path.join(BUILD, "bin", "sandboxd"), "--root-dir", str(root),
                            "--rest-socket", str(tmp_path / "rest.sock"),
                            "--grpc-socket", str(tmp_path / "grpc.sock"),
                            "--listen-host", "127.0.0.1", "--rest-port", str(free_port()),
                            "--grpc-port", str(free_port())],
                           tmp_path, "sandboxd", stdout=subprocess.DEVNULL)
    router, rlog = start([os.path.join(BUILD, "bin", "sandbox-router"), "--listen", "127.0.0.1:0",
                         "--token", fake.token, "--target-template",
                         f"unix:{tmp_path}/{{socket}}.sock"],
                        tmp_path, "router", stdout=subprocess.PIPE, text=True)
    kubelet = PodsBecomeReady(fake)
    kubelet.start()
    try:
        port = int(router.stdout.readline())
        wait_for(lambda: (tmp_path / "grpc.sock").exists(), 10, what="sandboxd's sockets")
        fake.create("sandboxtemplates", template_obj(f"{POOL}-tpl"))
        fake.create("sandboxwarmpools", pool_obj(POOL, f"{POOL}-tpl", replicas=1))
        wait_for(lambda: (fake.get("sandboxwarmpools", POOL) or {}).get("status", {})
                 .get("readyReplicas") == 1, 60, what="a Ready warm pool member")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ASB_")}
        env.update(ASB_SERVER=fake.url, ASB_TOKEN=fake.token, ASB_ROUTER=f"http://127.0.0.1:{port}",
                   ASB_STATE_DIR=str(tmp_path / "no-local-state"), MCP_POOL=POOL)
        yield env
    finally:
        kubelet.stop()
        assert stop(router, rlog) == 0, (tmp_path / "router.log").read_text()
        assert stop(sandboxd, dlog) == 0, (tmp_path / "sandboxd.log").read_text()
        ctl.stop()


def test_every_tool_against_asb_controller(cluster, tmp_path):
    """Every tool and resource over stdio through the router, the claim adopted by
    asb-controller. After the delete the router's template resolver still reaches sandboxd (it
    does not know which sandboxes exist), so that last check is left to test_mcp_sdk.py."""
    rep = drive("tools", "stdio", asb_binary(), {**cluster, "MCP_ARGS": "--via-router"})
    check_every_tool(rep, after_delete=False)


def test_every_tool_over_http_against_asb_controller(cluster, tmp_path):
    from mcp_helpers import McpHttp

    class Cluster:  # what McpHttp reads from an `asb serve`
        state_dir = cluster["ASB_STATE_DIR"]
    mcp = McpHttp(tmp_path, Cluster(), args=["--via-router", "--auth-token", "mcp-tok"])
    mcp.env = {**cluster}
    mcp.start()
    try:
        rep = drive("tools", "http", mcp.url, {**cluster, "MCP_TOKEN": "mcp-tok"})
        check_every_tool(rep, after_delete=False)
    finally:
        assert mcp.stop() == 0
