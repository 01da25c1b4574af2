"""REST /v1/files conformance (shared/spec/UPSTREAM.md §1.4 and the §1.7 checklist)."""
import datetime
import json
import os
import stat

import requests

from resthelpers import error_of, raw


def test_put_get_roundtrip(sandboxd):
    r = requests.put(sandboxd.url("/v1/files/hello.txt"), data=b"payload")
    assert r.status_code == 204 and r.content == b""
    assert open(os.path.join(sandboxd.root, "hello.txt"), "rb").read() == b"payload"
    r = requests.get(sandboxd.url("/v1/files/hello.txt"))
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert r.headers["Accept-Ranges"] == "bytes"
    assert "Last-Modified" in r.headers
    assert r.content == b"payload"


def test_put_creates_parents(sandboxd):
    assert requests.put(sandboxd.url("/v1/files/a/b/c/deep.txt"), data=b"x").status_code == 204
    assert open(os.path.join(sandboxd.root, "a/b/c/deep.txt"), "rb").read() == b"x"
    assert stat.S_IMODE(os.stat(os.path.join(sandboxd.root, "a/b")).st_mode) & 0o700 == 0o700


def test_put_mode(sandboxd):
    assert requests.put(sandboxd.url("/v1/files/run.sh?mode=0755"), data=b"#!/bin/sh\n").status_code == 204
    assert stat.S_IMODE(os.stat(os.path.join(sandboxd.root, "run.sh")).st_mode) == 0o755
    assert requests.put(sandboxd.url("/v1/files/def.txt"), data=b"").status_code == 204
    assert stat.S_IMODE(os.stat(os.path.join(sandboxd.root, "def.txt")).st_mode) == 0o644
    assert requests.put(sandboxd.url("/v1/files/priv?mode=0600"), data=b"s").status_code == 204
    assert stat.S_IMODE(os.stat(os.path.join(sandboxd.root, "priv")).st_mode) == 0o600


def test_put_bad_mode(sandboxd):
    for mode in ["0999", "777", "abcd", "01777"]:
        r = requests.put(sandboxd.url(f"/v1/files/m.txt?mode={mode}"), data=b"x")
        assert r.status_code == 400
        code, msg = error_of(r.content)
        assert code == "INVALID_ARGUMENT"
        assert msg == f'mode "{mode}" must match ^0[0-7]{{3}}$'
    assert not os.path.exists(os.path.join(sandboxd.root, "m.txt"))


def test_mode_checked_before_path(sandboxd):
    st, _, body = raw(sandboxd, "PUT", "/v1/files/%2E%2E/x?mode=9", body=b"x")
    assert st == 400 and error_of(body)[0] == "INVALID_ARGUMENT"


def test_put_overwrite_no_leftovers(sandboxd):
    assert requests.put(sandboxd.url("/v1/files/f.txt"), data=b"old").status_code == 204
    assert requests.put(sandboxd.url("/v1/files/f.txt"), data=b"new").status_code == 204
    assert requests.get(sandboxd.url("/v1/files/f.txt")).content == b"new"
    assert os.listdir(sandboxd.root) == ["f.txt"]


def test_multipart_put(sandboxd):
    files = {"file": ("upload.bin", b"multipart-payload", "application/octet-stream")}
    r = requests.put(sandboxd.url("/v1/files/up/m.bin"), files=files, data={"other": "x"})
    assert r.status_code == 204, r.text
    assert open(os.path.join(sandboxd.root, "up/m.bin"), "rb").read() == b"multipart-payload"
    assert sorted(os.listdir(os.path.join(sandboxd.root, "up"))) == ["m.bin"]


def test_multipart_first_file_part_wins(sandboxd):
    b = "XyZb"
    body = (f"--{b}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nskip\r\n"
            f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\nfirst\r\n"
            f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"y\"\r\n\r\nsecond\r\n"
            f"--{b}--\r\n").encode()
    r = requests.put(sandboxd.url("/v1/files/mp.txt"), data=body,
                     headers={"Content-Type": f"multipart/form-data; boundary={b}"})
    assert r.status_code == 204, r.text
    assert open(os.path.join(sandboxd.root, "mp.txt"), "rb").read() == b"first"


def test_multipart_empty_file_part(sandboxd):
    files = {"file": ("e.bin", b"", "application/octet-stream")}
    r = requests.put(sandboxd.url("/v1/files/empty.bin"), files=files)
    assert r.status_code == 204, r.text
    assert open(os.path.join(sandboxd.root, "empty.bin"), "rb").read() == b""


