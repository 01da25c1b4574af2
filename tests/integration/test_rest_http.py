"""Download semantics inherited from Go http.ServeContent: Range, conditionals, HEAD."""
import email.utils
import os
import time

import requests

from resthelpers import raw

DATA = bytes(range(256)) * 4  # 1024 bytes


def put(d, name="r.bin", data=DATA):
    assert requests.put(d.url(f"/v1/files/{name}"), data=data).status_code == 204


def test_single_range(sandboxd):
    put(sandboxd)
    cases = {"bytes=0-9": (0, 9), "bytes=1000-": (1000, 1023), "bytes=-24": (1000, 1023),
             "bytes=10-10": (10, 10), "bytes=1000-5000": (1000, 1023), "bytes= 5-6 ": (5, 6),
             "bytes=-5000": (0, 1023)}
    for rng, (a, b) in cases.items():
        r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"Range": rng})
        assert r.status_code == 206, rng
        assert r.headers["Content-Range"] == f"bytes {a}-{b}/1024", rng
        assert r.headers["Content-Length"] == str(b - a + 1)
        assert r.content == DATA[a:b + 1], rng


def test_range_unsatisfiable(sandboxd):
    put(sandboxd)
    for rng in ["bytes=1024-", "bytes=5000-6000", "bytes=-0"]:
        r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"Range": rng})
        assert r.status_code == 416, rng
        assert r.headers["Content-Range"] == "bytes */1024"
    put(sandboxd, "empty", b"")
    r = requests.get(sandboxd.url("/v1/files/empty"), headers={"Range": "bytes=0-"})
    assert r.status_code == 416 and r.headers["Content-Range"] == "bytes */0"


def test_range_invalid(sandboxd):
    put(sandboxd)
    for rng in ["bytes=5-2", "bytes=a-b", "items=0-1", "bytes=--1", "bytes=1"]:
        r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"Range": rng})
        assert r.status_code == 416, rng


def test_multiple_ranges_multipart(sandboxd):
    import email.parser
    import email.policy
    put(sandboxd)
    r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"Range": "bytes=0-1,5-6,-3"})
    assert r.status_code == 206
    ct = r.headers["Content-Type"]
    assert ct.startswith("multipart/byteranges; boundary=")
    assert "Content-Range" not in r.headers
    assert int(r.headers["Content-Length"]) == len(r.content)
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + ct.encode() + b"\r\n\r\n" + r.content)
    parts = list(msg.iter_parts())
    assert [p["Content-Range"] for p in parts] == ["bytes 0-1/1024", "bytes 5-6/1024", "bytes 1021-1023/1024"]
    assert [p.get_payload(decode=True) for p in parts] == [DATA[0:2], DATA[5:7], DATA[1021:]]
    assert all(p["Content-Type"] == "application/octet-stream" for p in parts)
    # ranges adding up to more than the file: the whole file
    r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"Range": "bytes=0-1000,0-1000"})
    assert r.status_code == 200 and r.content == DATA
    # HEAD: same headers, no body
    r = requests.head(sandboxd.url("/v1/files/r.bin"), headers={"Range": "bytes=0-1,5-6"})
    assert r.status_code == 206 and r.content == b"" and int(r.headers["Content-Length"]) > 4


def test_range_on_head(sandboxd):
    put(sandboxd)
    r = requests.head(sandboxd.url("/v1/files/r.bin"), headers={"Range": "bytes=0-9"})
    assert r.status_code == 206 and r.headers["Content-Length"] == "10" and r.content == b""


def test_conditionals(sandboxd):
    put(sandboxd)
    r = requests.get(sandboxd.url("/v1/files/r.bin"))
    lm = r.headers["Last-Modified"]
    mtime = email.utils.parsedate_to_datetime(lm).timestamp()
    past = email.utils.formatdate(mtime - 3600, usegmt=True)
    future = email.utils.formatdate(mtime + 3600, usegmt=True)

    r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"If-Modified-Since": lm})
    assert r.status_code == 304 and r.content == b""
    assert r.headers.get("Last-Modified") == lm
    assert requests.get(sandboxd.url("/v1/files/r.bin"), headers={"If-Modified-Since": past}).status_code == 200
    assert requests.get(sandboxd.url("/v1/files/r.bin"), headers={"If-Modified-Since": "garbage"}).status_code == 200
    assert requests.head(sandboxd.url("/v1/files/r.bin"), headers={"If-Modified-Since": future}).status_code == 304

    assert requests.get(sandboxd.url("/v1/files/r.bin"), headers={"If-Unmodified-Since": past}).status_code == 412
    assert requests.get(sandboxd.url("/v1/files/r.bin"), headers={"If-Unmodified-Since": lm}).status_code == 200
    assert requests.get(sandboxd.url("/v1/files/r.bin"), headers={"If-None-Match": "*"}).status_code == 304
    assert requests.get(sandboxd.url("/v1/files/r.bin"), headers={"If-Match": '"x"'}).status_code == 412

    # If-Range: matching date honours Range, other dates/etags send the full file
    r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"Range": "bytes=0-3", "If-Range": lm})
    assert r.status_code == 206 and r.content == DATA[:4]
    r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"Range": "bytes=0-3", "If-Range": past})
    assert r.status_code == 200 and r.content == DATA
    r = requests.get(sandboxd.url("/v1/files/r.bin"), headers={"Range": "bytes=0-3", "If-Range": '"etag"'})
    assert r.status_code == 200


def test_rfc850_and_asctime_dates(sandboxd):
    put(sandboxd)
    future = time.time() + 86400
    t = time.gmtime(future)
    rfc850 = time.strftime("%A, %d-%b-%y %H:%M:%S GMT", t)
    asctime = time.strftime("%a %b %e %H:%M:%S %Y", t)
    for v in [rfc850, asctime]:
        assert requests.get(sandboxd.url("/v1/files/r.bin"), headers={"If-Modified-Since": v}).status_code == 304, v


def test_last_modified_matches_mtime(sandboxd):
    put(sandboxd)
    p = os.path.join(sandboxd.root, "r.bin")
    os.utime(p, (1700000000, 1700000000))
    r = requests.get(sandboxd.url("/v1/files/r.bin"))
    assert r.headers["Last-Modified"] == "Tue, 14 Nov 2023 22:13:20 GMT"
    listing = requests.get(sandboxd.url("/v1/files/")).json()["entries"]
    assert listing[0]["modified_at"] == "2023-11-14T22:13:20Z"


def test_get_with_body_ignored(sandboxd):
    put(sandboxd, "g.txt", b"g")
    st, _, body = raw(sandboxd, "GET", "/v1/files/g.txt", body=b"ignored body")
    assert st == 200 and body == b"g"


def test_multiple_ranges_large(sandboxd):
    import email.parser
    import email.policy
    data = os.urandom(10 << 20)
    put(sandboxd, "big.bin", data)
    r = requests.get(sandboxd.url("/v1/files/big.bin"), headers={"Range": "bytes=0-3000000,5000000-9000000"})
    assert r.status_code == 206
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + r.headers["Content-Type"].encode() + b"\r\n\r\n" + r.content)
    parts = [p.get_payload(decode=True) for p in msg.iter_parts()]
    assert parts == [data[0:3000001], data[5000000:9000001]]
