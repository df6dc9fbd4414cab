"""`sipp MODEL --mmproj FILE --image PATH PROMPT` and `--audio`: images and audio from the command line,
through a synthetic model and synthetic projectors (sipp-synth --projector) that llama.cpp's libmtmd
loads. The answer and its stats (media_tokens, media_encoded) come back; every mistake is one line
naming it, exit status 2 for usage and 1 for a file or projector that is wrong."""

import json
import os
import shutil
import tempfile
import unittest

from tests.integration.common import make_model, run_sipp
from tests.support.images import png
from tests.support.models import make_projector

IMAGE_TOKENS = 36  # sipp-synth's llava projector: 48 px images in 8 px patches


class CliImagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sipp-cli-images-")
        d = cls.tmp.name
        cls.model = make_model(d, "m.gguf")
        cls.mmproj = make_projector(d, "llava", name="vision.gguf")
        cls.image = os.path.join(d, "a.png")
        with open(cls.image, "wb") as f:
            f.write(png(32, 24))
        cls.text = os.path.join(d, "notes.txt")
        with open(cls.text, "w") as f:
            f.write("not an image\n")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_an_image_answers_with_its_tokens_counted(self):
        r = run_sipp([self.model, "--mmproj", self.mmproj, "--image", self.image, "--image", self.image,
                      "What is this?", "--max-tokens", "4", "--temperature", "0", "--stats", "json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        stats = json.loads(r.stderr.strip().splitlines()[-1])
        self.assertEqual(stats["media_tokens"], 2 * IMAGE_TOKENS)
        self.assertEqual(stats["media_encoded"], 2)
        self.assertEqual(stats["generated_tokens"], 4)

    def test_mmproj_auto_takes_the_one_beside_the_model(self):
        d = os.path.join(self.tmp.name, "auto")
        os.makedirs(d, exist_ok=True)
        model = shutil.copy(self.model, os.path.join(d, "m.gguf"))
        shutil.copy(self.mmproj, os.path.join(d, "mmproj-m-f16.gguf"))
        r = run_sipp([model, "--mmproj", "auto", "--image", self.image, "Hi", "--max-tokens", "2"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--mmproj auto uses", r.stderr)
        shutil.copy(self.mmproj, os.path.join(d, "mmproj-m-q8_0.gguf"))
        r = run_sipp([model, "--mmproj", "auto", "--image", self.image, "Hi", "--max-tokens", "2"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("2 projectors beside the model", r.stderr)
        self.assertIn("mmproj-m-f16.gguf", r.stderr)

    def test_mistakes_are_named(self):
        cases = [
            ([self.model, "--image", self.image, "Hi"], 2, "need the model's projector: --mmproj FILE"),
            ([self.model, "--mmproj", self.mmproj, "--image", "/nonexistent.png", "Hi"], 1,
             "--image /nonexistent.png: No such file or directory"),
            ([self.model, "--mmproj", self.mmproj, "--audio", self.image, "Hi"], 1,
             "give a .wav, .mp3 or .flac file"),
            ([self.model, "--mmproj", self.model, "--image", self.image, "Hi"], 1, "is not a multimodal projector"),
            ([self.model, "--mmproj", self.mmproj, "--image", self.text, "Hi"], 1, "is not an image"),
        ]
        for args, status, message in cases:
            with self.subTest(message=message):
                r = run_sipp(args + ["--max-tokens", "2"])
                self.assertEqual(r.returncode, status, r.stderr)
                self.assertIn(message, r.stderr)
                self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main()
