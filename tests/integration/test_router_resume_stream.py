"""The embedded router: transparent resume of a suspended sandbox, large bodies streamed both ways
with the router's memory flat, concurrency."""
import hashlib
import os
import threading
import time

import pytest
import requests

from asb_apiserver import CORE
from local_sandbox import condition, get_sandbox
from resthelpers import pid_rss_kib
from router_fixture import router_env_fixture

router_env = router_env_fixture()

# How much the router may grow while hundreds of MiB pass through it. ASan's allocator keeps freed
# blocks in quarantine (up to 256 MiB), so sanitized builds get more room.
RSS_SLACK_KIB = (128 if "asan" in os.environ.get("ASB_BUILD", "") else 48) * 1024


@pytest.fixture(scope="module")
def box(router_env):
    router_env.sandbox("sbox")
    return "sbox"


def wait_cond(asb, name, ctype, want="True", timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = condition(get_sandbox(asb, name), ctype)
        if c and c["status"] == want:
            return
        time.sleep(0.02)
    raise AssertionError(f"{name}: {ctype} != {want}")


def test_suspended_sandbox_is_resumed_by_a_request(router_env):
    asb = router_env.asb
    router_env.sandbox("sleepy")
    h = router_env.headers("sleepy")
    r = requests.put(router_env.url + "/v1/files/state.txt", data=b"kept", headers=h)
    assert r.status_code == 204
    r = asb.merge_patch(asb.path(CORE, "sandboxes", "default", "sleepy"),
                        {"spec": {"operatingMode": "Suspended"}})
    assert r.status_code == 200, r.text
    wait_cond(asb, "sleepy", "Suspended")
    time.sleep(1.2)  # past the router's 1 s resolution cache
    r = requests.get(router_env.url + "/v1/files/state.txt", headers=h, timeout=60)
    assert r.status_code == 200 and r.content == b"kept"
    obj = get_sandbox(asb, "sleepy")
    assert obj["spec"]["operatingMode"] == "Running"
    assert condition(obj, "Ready")["status"] == "True"


def pid_of_router(router_env):
    return router_env.asb.proc.pid


def test_large_put_get_streams_with_flat_memory(router_env, box):
    size = 512 * 1024 * 1024
    chunk = os.urandom(1024 * 1024)
    rss0 = pid_rss_kib(pid_of_router(router_env))
    peak = [rss0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], pid_rss_kib(pid_of_router(router_env)))
            time.sleep(0.05)
    t = threading.Thread(target=sample)
    t.start()
    try:
        def gen():
            for _ in range(size // len(chunk)):
                yield chunk
        r = requests.put(router_env.url + "/v1/files/big.bin", data=gen(), headers=router_env.headers(box))
        assert r.status_code == 204, r.text
        h = hashlib.sha256()
        n = 0
        with requests.get(router_env.url + "/v1/files/big.bin", headers=router_env.headers(box),
                          stream=True) as r:
            assert r.status_code == 200
            assert int(r.headers["Content-Length"]) == size
            for part in r.iter_content(1 << 20):
                h.update(part)
                n += len(part)
        assert n == size
        want = hashlib.sha256()
        for _ in range(size // len(chunk)):
            want.update(chunk)
        assert h.hexdigest() == want.hexdigest()
    finally:
        stop.set()
        t.join()
        requests.delete(router_env.url + "/v1/files/big.bin", headers=router_env.headers(box))
    # 512 MiB went through both ways; the router (inside asb serve) grew by far less.
    assert peak[0] - rss0 < RSS_SLACK_KIB, (rss0, peak[0])


def test_concurrent_clients(router_env, box):
    errors = []

    def worker(i):
        try:
            s = requests.Session()
            for j in range(10):
                body = f"{i}-{j}".encode() * 100
                r = s.put(router_env.url + f"/v1/files/c/{i}-{j}", data=body, headers=router_env.headers(box))
                assert r.status_code == 204, r.text
                r = s.get(router_env.url + f"/v1/files/c/{i}-{j}", headers=router_env.headers(box))
                assert r.content == body
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
    r = requests.get(router_env.url + "/v1/files/c/", headers=router_env.headers(box))
    assert len(r.json()["entries"]) == 500


def test_h2_large_transfers_keep_memory_flat(router_env, box, tmp_path):
    """REST over HTTP/2 both ways (curl, h2c) and a gRPC stream with a lot of output: flow-control
    windows bound what the router holds, whatever the sizes and however slow the reader."""
    import subprocess
    size = 256 * 1024 * 1024
    src = tmp_path / "up.bin"
    with open(src, "wb") as f:
        f.truncate(size)
    pid = pid_of_router(router_env)
    rss0 = pid_rss_kib(pid)
    peak = [rss0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], pid_rss_kib(pid))
            time.sleep(0.05)
    t = threading.Thread(target=sample)
    t.start()
    try:
        base = ["curl", "-sS", "--http2-prior-knowledge", "-H", f"Authorization: Bearer {router_env.token}",
                "-H", f"X-Sandbox-ID: {box}"]
        p = subprocess.run(base + ["-T", str(src), "-w", "%{http_code} %{http_version}",
                                   router_env.url + "/v1/files/h2big.bin"], capture_output=True, timeout=300)
        assert p.stdout == b"204 2", p.stderr
        # a slow reader: 64 MiB at 32 MB/s
        p = subprocess.run(base + ["--limit-rate", "32M", "-r", "0-67108863", "-o", "/dev/null", "-w",
                                   "%{http_code} %{size_download}", router_env.url + "/v1/files/h2big.bin"],
                           capture_output=True, timeout=300)
        assert p.stdout == b"206 67108864", p.stderr
        # gRPC: 128 MiB of stdout through a Start stream
        from grpc_helpers import Client
        c = Client(router_env.hostport())
        n = 0
        for ev in c.start(["head", "-c", str(128 << 20), "/dev/zero"],
                          metadata=[("x-sandbox-id", box), ("authorization", f"Bearer {router_env.token}")]):
            if ev.WhichOneof("event") == "stdout":
                n += len(ev.stdout)
        c.close()
        assert n == 128 << 20
    finally:
        stop.set()
        t.join()
        requests.delete(router_env.url + "/v1/files/h2big.bin", headers=router_env.headers(box))
    assert peak[0] - rss0 < RSS_SLACK_KIB, (rss0, peak[0])


def test_legacy_upload_streams(router_env, box):
    """A legacy /upload streams on to sandboxd once the "file" part's headers are in: a large
    chunked multipart body (another part first) keeps the router's memory flat."""
    size = 256 * 1024 * 1024
    chunk = b"L" * (1 << 20)
    boundary = "xXbOuNdArYXx"

    def body():
        yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n"
               f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"up/big.bin\"\r\n"
               "Content-Type: application/octet-stream\r\n\r\n").encode()
        for _ in range(size // len(chunk)):
            yield chunk
        yield f"\r\n--{boundary}--\r\n".encode()
    pid = pid_of_router(router_env)
    rss0 = pid_rss_kib(pid)
    peak = [rss0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], pid_rss_kib(pid))
            time.sleep(0.05)
    t = threading.Thread(target=sample)
    t.start()
    try:
        r = requests.post(router_env.url + "/upload", data=body(),
                          headers={**router_env.headers(box, port=8888),
                                   "Content-Type": f"multipart/form-data; boundary={boundary}"})
    finally:
        stop.set()
        t.join()
    assert r.status_code == 200, r.text
    assert r.json() == {"message": "File 'up/big.bin' uploaded successfully."}
    assert peak[0] - rss0 < RSS_SLACK_KIB, (rss0, peak[0])
    r = requests.get(router_env.url + "/v1/files/up/big.bin", headers=router_env.headers(box, port=8080),
                     stream=True)
    assert int(r.headers["Content-Length"]) == size
    r.close()
    requests.delete(router_env.url + "/v1/files/up/big.bin", headers=router_env.headers(box))


