"""sandboxd while idle (issue 16): it sleeps until there is work, so an idle sandbox costs no
wakeups, and a kept-alive connection is still closed at --http-idle-timeout although the REST
watchdog sleeps until the earliest deadline instead of ticking (the header deadline, which the
watchdog alone enforces, is test_rest_slow_clients.py's)."""
import socket
import time

from proc_threads import voluntary_switches


def health(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /v1/health HTTP/1.0\r\nHost: x\r\n\r\n")
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    return reply.split(b"\r\n", 1)[0]


def test_idle_sandboxd_does_not_wake_up(start_sandboxd):
    d = start_sandboxd()
    assert b" 200 " in health(d.rest_port)
    time.sleep(0.5)  # the connection's thread has gone
    before = voluntary_switches(d.proc.pid)
    time.sleep(2.0)  # the point: a window of idleness
    woke = voluntary_switches(d.proc.pid) - before
    # A 250 ms tick would be 8 wakeups here; none is expected, 2 allow for a stray signal.
    assert woke <= 2, f"{woke} wakeups in 2 s of idle"


def test_kept_alive_connection_cut_at_idle_timeout(start_sandboxd):
    d = start_sandboxd(extra_args=["--http-idle-timeout", "1s"])
    time.sleep(0.3)  # the watchdog asleep with no deadline: the connection must wake it
    s = socket.create_connection(("127.0.0.1", d.rest_port), timeout=10)
    try:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 200"), head
        t0 = time.monotonic()
        # Kept alive: nothing more than the rest of the reply until the server closes it.
        while s.recv(4096):
            pass
        secs = time.monotonic() - t0
    finally:
        s.close()
    assert 0.7 <= secs <= 2.5, secs
