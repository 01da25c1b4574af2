"""A newcomer's first commands: `asb serve &` pasted with the next command right behind it, a second
server on the same state directory, a server's URL files after it stops, and `asb wait
--for=jsonpath`. The API server runs without a runtime here (ASB_RUNTIME=none): this is about
starting, not sandboxes."""
import os
import signal
import subprocess
import time

from asb_apiserver import asb_binary
from asb_cli import SANITIZER_EXIT_CODES


def env_for(state):
    env = {k: v for k, v in os.environ.items() if k not in ("ASB_SERVER", "ASB_TOKEN")}
    env.update(ASB_STATE_DIR=str(state), ASB_RUNTIME="none", ASB_NETWORK="none")
    return env


def start_serve(state, log):
    return subprocess.Popen([asb_binary(), "serve", "--listen", "127.0.0.1:0",
                             "--router-listen", "127.0.0.1:0"],
                            stdout=log, stderr=subprocess.STDOUT, env=env_for(state),
                            start_new_session=True)


def wait_server_file(state, srv, timeout=30):
    deadline = time.monotonic() + timeout
    while not (state / "server").exists():
        assert time.monotonic() < deadline and srv.poll() is None
        time.sleep(0.02)


def stop(p):
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 0
    return p.returncode


def asb(state, *args, timeout=60):
    p = subprocess.run([asb_binary(), *args], capture_output=True, text=True, env=env_for(state),
                       timeout=timeout)
    assert p.returncode not in SANITIZER_EXIT_CODES, p.stderr
    return p


SANDBOX = """apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata: {name: first}
spec:
  podTemplate:
    spec:
      containers: [{name: c, image: host}]
"""


def test_client_right_behind_a_starting_server_waits_for_it(tmp_path):
    """`asb serve &` then `asb apply` at once: the client waits for the server to be ready instead
    of failing with "no server configured"."""
    state = tmp_path / "s"
    manifest = tmp_path / "sb.yaml"
    manifest.write_text(SANDBOX)
    with open(tmp_path / "serve.log", "wb") as log:
        srv = start_serve(state, log)
        try:
            p = asb(state, "apply", "-f", str(manifest))
            assert p.returncode == 0, p.stderr
            assert "sandbox.agents.x-k8s.io/first created" in p.stdout
            assert asb(state, "get", "sandbox", "first").returncode == 0
        finally:
            stop(srv)


def test_second_server_on_one_state_dir_is_refused(tmp_path):
    state = tmp_path / "s"
    with open(tmp_path / "serve.log", "wb") as log:
        srv = start_serve(state, log)
        try:
            wait_server_file(state, srv)
            url = (state / "server").read_text()
            p = subprocess.run([asb_binary(), "serve", "--listen", "127.0.0.1:0",
                                "--router-listen", "127.0.0.1:0"], capture_output=True, text=True,
                               env=env_for(state), timeout=30)
            assert p.returncode == 1, (p.returncode, p.stderr)
            assert f"another asb serve (pid {srv.pid}) is running with state dir {state}" in p.stderr
            # The refused one touched nothing: the first one's URL file and service are intact.
            assert (state / "server").read_text() == url
            assert asb(state, "get", "sandboxes").returncode == 0
        finally:
            stop(srv)


def test_stopped_server_leaves_no_url_to_dial(tmp_path):
    """After a clean stop the URL files are gone, so a client says at once (after a short grace for
    a server that may be starting) that no server runs, rather than dialling a dead port."""
    state = tmp_path / "s"
    with open(tmp_path / "serve.log", "wb") as log:
        srv = start_serve(state, log)
        wait_server_file(state, srv)
        assert (state / "router").exists()
        stop(srv)
    assert not (state / "server").exists() and not (state / "router").exists()
    p = asb(state, "get", "sandboxes")
    assert p.returncode == 1 and "no server configured" in p.stderr, p.stderr
    assert "waiting for asb serve" not in p.stderr