def test_multipart_missing_file_part(sandboxd):
    r = requests.put(sandboxd.url("/v1/files/nofile/x.txt"), files={"other": ("o", b"data")})
    assert r.status_code == 400
    assert error_of(r.content) == ("INVALID_ARGUMENT",
                                   'multipart body is missing the required "file" part')
    assert os.listdir(sandboxd.root) == []


def test_multipart_malformed(sandboxd):
    r = requests.put(sandboxd.url("/v1/files/bad.txt"), data=b"garbage",
                     headers={"Content-Type": "multipart/form-data"})
    assert r.status_code == 400
    code, msg = error_of(r.content)
    assert code == "INVALID_ARGUMENT" and msg.startswith("invalid multipart body: ")
    r = requests.put(sandboxd.url("/v1/files/bad.txt"), data=b"--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ntrunc",
                     headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert r.status_code == 400
    assert error_of(r.content)[1].startswith("invalid multipart body: ")
    assert os.listdir(sandboxd.root) == []


def test_raw_body_other_content_types(sandboxd):
    for ct in ["text/plain", "application/x-www-form-urlencoded", "application/json"]:
        r = requests.put(sandboxd.url("/v1/files/ct.txt"), data=b"a=b&c=d", headers={"Content-Type": ct})
        assert r.status_code == 204
        assert open(os.path.join(sandboxd.root, "ct.txt"), "rb").read() == b"a=b&c=d"


def test_put_onto_directory(sandboxd):
    os.mkdir(os.path.join(sandboxd.root, "d"))
    r = requests.put(sandboxd.url("/v1/files/d"), data=b"x")
    assert r.status_code == 400
    assert error_of(r.content) == ("INVALID_ARGUMENT", "target path is a directory")
    r = requests.put(sandboxd.url("/v1/files/"), data=b"x")
    assert r.status_code == 400


def test_put_encoded_slashes(sandboxd):
    st, _, _ = raw(sandboxd, "PUT", "/v1/files/dir%2Fsub%2Ffile.txt", body=b"enc")
    assert st == 204
    assert open(os.path.join(sandboxd.root, "dir/sub/file.txt"), "rb").read() == b"enc"


def test_put_parent_is_file(sandboxd):
    open(os.path.join(sandboxd.root, "plain"), "w").write("x")
    r = requests.put(sandboxd.url("/v1/files/plain/child.txt"), data=b"x")
    assert r.status_code == 500
    assert error_of(r.content)[0] == "INTERNAL"


def test_listing(sandboxd):
    p = os.path.join(sandboxd.root, "b.txt")
    open(p, "w").write("hi")
    os.chmod(p, 0o600)
    os.mkdir(os.path.join(sandboxd.root, "adir"))
    r = requests.get(sandboxd.url("/v1/files/"))
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert r.content.endswith(b"}\n")
    obj = r.json()
    assert obj["path"] == "/"
    names = [e["name"] for e in obj["entries"]]
    assert names == ["adir", "b.txt"]
    a, b = obj["entries"]
    assert list(a) == ["name", "size", "type", "modified_at", "mode"]
    assert a["type"] == "directory" and b["type"] == "file"
    assert b["size"] == 2 and b["mode"] == "0600"
    t = datetime.datetime.strptime(b["modified_at"], "%Y-%m-%dT%H:%M:%SZ")
    assert abs(t.replace(tzinfo=datetime.timezone.utc).timestamp() - os.stat(p).st_mtime) < 2


def test_listing_path_field(sandboxd):
    os.makedirs(os.path.join(sandboxd.root, "src/x"))
    assert requests.get(sandboxd.url("/v1/files/src")).json()["path"] == "/src"
    assert requests.get(sandboxd.url("/v1/files/src/")).json()["path"] == "/src/"
    st, _, body = raw(sandboxd, "GET", "/v1/files/%2E")
    assert st == 200 and json.loads(body)["path"] == "/."


def test_listing_empty_root(sandboxd):
    r = requests.get(sandboxd.url("/v1/files/"))
    assert b'"entries":[]' in r.content


def test_listing_sorted_bytewise(sandboxd):
    for n in ["b", "B", "a", "_", "Z1", "z"]:
        open(os.path.join(sandboxd.root, n), "w").close()
    names = [e["name"] for e in requests.get(sandboxd.url("/v1/files/")).json()["entries"]]
    assert names == sorted(names, key=lambda s: s.encode())


def test_listing_symlinks(sandboxd, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("top secret")
    root = sandboxd.root
    open(os.path.join(root, "normal.txt"), "w").write("n")
    os.symlink(str(outside), os.path.join(root, "escape"))
    os.symlink("/etc/passwd", os.path.join(root, "abs-escape"))
    os.symlink("missing-target", os.path.join(root, "dangling"))
    os.symlink("normal.txt", os.path.join(root, "inlink"))
    os.mkdir(os.path.join(root, "sub"))
    os.symlink("sub", os.path.join(root, "dirlink"))
    entries = requests.get(sandboxd.url("/v1/files/")).json()["entries"]
    by = {e["name"]: e for e in entries}
    assert sorted(by) == ["dirlink", "inlink", "normal.txt", "sub"]
    assert by["inlink"]["type"] == "file" and by["inlink"]["size"] == 1
    assert by["dirlink"]["type"] == "directory"
    assert "symlink" not in json.dumps(entries)


def test_special_files_are_file(sandboxd):
    os.mkfifo(os.path.join(sandboxd.root, "fifo"))
    e = requests.get(sandboxd.url("/v1/files/")).json()["entries"]
    assert e[0]["name"] == "fifo" and e[0]["type"] == "file"
    # GET on a fifo must not hang the daemon
    r = requests.get(sandboxd.url("/v1/files/fifo"), timeout=10)
    assert r.status_code in (200, 500)


def test_get_missing(sandboxd):
    r = requests.get(sandboxd.url("/v1/files/nope.txt"))
    assert r.status_code == 404
    assert error_of(r.content) == ("NOT_FOUND", "path does not exist within the sandbox")
    assert r.headers["Content-Type"] == "application/json"


def test_get_file_child_is_internal(sandboxd):
    open(os.path.join(sandboxd.root, "file.txt"), "w").write("x")
    r = requests.get(sandboxd.url("/v1/files/file.txt/child"))
    assert r.status_code == 500 and error_of(r.content)[0] == "INTERNAL"


def test_head(sandboxd):
    open(os.path.join(sandboxd.root, "h.txt"), "w").write("12345")
    r = requests.head(sandboxd.url("/v1/files/h.txt"))
    assert r.status_code == 200 and r.content == b""
    assert r.headers["Content-Length"] == "5"
    assert r.headers["Content-Type"] == "application/octet-stream"
    assert requests.head(sandboxd.url("/v1/files/missing")).status_code == 404
    r = requests.head(sandboxd.url("/v1/files/"))
    assert r.status_code == 200 and r.content == b""


def test_traversal_forbidden(sandboxd):
    for method in ["GET", "PUT", "DELETE"]:
        st, _, body = raw(sandboxd, method, "/v1/files/%2E%2E/%2E%2E/etc/passwd",
                          body=b"x" if method == "PUT" else None)
        assert st == 403, method
        assert error_of(body) == ("PERMISSION_DENIED", "path traversal outside sandbox root is forbidden")


def test_symlink_escape_forbidden(sandboxd, tmp_path):
    outside = tmp_path / "out"
    outside.mkdir()
    (outside / "secret").write_text("s")
    os.symlink(str(outside), os.path.join(sandboxd.root, "link"))
    assert requests.get(sandboxd.url("/v1/files/link/secret")).status_code == 403
    assert requests.put(sandboxd.url("/v1/files/link/new.txt"), data=b"x").status_code == 403
    assert requests.put(sandboxd.url("/v1/files/link/sub/new.txt"), data=b"x").status_code == 403
    assert requests.delete(sandboxd.url("/v1/files/link/secret")).status_code == 403
    assert sorted(os.listdir(outside)) == ["secret"]


def test_inroot_symlink_followed(sandboxd):
    root = sandboxd.root
    open(os.path.join(root, "target.txt"), "w").write("T")
    os.symlink("target.txt", os.path.join(root, "ln"))
    assert requests.get(sandboxd.url("/v1/files/ln")).content == b"T"
    assert requests.put(sandboxd.url("/v1/files/ln"), data=b"new").status_code == 204
    assert os.path.islink(os.path.join(root, "ln"))
    assert open(os.path.join(root, "target.txt")).read() == "new"
    assert requests.delete(sandboxd.url("/v1/files/ln")).status_code == 204
    assert not os.path.exists(os.path.join(root, "target.txt"))
    os.symlink("nowhere", os.path.join(root, "dl"))
    assert requests.get(sandboxd.url("/v1/files/dl")).status_code == 404
    assert requests.delete(sandboxd.url("/v1/files/dl")).status_code == 204
    assert not os.path.lexists(os.path.join(root, "dl"))


def test_delete_file(sandboxd):
    open(os.path.join(sandboxd.root, "d.txt"), "w").write("x")
    assert requests.delete(sandboxd.url("/v1/files/d.txt")).status_code == 204
    r = requests.delete(sandboxd.url("/v1/files/d.txt"))
    assert r.status_code == 404 and error_of(r.content)[0] == "NOT_FOUND"


def test_delete_dirs(sandboxd):
    root = sandboxd.root
    os.makedirs(os.path.join(root, "full/deeper/deepest"))
    open(os.path.join(root, "full/deeper/f"), "w").write("x")
    os.mkdir(os.path.join(root, "empty"))
    r = requests.delete(sandboxd.url("/v1/files/full"))
    assert r.status_code == 409
    assert error_of(r.content) == ("CONFLICT", "directory is not empty; pass recursive=true to remove it")
    assert requests.delete(sandboxd.url("/v1/files/empty")).status_code == 204
    assert requests.delete(sandboxd.url("/v1/files/full?recursive=true")).status_code == 204
    assert os.listdir(root) == []


def test_delete_recursive_does_not_follow_symlinks(sandboxd, tmp_path):
    outside = tmp_path / "keep"
    outside.mkdir()
    (outside / "precious").write_text("p")
    os.makedirs(os.path.join(sandboxd.root, "tree/sub"))
    os.symlink(str(outside), os.path.join(sandboxd.root, "tree/sub/out"))
    assert requests.delete(sandboxd.url("/v1/files/tree?recursive=1")).status_code == 204
    assert (outside / "precious").read_text() == "p"
    assert os.listdir(sandboxd.root) == []


def test_delete_root(sandboxd):
    root = sandboxd.root
    os.makedirs(os.path.join(root, "a/b"))
    open(os.path.join(root, "f"), "w").write("x")
    r = requests.delete(sandboxd.url("/v1/files/"))
    assert r.status_code == 409
    assert error_of(r.content) == ("CONFLICT",
                                   "cannot delete the sandbox root; pass recursive=true to clear its contents")
    assert requests.delete(sandboxd.url("/v1/files/?recursive=true")).status_code == 204
    assert os.path.isdir(root) and os.listdir(root) == []


def test_delete_recursive_bool(sandboxd):
    os.mkdir(os.path.join(sandboxd.root, "d"))
    r = requests.delete(sandboxd.url("/v1/files/d?recursive=banana"))
    assert r.status_code == 400
    assert error_of(r.content) == ("INVALID_ARGUMENT", 'recursive "banana" must be a boolean')
    # existence is checked first
    assert requests.delete(sandboxd.url("/v1/files/missing?recursive=banana")).status_code == 404
    assert requests.delete(sandboxd.url("/v1/files/d?recursive=False")).status_code == 204
    assert requests.delete(sandboxd.url("/v1/files/missing?recursive=")).status_code == 404


def test_integration_flow(sandboxd):
    assert requests.put(sandboxd.url("/v1/files/notes/hello.txt"), data=b"hi").status_code == 204
    assert requests.get(sandboxd.url("/v1/files/notes/hello.txt")).content == b"hi"
    obj = requests.get(sandboxd.url("/v1/files/notes")).json()
    assert [e["name"] for e in obj["entries"]] == ["hello.txt"]
    assert requests.delete(sandboxd.url("/v1/files/notes/hello.txt")).status_code == 204
    assert requests.get(sandboxd.url("/v1/files/notes/hello.txt")).status_code == 404


def test_put_chunked_body(sandboxd):
    def gen():
        for i in range(50):
            yield b"chunk%02d-" % i
    r = requests.put(sandboxd.url("/v1/files/chunked.txt"), data=gen())
    assert r.status_code == 204
    assert open(os.path.join(sandboxd.root, "chunked.txt"), "rb").read() == b"".join(gen())


def test_put_expect_100_continue(sandboxd, tmp_path):
    import subprocess
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 << 20))
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-T", str(src),
                          "-H", "Expect: 100-continue", sandboxd.url("/v1/files/curl.bin")],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout == "204"
    assert open(os.path.join(sandboxd.root, "curl.bin"), "rb").read() == src.read_bytes()
    # an early error answers without reading the body
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "-T", str(src),
                          "-H", "Expect: 100-continue", sandboxd.url("/v1/files/x?mode=bad")],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.endswith("\n400")
