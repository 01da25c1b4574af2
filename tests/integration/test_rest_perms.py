"""EACCES -> 403 "permission denied" for GET, PUT and DELETE, with sandboxd running as an
unprivileged user (skipped when the tests are not run as root)."""
import os
import shutil
import subprocess
import tempfile

import pytest
import requests

from resthelpers import error_of

NOBODY = 65534


@pytest.fixture
def unprivileged(tmp_path):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to drop privileges")
    from conftest import Sandboxd
    base = tempfile.mkdtemp(prefix="rest-perms-")
    os.chmod(base, 0o755)
    root = os.path.join(base, "root")
    os.mkdir(root)
    os.chown(root, NOBODY, NOBODY)
    orig = subprocess.Popen

    def popen(args, *a, **kw):
        return orig(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *args], *a, **kw)

    subprocess.Popen = popen
    try:
        d = Sandboxd(root, tmp_path)
    finally:
        subprocess.Popen = orig
    yield d
    code = d.stop()
    shutil.rmtree(base, ignore_errors=True)
    assert code == 0


def test_permission_denied(unprivileged):
    d = unprivileged
    root = d.root
    secret = os.path.join(root, "secret.txt")
    open(secret, "w").write("s")
    os.chmod(secret, 0o600)  # owned by root
    ro = os.path.join(root, "ro")
    os.mkdir(ro, 0o755)  # owned by root: nobody cannot create or delete inside
    open(os.path.join(ro, "f"), "w").write("f")

    r = requests.get(d.url("/v1/files/secret.txt"))
    assert r.status_code == 403 and error_of(r.content) == ("PERMISSION_DENIED", "permission denied")
    r = requests.put(d.url("/v1/files/ro/new.txt"), data=b"x")
    assert r.status_code == 403 and error_of(r.content) == ("PERMISSION_DENIED", "permission denied")
    r = requests.put(d.url("/v1/files/ro/sub/new.txt"), data=b"x")
    assert r.status_code == 403
    r = requests.delete(d.url("/v1/files/ro/f"))
    assert r.status_code == 403 and error_of(r.content)[0] == "PERMISSION_DENIED"
    assert sorted(os.listdir(ro)) == ["f"]
    # the daemon's own files work
    assert requests.put(d.url("/v1/files/mine.txt"), data=b"m").status_code == 204
    assert os.stat(os.path.join(root, "mine.txt")).st_uid == NOBODY
