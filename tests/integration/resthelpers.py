"""Small HTTP helpers for the REST tests: raw requests over http.client (no path normalisation)."""
import http.client
import json
import socket


def raw(d, method, path, body=None, headers=None, timeout=30):
    """Sends `method path` exactly as given; returns (status, headers dict lower-cased, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.rest_port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def error_of(body):
    obj = json.loads(body)
    assert set(obj) == {"code", "message"}, obj
    return obj["code"], obj["message"]


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def pid_rss_kib(pid):
    """Private_Dirty + anonymous RSS in KiB from smaps_rollup (falls back to VmRSS)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
