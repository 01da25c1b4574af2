"""Escape suite, the shared rootfs skeleton (issue 16): every `host` sandbox of a state directory
runs on one read-only rootfs skeleton and hard links of the same /etc files under
$ASB_STATE_DIR/shared. A hostile sandbox, root inside its user namespace (and root on the host's
ids with user namespaces off), tries to change them from inside: every attempt fails, the shared
files on the host are unchanged to the inode's mtime, and a second sandbox sees what it saw
before."""
import hashlib
import json
import os

import pytest

from escape_sandbox import escape, start_escape_server  # noqa: F401

ROOT = {"securityContext": {"runAsUser": 0, "runAsGroup": 0}}

# Each attempt prints "<name> OK" when it went through, else the errno's name.
ATTEMPTS = r"""
import errno, os
def attempt(name, f):
    try:
        f()
        print(name, "OK")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, str(e.errno)))
def write(path, flags):
    fd = os.open(path, os.O_WRONLY | flags, 0o644)
    try:
        os.write(fd, b"pwned\n")
    finally:
        os.close(fd)
attempt("create-in-root", lambda: write("/pwned", os.O_CREAT))
attempt("mkdir-in-root", lambda: os.mkdir("/pwned-dir"))
attempt("mkdir-in-home", lambda: os.mkdir("/home/pwned"))
attempt("mkdir-in-asb", lambda: os.mkdir("/.asb/pwned"))
attempt("unlink-bin", lambda: os.unlink("/bin") if os.path.islink("/bin") else os.rmdir("/bin"))
attempt("rename-lib", lambda: os.rename("/lib", "/lib.old"))
attempt("symlink-in-root", lambda: os.symlink("/", "/pwned-link"))
attempt("chmod-root", lambda: os.chmod("/", 0o777))
attempt("chmod-home", lambda: os.chmod("/home", 0o777))
attempt("chown-home", lambda: os.chown("/home", os.getuid(), os.getgid()))
attempt("utime-home", lambda: os.utime("/home", (0, 0)))
attempt("append-passwd", lambda: write("/etc/passwd", os.O_APPEND))
attempt("truncate-nsswitch", lambda: write("/etc/nsswitch.conf", os.O_TRUNC))
attempt("unlink-resolv", lambda: os.unlink("/etc/resolv.conf"))
attempt("write-ld-cache", lambda: write("/etc/ld.so.cache", 0))
attempt("link-passwd", lambda: os.link("/etc/passwd", "/workspace/passwd-link"))
"""


def shared_tree(state_dir):
    """Everything about the shared area that a write would change."""
    out = {}
    base = os.path.join(state_dir, "shared")
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames + [""]:
            p = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(p)
            item = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if os.path.islink(p):
                item += (os.readlink(p),)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    item += (hashlib.sha256(f.read()).hexdigest(),)
            out[os.path.relpath(p, base)] = item
    return out


def rootfs_of(state_dir, uid):
    with open(os.path.join(state_dir, "sandboxes", uid, "bundle", "config.json")) as f:
        return json.load(f)["annotations"]["dev.asb.rootfs"]


def check_shared_skeleton_survives(esc):
    witness = esc.sandbox("witness-two")
    attacker = esc.sandbox("attacker-root", container=ROOT)
    shared = os.path.join(esc.state_dir, "shared")
    # Both really run on the shared skeleton, with their /etc files linked from it.
    assert rootfs_of(esc.state_dir, witness.uid) == rootfs_of(esc.state_dir, attacker.uid)
    assert rootfs_of(esc.state_dir, attacker.uid).startswith(shared + "/")
    passwd = os.path.join(esc.state_dir, "sandboxes", attacker.uid, "bundle", "etc", "passwd")
    assert os.stat(passwd).st_nlink >= 2
    before = shared_tree(esc.state_dir)
    # What the witness sees of the shared parts (its own /tmp, /workspace... change by
    # themselves; a shared file's link count with the number of sandboxes).
    look = ("ls -a / /home /.asb /etc; stat -c '%n %a %u %g %s %Y' / /home /.asb /bin /lib "
            "/etc/passwd /etc/nsswitch.conf /etc/resolv.conf /etc/ld.so.cache; "
            "cat /etc/passwd /etc/group /etc/nsswitch.conf /etc/resolv.conf")
    seen = witness.run("sh", "-c", look)
    assert seen[0] == 0, seen
    assert attacker.run("id", "-u")[1].strip() == "0"
    code, out, err = attacker.python(ATTEMPTS)
    assert code == 0, err
    results = dict(line.rsplit(" ", 1) for line in out.splitlines())
    assert len(results) == 16, out
    went_through = {k: v for k, v in results.items() if v == "OK"}
    assert not went_through, f"writes to the shared rootfs went through: {went_through}"
    assert set(results.values()) <= {"EROFS", "EACCES", "EPERM", "EXDEV", "EBUSY"}, results
    assert shared_tree(esc.state_dir) == before
    assert witness.run("sh", "-c", look) == seen
    assert not os.path.exists(os.path.join(shared, "pwned"))


def test_shared_skeleton_with_user_namespaces(escape):  # noqa: F811
    check_shared_skeleton_survives(escape)
    escape.assert_healthy()


def test_shared_skeleton_with_host_ids(tmp_path_factory):
    esc, cleanup = start_escape_server(tmp_path_factory, env={"ASB_USERNS_RANGE": "off"})
    try:
        check_shared_skeleton_survives(esc)
        esc.assert_healthy()
    finally:
        esc.close()
        cleanup()
