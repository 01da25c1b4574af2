"""Polling for a condition, shared by the integration tests."""
import time


def wait_for(fn, timeout=10, what="condition", interval=0.05):
    """fn()'s first truthy value within timeout seconds; else AssertionError naming `what` and
    fn()'s last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} within {timeout}s (last: {last!r})")


def poll(cond, timeout=10, interval=0.02):
    """cond()'s first truthy value within timeout seconds, else its value once more after the
    deadline (falsy unless it just came true): for `assert poll(...)`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    return cond()


def read_until(pipe, text, timeout=10):
    """What a subprocess pipe gives (raw reads of its fd, decoded) until it contains text; else
    AssertionError with what came. Reads nothing past the chunk holding text; communicate()
    still gets the rest."""
    import os
    import select
    deadline = time.monotonic() + timeout
    got = b""
    while text.encode() not in got:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([pipe], [], [], left)[0]:
            raise AssertionError(f"{text!r} not read within {timeout}s (got: {got!r})")
        chunk = os.read(pipe.fileno(), 65536)
        if not chunk:
            raise AssertionError(f"end of output before {text!r} (got: {got!r})")
        got += chunk
    return got.decode(errors="replace")
