"""Bounded waiting: every loop of the tests has a deadline and says what did not happen."""

import subprocess
import time

POLL_S = 0.1


def wait_until(fn, timeout, what, poll=POLL_S):
    """Calls fn until it returns something true, and returns that; AssertionError naming `what` (and
    fn's last answer) after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(poll)
    raise AssertionError(f"{what} did not happen within {timeout} s (last: {last!r})")


def stop_process(proc, timeout=30):
    """SIGTERM to a process this started, then SIGKILL if it has not exited within timeout seconds;
    waits for it either way."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
