"""Shared fixture of the test_router_* tests: one `asb serve` with real runc sandboxes and its
embedded router, for a whole test module (sandboxes are slow to make; the tests use distinct
names or files). Imported explicitly."""
import os
import tempfile
import time

import pytest
import requests

from asb_apiserver import AsbServer, stop_servers
from local_sandbox import RUNC, cleanup_state, create, injected_sandboxd, runtime_available, wait_ready


class RouterEnv:
    def __init__(self, asb, state_dir):
        self.asb = asb
        self.state_dir = state_dir
        deadline = time.monotonic() + 10
        path = os.path.join(state_dir, "router")
        while not os.path.exists(path):
            assert time.monotonic() < deadline, "asb serve wrote no router file"
            time.sleep(0.02)
        self.url = open(path).read().strip()
        self.token = asb.token
        self.auth = {"Authorization": f"Bearer {self.token}"}
        self.session = requests.Session()

    def hostport(self):
        return self.url.split("//", 1)[1]

    def headers(self, sandbox, port=None, ns=None, auth=True, **extra):
        h = dict(self.auth) if auth else {}
        h["X-Sandbox-ID"] = sandbox
        if port is not None:
            h["X-Sandbox-Port"] = str(port)
        if ns is not None:
            h["X-Sandbox-Namespace"] = ns
        h.update(extra)
        return h

    def sandbox(self, name, **spec):
        create(self.asb, name, **spec)
        return wait_ready(self.asb, name, timeout=30)

    def uid(self, name):
        r = self.asb.get(self.asb.path("agents.x-k8s.io", "sandboxes", "default", name))
        return r.json()["metadata"]["uid"]

    def sockets(self, name):
        d = os.path.join(self.state_dir, "run", self.uid(name))
        return os.path.join(d, "rest.sock"), os.path.join(d, "grpc.sock")


def router_env_fixture(extra_args=None):
    @pytest.fixture(scope="module")
    def router_env(tmp_path_factory):
        why = runtime_available()
        if why:
            pytest.skip(why)
        state = tempfile.mkdtemp(prefix="asbr-", dir="/tmp")
        logdir = tmp_path_factory.mktemp("router")
        env = {"ASB_RUNTIME": RUNC, "ASB_SANDBOXD": injected_sandboxd()}

        s = AsbServer(state, logdir / "asb-serve.log", env)
        if extra_args:
            base = s.command()
            # `asb serve --listen ...` is appended by AsbServer; the router flags follow it.
            s.command = lambda: ["sh", "-c", 'exec "$0" "$@" ' + " ".join(extra_args), *base]
        s.start()
        try:
            yield RouterEnv(s, state)
        finally:
            stop_servers([s])
            cleanup_state(state)
    return router_env
