"""Local sandboxes from OCI image layouts (`oci:/layout[:tag]`): the layout is built here with
umoci from /bin/sh and its libraries, unpacked once per manifest digest under
$ASB_STATE_DIR/images and used read-only as the container's rootfs."""
import json
import os
import shutil
import subprocess
import time

import pytest

from asb_apiserver import CORE, sandbox
from grpc_helpers import Client
from local_sandbox import (condition, create, runc_ids, sbx_state, sockets, start_sbx,  # noqa: F401
                           wait_ready)

UMOCI = shutil.which("umoci")
pytestmark = pytest.mark.skipif(not UMOCI, reason="umoci is not installed (scripts/deps.sh)")

MARKER = "hello from the oci image"


def umoci(*args):
    r = subprocess.run([UMOCI, *args], capture_output=True, text=True)
    assert r.returncode == 0, f"umoci {args}: {r.stderr}"


def closure(binary):
    """binary plus the absolute paths ldd lists for it."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    paths = [binary]
    for line in out.splitlines():
        for word in line.split():
            if word.startswith("/"):
                paths.append(word)
    return paths


def build_layout(tmp_path, tag="t"):
    layout, bundle = tmp_path / "layout", tmp_path / "bundle"
    umoci("init", "--layout", str(layout))
    umoci("new", "--image", f"{layout}:{tag}")
    umoci("unpack", "--image", f"{layout}:{tag}", str(bundle))
    rootfs = bundle / "rootfs"
    for src in closure("/bin/sh"):
        dst = rootfs / src.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(src), dst)
    (rootfs / "etc").mkdir(exist_ok=True)
    (rootfs / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\n")
    (rootfs / "etc" / "oci-marker").write_text(MARKER + "\n")
    umoci("repack", "--image", f"{layout}:{tag}", str(bundle))
    return layout


def cache_entries(state):
    d = os.path.join(state, "images")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def manifest_digest(layout, tag):
    with open(os.path.join(layout, "index.json")) as f:
        for m in json.load(f)["manifests"]:
            if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
                return m["digest"]
    raise AssertionError(f"no tag {tag}")


def read_marker(state, uid):
    c = Client(f"unix:{sockets(state, uid)[1]}")
    try:
        r = c.execute(["/bin/sh", "-c", 'read l < /etc/oci-marker; echo "$l"'], timeout=20)
        return r.exit_code, r.stdout.decode(), r.stderr.decode()
    finally:
        c.close()


def test_oci_layout_runs_and_is_cached_by_digest(start_sbx, sbx_state, tmp_path):
    layout = build_layout(tmp_path)
    digest = manifest_digest(layout, "t").replace(":", "-")
    asb = start_sbx()
    a = create(asb, "oci-a", image=f"oci:{layout}:t")
    wait_ready(asb, "oci-a", timeout=60)
    assert read_marker(sbx_state, a["metadata"]["uid"]) == (0, MARKER + "\n", "")
    assert cache_entries(sbx_state) == [digest]
    rootfs = os.path.join(sbx_state, "images", digest, "rootfs")
    before = os.stat(rootfs)
    # The rootfs is read-only inside the container.
    c = Client(f"unix:{sockets(sbx_state, a['metadata']['uid'])[1]}")
    try:
        assert c.execute(["/bin/sh", "-c", "echo x > /etc/oci-marker"], timeout=20).exit_code != 0
    finally:
        c.close()

    b = create(asb, "oci-b", image=f"oci:{layout}:t")
    wait_ready(asb, "oci-b", timeout=60)
    assert read_marker(sbx_state, b["metadata"]["uid"])[1] == MARKER + "\n"
    after = os.stat(rootfs)
    assert cache_entries(sbx_state) == [digest]
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_oci_default_tag_is_latest(start_sbx, sbx_state, tmp_path):
    layout = build_layout(tmp_path, tag="latest")
    asb = start_sbx()
    created = create(asb, "oci-latest", image=f"oci:{layout}")
    wait_ready(asb, "oci-latest", timeout=60)
    assert read_marker(sbx_state, created["metadata"]["uid"])[1] == MARKER + "\n"


def expect_failure(asb, state, name, image, reason, needle):
    created = create(asb, name, image=image)
    obj = wait_ready(asb, name, want="False", reason=reason, timeout=30)
    ready = condition(obj, "Ready")
    assert needle in ready["message"], ready
    assert created["metadata"]["uid"] not in runc_ids(state)


def test_oci_errors_are_conditions(start_sbx, sbx_state, tmp_path):
    layout = build_layout(tmp_path)
    asb = start_sbx()
    expect_failure(asb, sbx_state, "nolayout", "oci:/nonexistent/layout:t", "ImageNotFound",
                   "/nonexistent/layout is not a directory")
    expect_failure(asb, sbx_state, "notag", f"oci:{layout}:nope", "ImageNotFound",
                   'tag "nope" not found')
    expect_failure(asb, sbx_state, "relative", "oci:layout:t", "ImageNotFound", "absolute path")
    expect_failure(asb, sbx_state, "registry", "docker.io/library/alpine:3", "ImageNotSupported",
                   "no registry is reachable")

    # A layout whose layer blob is gone: umoci fails, its message is the condition's, and
    # nothing is left in the cache.
    broken = tmp_path / "broken"
    shutil.copytree(layout, broken)
    digest = manifest_digest(broken, "t")
    with open(os.path.join(broken, "blobs", *digest.split(":"))) as f:
        layer = json.load(f)["layers"][-1]["digest"]
    os.unlink(os.path.join(broken, "blobs", *layer.split(":")))
    expect_failure(asb, sbx_state, "broken", f"oci:{broken}:t", "ImageUnpackFailed", "umoci unpack failed")
    assert cache_entries(sbx_state) == []

    # The server still runs good sandboxes.
    create(asb, "good", image=f"oci:{layout}:t")
    wait_ready(asb, "good", timeout=60)


def test_oci_image_env_under_container_env(start_sbx, sbx_state, tmp_path):
    layout = build_layout(tmp_path)
    umoci("config", "--image", f"{layout}:t", "--config.env", "FROM_IMAGE=image",
          "--config.env", "BOTH=image")
    asb = start_sbx()
    created = create(asb, "oci-env", image=f"oci:{layout}:t",
                     container={"env": [{"name": "BOTH", "value": "container"}]})
    wait_ready(asb, "oci-env", timeout=60)
    c = Client(f"unix:{sockets(sbx_state, created['metadata']['uid'])[1]}")
    try:
        r = c.execute(["/bin/sh", "-c", 'echo "$FROM_IMAGE $BOTH"'], timeout=20)
        assert (r.exit_code, r.stdout.decode()) == (0, "image container\n")
    finally:
        c.close()


def run_sh(state, uid, script):
    c = Client(f"unix:{sockets(state, uid)[1]}")
    try:
        r = c.execute(["/bin/sh", "-c", script], timeout=20)
        assert r.exit_code == 0, r.stderr
        return r.stdout.decode()
    finally:
        c.close()


UID_OF_SELF = 'while read k v rest; do [ "$k" = Uid: ] && echo "$v"; done < /proc/self/status; true'


def test_oci_image_working_dir_and_user(start_sbx, sbx_state, tmp_path):
    layout = build_layout(tmp_path)
    bundle = tmp_path / "bundle2"
    umoci("unpack", "--image", f"{layout}:t", str(bundle))
    (bundle / "rootfs" / "srv" / "app").mkdir(parents=True)
    for src in closure("/bin/sleep"):  # the main process below stays up
        dst = bundle / "rootfs" / src.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(src), dst)
    umoci("repack", "--image", f"{layout}:t", str(bundle))
    umoci("config", "--image", f"{layout}:t", "--config.workingdir", "/srv/app",
          "--config.user", "4321:4322")
    asb = start_sbx()
    main = {"command": ["/bin/sh", "-c", "pwd; exec /bin/sleep 1000"]}
    a = create(asb, "oci-wd", image=f"oci:{layout}:t", container=main)["metadata"]["uid"]
    b = create(asb, "oci-wd-override", image=f"oci:{layout}:t",
               container={**main, "workingDir": "/etc", "securityContext": {"runAsUser": 2000}})
    b = b["metadata"]["uid"]
    wait_ready(asb, "oci-wd", timeout=60)
    wait_ready(asb, "oci-wd-override", timeout=60)
    # The image's WorkingDir is the main process's cwd; Execute without cwd still starts in
    # sandboxd's root dir (UPSTREAM.md §1.5). The image's User runs both.
    assert run_sh(sbx_state, a, "pwd") == "/workspace\n"
    assert run_sh(sbx_state, a, UID_OF_SELF) == "4321\n"
    log_a = os.path.join(sbx_state, "sandboxes", a, "main.log")
    # The container's workingDir and runAsUser win over the image's.
    assert run_sh(sbx_state, b, UID_OF_SELF) == "2000\n"
    log_b = os.path.join(sbx_state, "sandboxes", b, "main.log")
    from test_local_sandbox_runtime import wait_for
    assert wait_for(lambda: os.path.exists(log_a) and open(log_a).read() == "/srv/app\n")
    assert wait_for(lambda: os.path.exists(log_b) and open(log_b).read() == "/etc\n")


def test_oci_image_root_user_still_runs_unprivileged(start_sbx, sbx_state, tmp_path):
    layout = build_layout(tmp_path)
    umoci("config", "--image", f"{layout}:t", "--config.user", "0:0")
    asb = start_sbx()
    uid = create(asb, "oci-root", image=f"oci:{layout}:t")["metadata"]["uid"]
    wait_ready(asb, "oci-root", timeout=60)
    assert run_sh(sbx_state, uid, UID_OF_SELF) == "1000\n"


def test_relative_working_dir_is_rejected(start_sbx, sbx_state):
    """At admission (it used to be stored and fail every start)."""
    asb = start_sbx()
    b = sandbox("rel-wd")
    b["spec"]["podTemplate"]["spec"]["containers"][0]["workingDir"] = "relative/dir"
    r = asb.post(asb.path(CORE, "sandboxes", "default"), b)
    assert r.status_code == 422, r.text
    assert 'containers[0].workingDir: Invalid value: "relative/dir": must be an absolute path' \
        in r.json()["message"]


def test_unused_images_are_garbage_collected(start_sbx, sbx_state, tmp_path):
    layout = build_layout(tmp_path)
    asb = start_sbx({"ASB_IMAGE_GC_IDLE": "1s", "ASB_RESYNC_INTERVAL": "300ms"})
    create(asb, "gc-a", image=f"oci:{layout}:t")
    wait_ready(asb, "gc-a", timeout=60)
    assert len(cache_entries(sbx_state)) == 1
    # In use by a running sandbox: kept however long it has been idle.
    time.sleep(2.5)  # the point: the idle time (1 s) passes, resyncs run, the image stays
    assert len(cache_entries(sbx_state)) == 1, asb.output()
    p = asb.path(CORE, "sandboxes", "default", "gc-a")
    assert asb.delete(p).status_code == 200
    from test_local_sandbox_runtime import wait_for
    assert wait_for(lambda: cache_entries(sbx_state) == [], timeout=10), asb.output()
    # Logged once the removal has finished: the directory may be gone a moment before.
    assert wait_for(lambda: "removed unused images" in asb.output(), timeout=5), asb.output()
    # A new sandbox of the same image unpacks it again.
    create(asb, "gc-b", image=f"oci:{layout}:t")
    wait_ready(asb, "gc-b", timeout=60)
    assert len(cache_entries(sbx_state)) == 1
