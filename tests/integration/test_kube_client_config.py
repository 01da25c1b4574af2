"""asb-controller's API client configuration: TLS with a CA from the kubeconfig (inline data),
in-cluster configuration (service-account token, ca.crt, KUBERNETES_SERVICE_HOST/PORT), TLS
verification on (a wrong CA fails), exec credentials refused, unknown context."""
import base64
import json
import os
import subprocess

import pytest

from kube_fixtures import BUILD, Controller, FakeApi, sandbox_obj, wait_for


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path):
    d = tmp_path / "pki"
    d.mkdir()
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
                "-days", "1", "-subj", f"/CN={ca}", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "1", "-extfile", "ext", cwd=d)
    return d


@pytest.fixture
def tls_fake(tmp_path, pki):
    f = FakeApi(tmp_path, tls=(str(pki / "server.crt"), str(pki / "server.key"), str(pki / "ca.crt")))
    yield f
    f.stop()


def write_kubeconfig(path, server, token, ca_pem=None, user=None, context="fake"):
    cluster = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": context,
           "clusters": [{"name": "c", "cluster": cluster}],
           "users": [{"name": "u", "user": user or {"token": token}}],
           "contexts": [{"name": "fake", "context": {"cluster": "c", "user": "u"}}]}
    # YAML this time (the fixture writes JSON).
    lines = json.dumps(cfg, indent=1)
    path.write_text(lines)
    return str(path)


def test_tls_with_inline_ca(tls_fake, pki, tmp_path):
    kc = write_kubeconfig(tmp_path / "kc", tls_fake.url, tls_fake.token, (pki / "ca.crt").read_bytes())
    c = Controller(tls_fake, tmp_path, "tls", ["--kubeconfig", kc])
    try:
        tls_fake.create("sandboxes", sandbox_obj("t1"))
        wait_for(lambda: tls_fake.get("pods", "t1"), what="pod over TLS")
    finally:
        c.stop()


def test_wrong_ca_is_refused(tls_fake, pki, tmp_path):
    kc = write_kubeconfig(tmp_path / "kc", tls_fake.url, tls_fake.token, (pki / "other-ca.crt").read_bytes())
    c = Controller(tls_fake, tmp_path, "badca", ["--kubeconfig", kc])
    try:
        wait_for(lambda: "list failed" in c.log_text(), what="TLS failure logged")
        tls_fake.create("sandboxes", sandbox_obj("t2"))
        import time
        time.sleep(1)  # the point: no pod is made in the meantime
        assert tls_fake.get("pods", "t2") is None
        assert tls_fake.stats()["stats"].get("GET sandboxes", 0) == 0
    finally:
        c.stop()


def test_in_cluster_config(tls_fake, pki, tmp_path):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(tls_fake.token + "\n")
    (sa / "ca.crt").write_bytes((pki / "ca.crt").read_bytes())
    (sa / "namespace").write_text("default")
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(tls_fake.port),
           "ASB_SERVICEACCOUNT_DIR": str(sa), "KUBECONFIG": ""}
    c = Controller(tls_fake, tmp_path, "incluster", [], kubeconfig=False, env=env)
    try:
        tls_fake.create("sandboxes", sandbox_obj("t3"))
        wait_for(lambda: tls_fake.get("pods", "t3"), what="pod with in-cluster config")
        # Token rotation: the file is re-read; a wrong token now gets 401s.
        (sa / "token").write_text("rotated-wrong\n")
        tls_fake.create("sandboxes", sandbox_obj("t4"))
        import time
        time.sleep(1)  # the point: no pod is made with the wrong token in the meantime
        assert tls_fake.get("pods", "t4") is None
        (sa / "token").write_text(tls_fake.token)
        wait_for(lambda: tls_fake.get("pods", "t4"), timeout=15, what="pod after the token is right again")
    finally:
        c.stop()


def test_exec_credentials_and_unknown_context_refused(tmp_path):
    binary = os.path.join(BUILD, "bin", "asb-controller")
    kc = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", None,
                          user={"exec": {"command": "gcloud", "apiVersion": "client.authentication.k8s.io/v1"}})
    r = subprocess.run([binary, "--kubeconfig", kc, "--leader-elect=false"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "exec credentials" in r.stderr
    r = subprocess.run([binary, "--kubeconfig", kc, "--context", "nope"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and 'context \\"nope\\" not found' in r.stderr
    r = subprocess.run([binary, "--no-such-flag"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "unknown flag" in r.stderr
