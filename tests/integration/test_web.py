"""End-to-end test of the web page that `sipp serve` serves at "/", in a real browser.

Two gateways run on loopback on a tiny synthetic model: an open one, and one with a [[tokens]]
bearer token. tests/integration/web/web.test.js then drives Debian's Chromium (headless, through
the npm package playwright-core pinned in web/package.json; no browser is downloaded) through the
page: pick the target, stream an answer, read the status strip, stop a long answer, clear, the
keyboard-only flow, a 375 px screen, and the token. Screenshots go to build/test-artifacts/web-*.png.

npm installs playwright-core (`npm ci --ignore-scripts`) when web/node_modules lacks it. Without
/usr/bin/chromium or Node.js the test is skipped: `make setup` installs both.
"""

import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from tests.support import npm  # noqa: E402
from tests.support.images import png  # noqa: E402
from tests.support.models import make_projector  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WEB_TESTS = os.path.join(HERE, "web")
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts")
CHROMIUM = os.environ.get("SIPP_CHROMIUM", "/usr/bin/chromium")
TARGET = "tiny"
VISION_TARGET = "tiny-vision"
TOKEN_ENV = "SIPP_WEB_TEST_TOKEN"
TOKEN = "web-test-secret-7f3a"
NODE_TIMEOUT_S = 150  # the script cuts itself off earlier (RUN_TIMEOUT_MS); this is the backstop


def text(b):
    """Output of a killed process, which subprocess may leave as bytes even with text=True."""
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")



class WebPageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [what for what, ok in (("Chromium at " + CHROMIUM, os.access(CHROMIUM, os.X_OK)),
                                         ("node", shutil.which("node")), ("npm", shutil.which("npm"))) if not ok]
        if missing:
            raise unittest.SkipTest(f"{', '.join(missing)} not installed (make setup installs them)")
        npm.ensure(WEB_TESTS, "playwright-core")
        cls.servers = []
        model = gw.model(TARGET)
        # Two slots and room for a long answer (2048 tokens a slot): the stop check needs one running.
        cls.open = cls.start(lambda: gw.serve_model(model, "--parallel", "2", "--ctx-size", "4096"))
        cls.auth = cls.start(lambda: gw.serve_config(
            f'[[tokens]]\nenv = "{TOKEN_ENV}"\ncaller = "web-test"\n\n' + gw.local_target(TARGET, model, parallel=1),
            env={TOKEN_ENV: TOKEN}))
        # A target with a projector (sipp-synth's llava, as wide as the model) and a PNG to attach.
        d = gw.tmpdir()
        mmproj = make_projector(d, "llava", name="mmproj-web.gguf")  # 64 wide, as gw.TINY
        cls.image = os.path.join(d, "web.png")
        with open(cls.image, "wb") as f:
            f.write(png(24, 16))
        cls.vision = cls.start(lambda: gw.serve_config(
            gw.local_target(VISION_TARGET, model, parallel=1, extra=f'mmproj = "{mmproj}"')))

    @classmethod
    def start(cls, make):
        try:
            g = make()
        except BaseException:
            cls.tearDownClass()
            raise
        cls.servers.append(g)
        return g

    @classmethod
    def tearDownClass(cls):
        for g in getattr(cls, "servers", []):
            g.stop()  # only the process this test started

    def test_page_in_chromium(self):
        os.makedirs(ARTIFACTS, exist_ok=True)
        cmd = ["node", os.path.join(WEB_TESTS, "web.test.js"), "--base", self.open.base, "--target", TARGET,
               "--artifacts", ARTIFACTS, "--auth-base", self.auth.base, "--auth-token", TOKEN,
               "--vision-base", self.vision.base, "--vision-target", VISION_TARGET, "--image", self.image]
        env = dict(os.environ, SIPP_CHROMIUM=CHROMIUM)
        try:
            r = subprocess.run(cmd, cwd=WEB_TESTS, capture_output=True, text=True, timeout=NODE_TIMEOUT_S,
                               stdin=subprocess.DEVNULL, env=env)
            out, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = f"{text(e.stdout)}{text(e.stderr)}\nnode was killed after {NODE_TIMEOUT_S} s", -1
        counts = [line for line in out.splitlines() if line.startswith("web: ")]
        print(f"\n{counts[-1] if counts else 'web: no result line'} (screenshots in {ARTIFACTS})",
              file=sys.stderr)
        if rc != 0:
            self.fail(f"the browser test failed (exit {rc}):\n{out}\n--- open gateway log ---\n"
                      f"{self.open.text()[-3000:]}\n--- auth gateway log ---\n{self.auth.text()[-2000:]}")


if __name__ == "__main__":
    unittest.main()