def test_grpc_request_resumes_suspended_sandbox(router_env, box):
    """Over HTTP/2 the lookup and resume run off the connection's loop: a call to a suspended
    sandbox resumes it, and calls to another sandbox on the same channel go on meanwhile."""
    from grpc_helpers import Client
    asb = router_env.asb
    router_env.sandbox("gsleepy")
    r = asb.merge_patch(asb.path(CORE, "sandboxes", "default", "gsleepy"),
                        {"spec": {"operatingMode": "Suspended"}})
    assert r.status_code == 200
    wait_cond(asb, "gsleepy", "Suspended")
    time.sleep(1.2)  # past the router's 1 s resolution cache
    c = Client(router_env.hostport())
    auth = ("authorization", f"Bearer {router_env.token}")
    out = {}

    def resume_call():
        out["r"] = c.execute(["echo", "awake"], metadata=[("x-sandbox-id", "gsleepy"), auth], timeout=60)
    t = threading.Thread(target=resume_call)
    t.start()
    for i in range(5):
        assert c.execute(["echo", str(i)], metadata=[("x-sandbox-id", box), auth]).stdout == f"{i}\n".encode()
    t.join()
    c.close()
    assert out["r"].stdout == b"awake\n"
    assert get_sandbox(asb, "gsleepy")["spec"]["operatingMode"] == "Running"
