"""Bounded waiting: every loop of the tests has a deadline and says what did not happen."""

import subprocess
import threading
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


def run_progressing(cmd, stall_s, safety_s, **popen_kw):
    """Runs cmd to its end, bounded by its progress rather than by a time a loaded machine can reach:
    it is killed only after stall_s seconds without a line on its stderr (a program run this way
    writes one as it progresses), or past the generous safety stop safety_s. Returns a
    subprocess.CompletedProcess with text stdout and stderr; AssertionError naming the bound when
    one was reached."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, **popen_kw)
    out, err, last = [], [], [time.monotonic()]

    def pump_err():
        for line in proc.stderr:
            err.append(line)
            last[0] = time.monotonic()

    readers = [threading.Thread(target=pump_err, daemon=True),
               threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)]
    for t in readers:
        t.start()
    start = time.monotonic()
    while proc.poll() is None:
        now = time.monotonic()
        why = (f"made no progress (no line on stderr) for {stall_s} s" if now - last[0] > stall_s else
               f"ran past the safety stop of {safety_s} s" if now - start > safety_s else None)
        if why:
            proc.kill()
            proc.wait()
            finish(proc, readers)
            raise AssertionError(f"{cmd[:2]} {why}; its stderr ended:\n{''.join(err)[-3000:]}")
        time.sleep(POLL_S * 10)
    finish(proc, readers)
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(out), "".join(err))


def finish(proc, readers):
    """Joins the threads reading an ended process's pipes, then closes the pipes."""
    for t in readers:
        t.join(POLL_S * 100)
    proc.stdout.close()
    proc.stderr.close()
