"""sipp-synth's projectors are real: llama.cpp's mtmd loads them beside a synthetic text model and
encodes images and audio through them (build/tests/mtmd_probe, tests/tools/mtmd_probe.c, which calls
libmtmd directly with no sipp code in between).

Also pins down what mtmd does with a bad projector, which libsipp must know before it hands one over:
a projector whose width is not the text model's, or a truncated file, is refused with an error
return (mtmd_init_from_file gives NULL), not an abort; so is media of a modality it lacks. An "mlp"
projector without its output tensor crashes the process: that one libsipp must refuse itself.
"""
import math
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import unittest
import wave
import zlib

from tests.support.models import make_model, make_projector
from tests.support.paths import BUILD, ROOT

PROBE = os.path.join(BUILD, "tests", "mtmd_probe")
# a JPEG photo from the pinned llama.cpp's own mtmd tests (build/llama/source is its checkout)
JPEG = os.path.join(ROOT, "build", "llama", "source", "tools", "mtmd", "test-1.jpeg")
TIMEOUT_S = 180
ENV = dict(os.environ, GGML_NO_BACKTRACE="1")  # an assertion would print a gdb backtrace

N_EMBD = 64
IMAGE_TOKENS = 36  # sipp-synth's defaults: 48 px in 8 px patches
AUDIO_CHUNK_TOKENS = 750  # a 30 s Whisper chunk: 3000 mel frames, halved by the convolution and the pool
SAMPLE_RATE = 16000

# mtmd_probe's exit statuses
EXIT_INIT, EXIT_MEDIA, EXIT_TOKENIZE = 1, 2, 3


def write_png(path, width, height):
    """An RGB gradient PNG, written with zlib and struct alone."""
    # each row: filter type 0, then R, G, B per pixel
    rows = b"".join(b"\x00" + b"".join(bytes((x * 255 // width, y * 255 // height, (x * y) % 256))
                                       for x in range(width))
                    for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
                + chunk(b"IEND", b""))


def write_wav(path, seconds, rate=SAMPLE_RATE, channels=1):
    """A 440 Hz tone, 16-bit PCM."""
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        frames = (struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) * channels
                  for i in range(int(seconds * rate)))
        w.writeframes(b"".join(frames))


def parse(stdout):
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)


class SynthProjectorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sipp-mtmd-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.png, cls.wav = os.path.join(cls.tmp, "gradient.png"), os.path.join(cls.tmp, "tone.wav")
        write_png(cls.png, 40, 30)
        write_wav(cls.wav, 1.0)
        cls.model = make_model(cls.tmp, n_embd=N_EMBD)
        cls.vision = make_projector(cls.tmp, "llava", n_embd=N_EMBD)
        cls.audio = make_projector(cls.tmp, "qwen2a", n_embd=N_EMBD)
        # a missing probe is a broken build (make test-bins), not a reason to skip
        if not os.access(PROBE, os.X_OK):
            raise AssertionError(f"{PROBE} is not built (make {PROBE})")

    def probe(self, projector, media, model=None):
        return subprocess.run([PROBE, model or self.model, projector, media], capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=ENV)

    def assert_encoded(self, p, modality, media_tokens):
        self.assertEqual(p.returncode, 0, p.stderr)
        out = parse(p.stdout)
        self.assertEqual(out["modality"], modality)
        self.assertEqual(int(out["embd_width"]), N_EMBD)
        self.assertEqual(int(out["media_tokens"]), media_tokens)
        # every chunk was evaluated: the positions are the text's and the media's
        self.assertEqual(int(out["n_past"]), media_tokens + int(out["text_tokens"]))

    def test_vision_png_and_jpeg(self):
        if not os.path.isfile(JPEG):
            raise AssertionError(f"{JPEG} is missing (make deps)")
        for image in (self.png, JPEG):
            with self.subTest(image=os.path.basename(image)):
                self.assert_encoded(self.probe(self.vision, image), "vision", IMAGE_TOKENS)

    def test_image_size_sets_the_token_count(self):
        small = make_projector(self.tmp, "llava", name="small.gguf", n_embd=N_EMBD, image_size=32, patch_size=8)
        self.assert_encoded(self.probe(small, self.png), "vision", 16)

    def test_audio_wav(self):
        self.assert_encoded(self.probe(self.audio, self.wav), "audio", AUDIO_CHUNK_TOKENS)

    def test_audio_resampled(self):
        # mtmd decodes and resamples any rate and channel count to 16 kHz mono
        stereo = os.path.join(self.tmp, "stereo.wav")
        write_wav(stereo, 0.5, rate=44100, channels=2)
        self.assert_encoded(self.probe(self.audio, stereo), "audio", AUDIO_CHUNK_TOKENS)

    def test_width_mismatch_is_an_error_not_an_abort(self):
        for kind, media in (("llava", self.png), ("qwen2a", self.wav)):
            with self.subTest(kind=kind):
                wide = make_projector(self.tmp, kind, name=f"wide-{kind}.gguf", n_embd=2 * N_EMBD)
                p = self.probe(wide, media)
                self.assertEqual(p.returncode, EXIT_INIT, p.stderr)
                self.assertIn(f"mismatch between text model (n_embd = {N_EMBD}) and mmproj (n_embd = {2 * N_EMBD})",
                              p.stderr)

    def test_truncated_projector_is_an_error(self):
        with open(self.vision, "rb") as f:
            data = f.read()
        for keep in (16, 2000, len(data) // 2):
            with self.subTest(keep=keep):
                cut = os.path.join(self.tmp, f"cut-{keep}.gguf")
                with open(cut, "wb") as f:
                    f.write(data[:keep])
                p = self.probe(cut, self.png)
                self.assertEqual(p.returncode, EXIT_INIT, p.stderr)
                self.assertIn("Failed to load CLIP model", p.stderr)

    def test_media_of_a_missing_modality_is_an_error(self):
        # audio for a vision-only projector: the helper refuses to read it
        p = self.probe(self.vision, self.wav)
        self.assertEqual(p.returncode, EXIT_MEDIA, p.stderr)
        # an image for an audio-only projector: mtmd_tokenize returns 2
        p = self.probe(self.audio, self.png)
        self.assertEqual(p.returncode, EXIT_TOKENIZE, p.stderr)
        self.assertIn("does not support vision input", p.stderr)

    def test_mlp_without_its_output_tensor_crashes_mtmd(self):
        # What libsipp must refuse before mtmd sees it: at the pinned commit clip.cpp's loader takes
        # mm.2.weight as optional for "mlp" and clip_n_mmproj_embd then dereferences it, so such a file
        # kills the process (SIGSEGV) inside mtmd_init_from_file. sipp_gguf_inspect reports no width
        # for it (projector_n_embd -1; test_models). Renaming the tensor keeps the file well-formed.
        with open(self.vision, "rb") as f:
            data = f.read()
        self.assertEqual(data.count(b"mm.2.weight"), 1)
        broken = os.path.join(self.tmp, "no-output.gguf")
        with open(broken, "wb") as f:
            f.write(data.replace(b"mm.2.weight", b"mm.9.weight"))
        p = self.probe(broken, self.png)
        self.assertEqual(p.returncode, -signal.SIGSEGV, p.stderr[-2000:])

    def test_text_model_is_no_projector(self):
        p = self.probe(self.model, self.png)
        self.assertEqual(p.returncode, EXIT_INIT, p.stderr)


if __name__ == "__main__":
    unittest.main()
