"""Benchmarks leave nothing behind (issue 13): after a benchmark's `asb serve` stopped,
`asb serve --cleanup` removes what its state directory made on the host (containers, cgroups,
network namespaces, bridge, nft table, mounts), then the directory goes. Something left is a
loud failure, not a silent leak."""
import glob
import json
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = shutil.which("runc") or "/usr/sbin/runc"


def _left(state):
    left = []
    for root in [os.path.join(state, "runc")] + glob.glob(os.path.join(state, "oci-*")):
        binary = RUNC if root.endswith("/runc") else shutil.which(os.path.basename(root)[4:])
        if binary and os.path.isdir(root):
            out = subprocess.run([binary, "--root", root, "list", "--format", "json"],
                                 capture_output=True, text=True)
            left += [c["id"] for c in json.loads(out.stdout or "null") or []]
    with open("/proc/self/mountinfo") as f:
        left += [line.split()[4] for line in f if line.split()[4].startswith(state.rstrip("/") + "/")]
    return left


def cleanup_state(state, env=None, extra_runc_roots=()):
    """Removes everything state made on the host, then state itself. Raises when something is
    left. extra_runc_roots: runc roots a benchmark used directly (baselines)."""
    for root in extra_runc_roots:
        ids = subprocess.run([RUNC, "--root", root, "list", "-q"], capture_output=True,
                             text=True).stdout.split()
        for cid in ids:
            subprocess.run([RUNC, "--root", root, "delete", "--force", cid], capture_output=True)
    if not os.path.isdir(state):
        return
    e = {**os.environ, "ASB_STATE_DIR": state, "ASB_RUNTIME": RUNC, **(env or {})}
    out = subprocess.run([os.path.join(BUILD, "bin", "asb"), "serve", "--cleanup"], env=e,
                         capture_output=True, text=True, timeout=300)
    left = _left(state)
    shutil.rmtree(state, ignore_errors=True)
    if out.returncode != 0 or left:
        raise RuntimeError(f"{state}: asb serve --cleanup: {out.stderr.strip()}; left: {left}")
