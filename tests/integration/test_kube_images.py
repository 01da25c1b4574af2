"""`make images` (scripts/make-images.sh): OCI image layouts assembled without a container daemon.
The sandboxd image is then run end to end by the local control plane (`oci:` image)."""
import json
import os
import shutil
import socket
import subprocess
import tarfile

import pytest

from grpc_helpers import Client
from local_sandbox import create, sbx_state, sockets, start_sbx, wait_ready  # noqa: F401
from waiting import read_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
pytestmark = pytest.mark.skipif(not shutil.which("umoci"), reason="umoci is not installed")


def build(out, *names):
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "make-images.sh"), os.path.join(BUILD, "bin"),
                        str(out), *names], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def image_config(layout, tag="0.1.0"):
    idx = json.load(open(os.path.join(layout, "index.json")))
    (m,) = [m for m in idx["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == tag]
    blob = lambda d: json.load(open(os.path.join(layout, "blobs", *d.split(":"))))  # noqa: E731
    manifest = blob(m["digest"])
    return manifest, blob(manifest["config"]["digest"])


def test_sandboxd_image_runs_in_the_local_control_plane(tmp_path, start_sbx, sbx_state):  # noqa: F811
    out = tmp_path / "images"
    build(out, "sandboxd")
    layout = out / "sandboxd"
    manifest, cfg = image_config(layout)
    assert cfg["config"]["Entrypoint"] == ["/usr/local/bin/sandboxd"]
    assert cfg["config"]["User"] == "1000"
    assert set(cfg["config"]["ExposedPorts"]) == {"8080/tcp", "9090/tcp"}
    assert len(manifest["layers"]) >= 1
    with tarfile.open(out / "sandboxd.tar") as t:
        names = t.getnames()
    assert "./index.json" in names and "./oci-layout" in names
    asb = start_sbx()
    sb = create(asb, "img", image=f"oci:{layout}:0.1.0")
    wait_ready(asb, "img", timeout=60)
    c = Client(f"unix:{sockets(sbx_state, sb['metadata']['uid'])[1]}")
    try:
        # The image's own sandboxd and its libraries resolve inside the image's rootfs ...
        # (LeakSanitizer cannot run there when the images hold sanitizer builds.)
        env = ["/bin/env", "ASAN_OPTIONS=detect_leaks=0"]
        r = c.execute([*env, "/usr/local/bin/sandboxd", "--version"], timeout=20)
        assert r.exit_code == 0 and r.stdout.decode().startswith("sandboxd"), r
        # ... and the injectable copy works with its bundled loader.
        r = c.execute([*env, "/opt/asb/lib/ld.so", "--library-path", "/opt/asb/lib", "/opt/asb/bin/sandboxd",
                       "--version"], timeout=20)
        assert r.exit_code == 0, r
        r = c.execute(["/bin/sh", "-c", "test -x /usr/local/bin/sandboxd-install && ls /opt/asb/bin"], timeout=20)
        assert r.stdout.decode().split() == ["sandboxd"]
    finally:
        c.close()


def test_controller_and_router_images(tmp_path):
    names = ["asb-controller"]
    if os.path.exists(os.path.join(BUILD, "bin", "sandbox-router")):
        names.append("sandbox-router")
    build(tmp_path, *names)
    for n in names:
        _, cfg = image_config(tmp_path / n)
        assert cfg["config"]["Entrypoint"] == [f"/usr/local/bin/{n}"]
        assert cfg["config"]["User"] == "65532"
        assert os.path.getsize(tmp_path / f"{n}.tar") > 100000
    # The controller in its image: the binary and its libraries resolve inside the rootfs.
    # (Sanitizer builds cannot run without /proc: that part is for release builds.)
    if "libasan" in subprocess.run(["ldd", os.path.join(BUILD, "bin", "asb-controller")],
                                   capture_output=True, text=True).stdout:
        return
    bundle = tmp_path / "bundle"
    subprocess.run(["umoci", "unpack", "--image", f"{tmp_path / 'asb-controller'}:0.1.0", str(bundle)],
                   check=True, capture_output=True)
    r = subprocess.run(["chroot", str(bundle / "rootfs"), "/usr/local/bin/asb-controller", "--version"],
                       capture_output=True, text=True, env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"})
    assert r.returncode == 0 and r.stdout.startswith("asb-controller"), r.stderr
    # A kubeconfig in YAML is read inside the image too: libasb loads libyaml with dlopen, which
    # ldd does not list, so the image must carry it. The server is a port of ours that refuses
    # connections; the controller logs its start (after the kubeconfig) and is stopped.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        server = f"http://127.0.0.1:{closed.getsockname()[1]}"
        (bundle / "rootfs" / "kubeconfig.yaml").write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
            f"clusters:\n- name: c\n  cluster:\n    server: {server}\n"
            "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
            "users:\n- name: u\n  user:\n    token: t\n")
        p = subprocess.Popen(["chroot", str(bundle / "rootfs"), "/usr/local/bin/asb-controller",
                              "--kubeconfig", "/kubeconfig.yaml", "--metrics-bind-address", "0",
                              "--health-probe-bind-address", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            first = read_until(p.stdout, "starting asb-controller", timeout=30)
        finally:
            p.terminate()
        out = first + p.communicate(timeout=30)[0]
    assert "starting asb-controller" in out and server in out, out
    assert "cannot parse kubeconfig" not in out and "libyaml" not in out, out
