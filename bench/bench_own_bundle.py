#!/usr/bin/python3
"""A bare `runc run` of *our own* bundle: the config.json of a running sandbox (its mounts, user
namespace, seccomp profile, masked paths, namespaces), with /usr/bin/true as the process and a
cgroup of its own, run by runc directly, without asb serve. It tells how much of a cold create is
runc's cost for this container rather than asb serve's own overhead (bench-local-sandbox.py
prints it beside the bare `runc run` of a trivial bundle).

A user-namespaced sandbox names its rootfs at /run/asb/rootfs, which asb serve binds in a private
mount namespace around each `runc run` (local-idmap.c). The same is done here once: this file,
run as a script, is a helper that enters a mount namespace of its own (slave of the host's),
binds the rootfs there, and then times one `runc run` per line it reads on stdin, answering the
milliseconds on stdout. Nothing of it outlives the helper (its namespace goes with it)."""
import ctypes
import json
import os
import subprocess
import sys
import time

IDMAP_ROOTFS = "/run/asb/rootfs"  # LOCAL_IDMAP_ROOTFS
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_SLAVE = 4096, 16384, 1 << 19


def make_bundle(state, uid, dest):
    """dest/config.json from the running sandbox uid of the server at state: returns (bundle dir,
    the rootfs to stage at /run/asb/rootfs or None)."""
    with open(os.path.join(state, "sandboxes", uid, "bundle", "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["args"] = ["/usr/bin/true"]
    cfg["process"]["terminal"] = False
    linux = cfg.setdefault("linux", {})
    # A cgroup beside the sandbox's own (the same parent, which asb serve removes at its stop).
    parent = os.path.dirname(linux.get("cgroupsPath") or "/asb/x")
    linux["cgroupsPath"] = os.path.join(parent, "bench-own-bundle")
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(cfg, f)
    stage = None
    if cfg["root"]["path"] == IDMAP_ROOTFS:
        shared = os.path.join(state, "shared")
        roots = sorted(d for d in os.listdir(shared) if d.startswith("host-rootfs-"))
        if not roots:
            raise RuntimeError(f"no shared host rootfs in {shared}")
        stage = os.path.join(shared, roots[0])
    return dest, stage


class OwnBundleRunner:
    """The helper process; run(i) times one `runc run` of the bundle in ms."""

    def __init__(self, runc, runc_root, bundle, stage):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), runc, runc_root,
                                   bundle, stage or ""], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def run(self, i):
        self.p.stdin.write(f"{i}\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("bare runc run of our own bundle: the helper died")
        return float(line)

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def helper(runc, runc_root, bundle, stage):
    if stage:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
        if (libc.unshare(CLONE_NEWNS) != 0
                or libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0
                or libc.mount(stage.encode(), IDMAP_ROOTFS.encode(), None, MS_BIND | MS_REC,
                              None) != 0):
            raise OSError(ctypes.get_errno(), "cannot stage the rootfs at " + IDMAP_ROOTFS)
    for line in sys.stdin:
        t0 = time.perf_counter()
        subprocess.run([runc, "--root", runc_root, "run", "--bundle", bundle,
                        f"own{line.strip()}"], check=True, stdin=subprocess.DEVNULL)
        print(f"{(time.perf_counter() - t0) * 1000:.3f}", flush=True)


if __name__ == "__main__":
    helper(*sys.argv[1:4], sys.argv[4] or None)
