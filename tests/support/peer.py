"""llama-server built from the pinned llama.cpp (deps/build-source.sh peer), started beside a test
to compare sipp's answers with: `start(test, args, log_name)` gives its base URL, or skips the test
naming why when the build is not in the cache; the server is stopped at the test's cleanup."""

import json
import os
import subprocess
import time
import urllib.error
import urllib.request

from tests.support import gateway as gw
from tests.support.ports import free_port

PEER = os.path.expanduser("~/.cache/sipp/build-80fb11ac73e66d89eae2c6a91d8a77428fa733ed-peer/bin")
READY_S = 60


def post(base, path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=gw.HTTP_TIMEOUT_S) as r:
        return json.loads(r.read())


def start(test, args, log_name):
    server = os.path.join(PEER, "llama-server")
    if not os.access(server, os.X_OK):
        test.skipTest(f"{server} is not built (deps/build-source.sh peer builds it)")
    port = free_port()
    log = open(os.path.join(gw.tmpdir(), log_name), "w+")
    # --no-repack: the source build's AMX kernels die of SIGILL (tilezero) on the Xeons with AMX
    # these tests run on; the comparisons are of tokens, text and scores, not of weight layouts.
    proc = subprocess.Popen([server, "--host", "127.0.0.1", "--port", str(port), "-t", "1", "-np", "1",
                             "--no-repack", *args],
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, LD_LIBRARY_PATH=PEER))

    def stop():
        proc.terminate()
        proc.wait(gw.STOP_TIMEOUT_S)
        log.close()
    test.addCleanup(stop)
    base = f"http://127.0.0.1:{port}"

    def ready():
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"llama-server exited with {proc.returncode}: {log.read()[-2000:]}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                return r.status == 200
        except (OSError, urllib.error.URLError):
            time.sleep(gw.POLL_S)
            return False
    gw.wait_until(ready, READY_S, "llama-server to load the model")
    return base
