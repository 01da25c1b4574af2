"""`asb cp -r` and absolute sandbox paths (issue 32): directories both ways as tar streams, as
kubectl cp, modes and symbolic links kept; `NAME:/etc/passwd` is that file (a relative path stays
relative to the sandbox's working root). Against a real `asb serve` running runc sandboxes
(skipped without root or runc)."""
import os
import stat

from asb_cli import ok, run
from local_sandbox import create, sbx_state, start_sbx, wait_ready  # noqa: F401


def sandbox(start_sbx, name="cp"):
    asb = start_sbx()
    create(asb, name)
    wait_ready(asb, name, timeout=20)
    return asb


def make_tree(root):
    os.makedirs(root / "sub" / "deeper")
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "sub" / "run.sh", 0o750)
    (root / "sub" / "deeper" / "z.bin").write_bytes(bytes(range(256)) * 1000)
    os.symlink("../a.txt", root / "sub" / "link")


def test_absolute_paths(start_sbx, tmp_path):
    asb = sandbox(start_sbx)
    ok(asb, "cp", "cp:/etc/passwd", str(tmp_path / "p"))
    assert (tmp_path / "p").read_text() == ok(asb, "exec", "cp", "--", "cat", "/etc/passwd")
    assert ok(asb, "cp", "cp:/etc/hostname", "-") == ok(asb, "exec", "cp", "--", "cat", "/etc/hostname")
    # an upload to an absolute path outside the working root lands there
    ok(asb, "cp", "-", "cp:/tmp/in/up.txt", input="up\n")
    assert ok(asb, "exec", "cp", "--", "cat", "/tmp/in/up.txt") == "up\n"
    # relative paths stay relative to the working root, as before
    ok(asb, "cp", "-", "cp:rel.txt", input="rel\n")
    assert ok(asb, "cp", "cp:rel.txt", "-") == "rel\n"
    wd = ok(asb, "exec", "cp", "--", "pwd").strip()
    assert ok(asb, "cp", f"cp:{wd}/rel.txt", "-") == "rel\n"
    p = run(asb, "cp", "cp:/no/such", str(tmp_path / "x"))
    assert p.returncode == 1 and p.stderr == "error: cp:/no/such: path does not exist within the sandbox\n"
    assert not (tmp_path / "x").exists()
    p = run(asb, "cp", "cp:/etc", str(tmp_path / "etc"))
    assert p.returncode == 1 and "is a directory (use asb cp -r" in p.stderr, p.stderr


def test_recursive_both_ways(start_sbx, tmp_path):
    asb = sandbox(start_sbx)
    src = tmp_path / "tree"
    make_tree(src)
    p = run(asb, "cp", str(src), "cp:tree")
    assert p.returncode == 1 and "is a directory (use asb cp -r" in p.stderr, p.stderr
    # up: a new name, then into an existing directory (keeps the source's name)
    ok(asb, "cp", "-r", str(src), "cp:t1")
    ok(asb, "exec", "cp", "--", "mkdir", "-p", "/tmp/into")
    ok(asb, "cp", "-r", str(src), "cp:/tmp/into")
    for where in ("t1", "/tmp/into/tree"):
        out = ok(asb, "exec", "cp", "--", "sh", "-c",
                 f"cd {where} && stat -c '%n %a %F' a.txt sub sub/run.sh sub/link && "
                 "readlink sub/link && cat sub/link && wc -c < sub/deeper/z.bin")
        lines = out.splitlines()
        assert lines[2] == "sub/run.sh 750 regular file", out
        assert lines[3].startswith("sub/link ") and lines[3].endswith("symbolic link"), out
        assert lines[4:] == ["../a.txt", "alpha", "256000"], out
    # down: into a new directory and into an existing one
    ok(asb, "cp", "-r", "cp:t1", str(tmp_path / "back"))
    (tmp_path / "down").mkdir()
    ok(asb, "cp", "-r", "cp:/tmp/into/tree", str(tmp_path / "down"))  # into it, by its name
    assert (tmp_path / "down" / "tree" / "sub" / "run.sh").read_text() == "#!/bin/sh\necho hi\n"
    back = tmp_path / "back"
    assert (back / "a.txt").read_text() == "alpha\n"
    assert stat.S_IMODE(os.stat(back / "sub" / "run.sh").st_mode) == 0o750
    assert os.readlink(back / "sub" / "link") == "../a.txt"
    assert (back / "sub" / "deeper" / "z.bin").read_bytes() == bytes(range(256)) * 1000
    # a file with -r, and the one file of an absolute path to stdout
    ok(asb, "cp", "-r", "cp:t1/a.txt", str(tmp_path / "a1"))
    assert (tmp_path / "a1").read_text() == "alpha\n"
    p = run(asb, "cp", "-r", "cp:t1", "-")
    assert p.returncode == 1 and "not a regular file" in p.stderr, p.stderr
    p = run(asb, "cp", "-r", "cp:/no/such/dir", str(tmp_path / "none"))
    assert p.returncode == 1 and "path does not exist" in p.stderr
    assert not (tmp_path / "none").exists()
