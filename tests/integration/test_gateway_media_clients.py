"""Images and audio through the official npm clients (issue 30), against `sipp serve`: `openai`
chat.completions.create with an image_url data URL, responses.create with input_image and
audio.transcriptions.create with a WAV file; `@anthropic-ai/sdk` messages.create with a base64 image
block; `ollama` chat and generate with images (tests/integration/js/media_clients.mjs). Each gets an
answer whose prompt count is larger than the same request's without the media.

The vision target is a tiny model with a projector sipp-synth writes (--projector llava), the audio
target the same model with --projector qwen2a. The clients are the pinned ones of js/package-lock.json,
installed as test_gateway_agent_clients_js does; without node and npm the test is skipped.
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_support as gw  # noqa: E402
from test_gateway_agent_clients_js import JS_DIR, NODE_TIMEOUT_S, ensure_clients  # noqa: E402
from tests.support.audio import wav  # noqa: E402
from tests.support.images import png  # noqa: E402
from tests.support.models import make_projector  # noqa: E402

CHECKED = ["openai-chat-image_url", "openai-responses-input_image", "anthropic-messages-image",
           "ollama-chat-images", "ollama-generate-images", "openai-audio-transcriptions"]
IMAGE_SIZE = 16


@unittest.skipUnless(shutil.which("node") and shutil.which("npm"), "node and npm are needed for the npm client tests")
class MediaClientsTest(unittest.TestCase):
    def test_npm_clients_send_images_and_audio(self):
        ensure_clients()
        d = os.path.join(gw.tmpdir(), "media-clients")
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "model.gguf")
        shutil.copy(gw.model(), model)
        vision, audio = make_projector(d, "llava"), make_projector(d, "qwen2a")
        image, clip = os.path.join(d, "picture.png"), os.path.join(d, "clip.wav")
        with open(image, "wb") as f:
            f.write(png(IMAGE_SIZE, IMAGE_SIZE))
        with open(clip, "wb") as f:
            f.write(wav())
        extra = "\nmmproj_offload = false\nmax_tokens = 8"
        g = gw.serve_config(gw.local_target("eyes", path=model, parallel=1, ctx=2048, extra=f'mmproj = "{vision}"' + extra) +
                            gw.local_target("ears", path=model, parallel=1, ctx=2048, extra=f'mmproj = "{audio}"' + extra))
        try:
            r = subprocess.run(["node", "media_clients.mjs", g.base, "eyes", "ears", image, clip], cwd=JS_DIR,
                               capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        finally:
            g.stop()
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        self.assertTrue(lines, f"no result from node:\n{r.stdout}\n{r.stderr}")
        result = json.loads(lines[-1])
        self.assertTrue(result["ok"], f"{result}\n{r.stderr}\ngateway log:\n{g.text()[-3000:]}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(result["checked"]), sorted(CHECKED))


if __name__ == "__main__":
    unittest.main()
