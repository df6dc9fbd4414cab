"""Images and audio in chats through the Python binding: sipp.local(mmproj=...) with sipp.image() and
sipp.audio() parts, on a synthetic model and synthetic projectors (sipp-synth --projector) that
llama.cpp's libmtmd loads and runs for real.

What is checked: an image costs the projector's tokens and is encoded once; the same chat again
reuses its KV cells (nothing encoded, the same greedy answer); two images are two spans; audio runs
through an audio projector; and every refusal names what is wrong: a projector of another width, a
file that is no projector, a truncated one, a chat with an image for a model without a projector,
bytes that are no image, a remote URL, audio for a vision projector."""

import base64
import io
import math
import os
import struct
import unittest
import wave
import zlib

import _support
import sipp

IMAGE_TOKENS = 36  # sipp-synth's llava: 48 px images in 8 px patches
AUDIO_TOKENS = 750  # qwen2a: one 30 s chunk


def png(width, height, shade=0):
    rows = b"".join(b"\0" + bytes((x * 40 + y * 7 + shade) % 256 for x in range(width * 3)) for y in range(height))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def write(name, data):
    path = os.path.join(_support.tmpdir(), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def wav_bytes(seconds=1.0, rate=16000):
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i / 10))) for i in range(int(rate * seconds))))
    return out.getvalue()


def local(mmproj, **kw):
    return sipp.local(_support.model(), backend="cpu", mmproj=mmproj, ctx_size=2048, parallel=2,
                      threads=_support.THREADS, **kw)


class ImagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = sipp.Client()
        cls.client.add("m", local(_support.projector("llava")))
        cls.a = write("a.png", png(32, 24))
        cls.b = write("b.png", png(20, 40, shade=90))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def chat(self, *parts, **kw):
        return self.client.chat([{"role": "user", "content": list(parts)}], max_tokens=6, temperature=0, **kw)

    def test_an_image_is_encoded_once_and_its_cells_reused(self):
        first = self.chat("What is in this picture?", sipp.image(self.a))
        self.assertTrue(first.text)
        self.assertEqual(first.stats["media_tokens"], IMAGE_TOKENS)
        self.assertEqual(first.stats["media_encoded"], 1)
        self.assertGreater(first.stats["encode_ms"], 0)
        again = self.chat("What is in this picture?", sipp.image(self.a))
        self.assertEqual(again.text, first.text)
        self.assertEqual(again.stats["media_encoded"], 0, "the same image again must not be encoded again")
        self.assertEqual(again.stats["cached_tokens"], again.stats["prompt_tokens"] - 1)

    def test_two_images_are_two_spans_and_another_image_is_encoded(self):
        r = self.chat("Compare:", sipp.image(self.a), sipp.image(self.b))
        self.assertEqual(r.stats["media_tokens"], 2 * IMAGE_TOKENS)
        self.assertEqual(r.stats["media_encoded"], 2)
        other = self.chat("Compare:", sipp.image(self.b), sipp.image(self.a))
        self.assertEqual(other.stats["media_encoded"], 2, "a swapped pair shares no image prefix")

    def test_a_text_stream_goes_on_while_images_are_encoded(self):
        # one slot streams text; the other reads chats with images: every request finishes, and the
        # stream's tokens keep coming between the encodes (one image per engine step)
        stream = self.client.query("Once upon a time", stream=True, max_tokens=64, temperature=0, ignore_eos=True)
        pieces = iter(stream)
        next(pieces)  # generating
        answers = [self.chat("Describe:", sipp.image(p)) for p in (self.a, self.b, self.a)]
        rest = list(pieces)
        self.assertTrue(all(r.text for r in answers))
        self.assertGreater(len(rest), 0)
        self.assertEqual(stream.response.usage["completion_tokens"], 64)

    def test_bad_media_is_refused_by_name(self):
        junk = {"type": "image_url", "image_url": {"url": "data:image/png;base64," +
                                                   base64.b64encode(b"not an image").decode()}}
        with self.assertRaises(sipp.InvalidArgumentError) as cm:
            self.chat("hi", junk)
        self.assertIn("'messages[0].content[1].image_url.url' is not an image", str(cm.exception))
        remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
        with self.assertRaises(sipp.InvalidArgumentError) as cm:
            self.chat("hi", remote)
        self.assertIn("does not fetch images", str(cm.exception))
        with self.assertRaises(sipp.InvalidArgumentError) as cm:
            self.chat("hi", sipp.audio(write("a.wav", wav_bytes(0.1))))
        self.assertIn("takes images only", str(cm.exception))
        # the engine goes on serving after refusals
        self.assertTrue(self.chat("Still there?", sipp.image(self.a)).text)


class AudioTest(unittest.TestCase):
    def test_audio_through_an_audio_projector(self):
        with sipp.Client() as client:
            client.add("a", local(_support.projector("qwen2a")))
            r = client.chat([{"role": "user", "content": ["Listen:", sipp.audio(write("b.wav", wav_bytes()))]}],
                            max_tokens=4, temperature=0)
            self.assertTrue(r.text)
            self.assertEqual(r.stats["media_tokens"], AUDIO_TOKENS)
            self.assertEqual(r.stats["media_encoded"], 1)


class ProjectorRefusalsTest(unittest.TestCase):
    def load(self, mmproj):
        with sipp.Client() as client:
            client.add("x", local(mmproj))

    def test_a_projector_of_another_width(self):
        with self.assertRaises(sipp.ModelError) as cm:
            self.load(_support.projector("llava", n_embd=128))
        self.assertIn("gives 128-wide embeddings but model", str(cm.exception))
        self.assertIn("takes 64", str(cm.exception))

    def test_a_file_that_is_no_projector_and_a_truncated_one(self):
        with self.assertRaises(sipp.ModelError) as cm:
            self.load(_support.model())
        self.assertIn("is not a multimodal projector", str(cm.exception))
        with open(_support.projector("llava"), "rb") as f:
            data = f.read()
        cut = write("mmproj-cut.gguf", data[: len(data) * 2 // 3])
        with self.assertRaises(sipp.ModelError) as cm:
            self.load(cut)
        self.assertIn("truncated", str(cm.exception))

    def test_an_image_for_a_model_without_a_projector(self):
        with sipp.Client() as client:
            client.add("plain", sipp.local(_support.model(), backend="cpu", ctx_size=512, parallel=1,
                                           threads=_support.THREADS))
            with self.assertRaises(sipp.InvalidArgumentError) as cm:
                client.chat([{"role": "user", "content": ["hi", sipp.image(write("c.png", png(8, 8)))]}], max_tokens=2)
            self.assertIn("was loaded without a projector", str(cm.exception))

    def test_media_helpers_refuse_what_they_cannot_read(self):
        with self.assertRaises(sipp.InvalidArgumentError):
            sipp.image(os.path.join(_support.tmpdir(), "missing.png"))
        with self.assertRaises(sipp.InvalidArgumentError):
            sipp.audio("clip.ogg")


if __name__ == "__main__":
    unittest.main()