def test_wait_for_jsonpath(tmp_path):
    state = tmp_path / "s"
    manifest = tmp_path / "sb.yaml"
    manifest.write_text(SANDBOX)
    with open(tmp_path / "serve.log", "wb") as log:
        srv = start_serve(state, log)
        try:
            assert asb(state, "apply", "-f", str(manifest)).returncode == 0
            p = asb(state, "wait", "--for=jsonpath={.metadata.name}=first", "sandbox/first")
            assert p.returncode == 0, p.stderr
            p = asb(state, "wait", "--for=jsonpath=metadata.name=first", "sandbox/first")
            assert p.returncode == 0 and "sandbox.agents.x-k8s.io/first condition met" in p.stdout
            p = asb(state, "wait", "--for=jsonpath={.spec.podTemplate.spec.containers[0].image}",
                    "sandbox/first")
            assert p.returncode == 0, p.stderr
            p = asb(state, "wait", "--for=jsonpath={.metadata.name}=other", "sandbox/first",
                    "--timeout", "1s")
            assert p.returncode == 1 and "timed out waiting for the condition" in p.stderr
            p = asb(state, "wait", "--for=jsonpath={.status.nothing}", "sandbox/first",
                    "--timeout", "1s")
            assert p.returncode == 1 and "timed out" in p.stderr
            # Later changes are seen through the watch.
            w = subprocess.Popen([asb_binary(), "wait", "--for=jsonpath={.metadata.labels.x}=y",
                                  "sandbox/first", "--timeout", "30s"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env_for(state))
            time.sleep(0.3)
            assert w.poll() is None  # still waiting: the label is not there yet
            patch = subprocess.run([asb_binary(), "apply", "-f", "-"], input=SANDBOX.replace(
                "metadata: {name: first}", "metadata: {name: first, labels: {x: y}}"),
                capture_output=True, text=True, env=env_for(state), timeout=30)
            assert patch.returncode == 0, patch.stderr
            out, err = w.communicate(timeout=30)
            assert w.returncode == 0, err
            for bad in ("--for=jsonpath={.status", "--for=jsonpath=", "--for=jsonpath={.a}="):
                p = asb(state, "wait", bad, "sandbox/first")
                assert p.returncode == 2 and "unrecognized JSONPath" in p.stderr, (bad, p.stderr)
        finally:
            stop(srv)


def hold_port(port):
    """A listening socket on 127.0.0.1:port, or None when someone else has it: either way the port
    is taken while the test runs."""
    import socket
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen(1)
        return s
    except OSError:
        s.close()
        return None


def test_default_ports_taken_pick_free_ones(tmp_path):
    """`asb serve` without --listen/--router-listen where 127.0.0.1:7443 and :7080 are taken
    (another asb serve with another state directory): free ports, written to the state
    directory, and said. A port given explicitly that is taken stays an error."""
    held = [hold_port(7443), hold_port(7080)]
    try:
        state = tmp_path / "s"
        with open(tmp_path / "serve.log", "wb") as log:
            srv = subprocess.Popen([asb_binary(), "serve"], stdout=log, stderr=subprocess.STDOUT,
                                   env=env_for(state), start_new_session=True)
            try:
                wait_server_file(state, srv)
                url = (state / "server").read_text().strip()
                router = (state / "router").read_text().strip()
                api_port, router_port = url.rsplit(":", 1)[1], router.rsplit(":", 1)[1]
                assert api_port not in ("7443", "0") and router_port not in ("7080", "0")
                assert asb(state, "get", "sandboxes").returncode == 0
            finally:
                stop(srv)
        text = (tmp_path / "serve.log").read_text()
        assert (f"API default port in use, listening on a free port default=127.0.0.1:7443 "
                f"port={api_port}") in text, text
        assert (f"router default port in use, listening on a free port default=127.0.0.1:7080 "
                f"port={router_port}") in text, text
        assert "Address already in use" not in text
        p = subprocess.run([asb_binary(), "serve", "--listen", "127.0.0.1:7443"],
                           capture_output=True, text=True, env=env_for(tmp_path / "s2"), timeout=30)
        assert p.returncode == 1 and "Address already in use" in p.stderr, p.stderr
        assert not (tmp_path / "s2" / "server").exists()
    finally:
        for s in held:
            if s:
                s.close()
