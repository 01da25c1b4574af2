"""The release sandboxd under valgrind memcheck: a REST and gRPC session, then SIGTERM, with no
invalid access and no definite or indirect leak (valgrind's --error-exitcode makes either fatal)."""
import os
import shutil

import pytest
import requests

from conftest import ROOT
from grpc_helpers import Client

RELEASE = os.path.join(ROOT, "build", "bin", "sandboxd")
VALGRIND = ["valgrind", "--quiet", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect", "--error-exitcode=99", "--track-fds=no"]


@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind not installed")
def test_rest_and_grpc_session_is_clean_under_valgrind(start_sandboxd):
    assert os.path.exists(RELEASE), "release build missing: make builds build/bin/sandboxd"
    d = start_sandboxd(prefix=VALGRIND, exe=RELEASE)
    url = d.url
    assert requests.put(url("/v1/files/a%2Fb.txt?mode=0600"), data=b"payload").status_code == 204
    assert requests.get(url("/v1/files/a/b.txt")).content == b"payload"
    assert requests.get(url("/v1/files/a/b.txt"), headers={"Range": "bytes=1-3"}).content == b"ayl"
    assert requests.put(url("/v1/files/m.bin"), files={"file": ("x", b"multi")}).status_code == 204
    assert requests.get(url("/v1/files/")).json()["entries"][0]["name"] == "a"
    assert requests.get(url("/v1/files/..%2Fx")).status_code == 403
    assert requests.post(url("/v1/files/x")).status_code == 405
    assert requests.get(url("/v1/metadata")).status_code == 200
    assert requests.delete(url("/v1/files/a?recursive=true")).status_code == 204

    c = Client(d.grpc_addr)
    try:
        r = c.execute(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (r.exit_code, r.stdout, r.stderr) == (3, b"out\n", b"err\n")
        events = list(c.start(["cat", "m.bin"], timeout=30))
        assert events[0].WhichOneof("event") == "init"
        assert events[-1].exit.exit_code == 0
        assert b"".join(e.stdout for e in events) == b"multi"
    finally:
        c.close()
    assert d.stop() == 0, d.output()
