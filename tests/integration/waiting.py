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
