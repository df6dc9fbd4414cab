"""sipp speak with flite (a voice with no model file) and the audio encoders (src/speech/).

Every format is decoded by a real decoder from Debian (flac, lame, opusdec, Python's wave module for
WAV and raw PCM) and must give exactly the samples the voice made at the rate the format declares:
the encoders' headers (WAV sizes, FLAC STREAMINFO, MP3's LAME tag, Ogg Opus granule positions) are
what make that so. flite's speech is checked against flite's own command line for its length, and for
not being silence."""

import array
import math
import os
import shutil
import struct
import subprocess
import tempfile
import unittest
import wave

from tests.integration.common import SIPP, run_sipp
from tests.support.models import make_model, make_projector

SENTENCE = "The quick brown fox jumps over the lazy dog."
TEXT = "Hello world. This is sipp speaking! How are you today?"
DECODE_TIMEOUT = 60


def wav_samples(path):
    with wave.open(path) as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return w.getframerate(), array.array("h", w.readframes(w.getnframes()))


def rms(samples):
    return math.sqrt(sum(s * s for s in samples) / max(1, len(samples)))


def decode(tool_args, out):
    p = subprocess.run(tool_args, capture_output=True, text=True, timeout=DECODE_TIMEOUT)
    assert p.returncode == 0, f"{tool_args}: {p.stderr}"
    return wav_samples(out)


class SpeakFormatsTest(unittest.TestCase):
    """One clip in every format; each decodes to the same samples count at its declared rate."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sipp-speak-")
        cls.wav = os.path.join(cls.dir, "ref.wav")
        run_sipp(["speak", "flite", TEXT, "-o", cls.wav], check=True)
        cls.rate, cls.samples = wav_samples(cls.wav)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def speak(self, fmt, *extra):
        out = os.path.join(self.dir, f"out.{fmt}")
        p = run_sipp(["speak", "flite", TEXT, "--format", fmt, "-o", out, *extra])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("wrote", p.stderr)
        return out

    def test_wav_is_flite_at_16_khz_and_speech(self):
        self.assertEqual(self.rate, 16000)
        self.assertGreater(len(self.samples), self.rate)  # more than a second for three sentences
        self.assertGreater(rms(self.samples), 300)

    def test_pcm_is_24_khz_s16le(self):
        out = self.speak("pcm")
        n = os.path.getsize(out) // 2
        self.assertEqual(n, math.ceil(len(self.samples) * 24000 / 16000))

    def test_flac_decodes_to_the_same_samples(self):
        out = self.speak("flac")
        rate, s = decode(["flac", "-d", "-f", "-s", out, "-o", out + ".wav"], out + ".wav")
        self.assertEqual((rate, s), (self.rate, self.samples))  # lossless

    def test_mp3_decodes_to_the_same_length(self):
        out = self.speak("mp3")
        rate, s = decode(["lame", "--decode", "--quiet", out, out + ".wav"], out + ".wav")
        self.assertEqual((rate, len(s)), (self.rate, len(self.samples)))

    def test_opus_decodes_to_the_same_length_at_48_khz(self):
        out = self.speak("opus")
        with open(out, "rb") as f:
            self.assertEqual(f.read(4), b"OggS")
        rate, s = decode(["opusdec", "--quiet", "--rate", "48000", out, out + ".wav"], out + ".wav")
        self.assertEqual((rate, len(s)), (48000, len(self.samples) * 3))

    def test_format_follows_the_extension(self):
        out = os.path.join(self.dir, "by-name.flac")
        run_sipp(["speak", "flite", SENTENCE, "-o", out], check=True)
        with open(out, "rb") as f:
            self.assertEqual(f.read(4), b"fLaC")

    def test_resampled_length_is_exact(self):
        out = self.speak("wav", "--sample-rate", "24000")
        rate, s = wav_samples(out)
        self.assertEqual((rate, len(s)), (24000, math.ceil(len(self.samples) * 1.5)))


class SpeakStreamTest(unittest.TestCase):
    """-o - streams: a WAV with placeholder sizes, then the same samples as the file."""

    def stream(self, fmt):
        p = subprocess.run([SIPP, "speak", "flite", TEXT, "--format", fmt, "-o", "-"], capture_output=True,
                           timeout=DECODE_TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_streamed_wav_has_placeholder_sizes_and_the_samples(self):
        data = self.stream("wav")
        self.assertEqual(data[:4], b"RIFF")
        self.assertEqual(struct.unpack("<I", data[4:8])[0], 0xFFFFFFFF)
        self.assertEqual(data[36:40], b"data")
        self.assertEqual(struct.unpack("<I", data[40:44])[0], 0xFFFFFFFF)
        with tempfile.TemporaryDirectory() as d:
            ref = os.path.join(d, "ref.wav")
            run_sipp(["speak", "flite", TEXT, "-o", ref], check=True)
            _, s = wav_samples(ref)
        self.assertEqual(data[44:], s.tobytes())

    def test_streamed_flac_and_opus_decode(self):
        decoders = {"flac": lambda src, out: ["flac", "-d", "-f", "-s", src, "-o", out],
                    "opus": lambda src, out: ["opusdec", "--quiet", src, out]}
        with tempfile.TemporaryDirectory() as d:
            for fmt, command in decoders.items():
                src, out = os.path.join(d, "s." + fmt), os.path.join(d, fmt + ".wav")
                with open(src, "wb") as f:
                    f.write(self.stream(fmt))
                _, s = decode(command(src, out), out)
                self.assertGreater(len(s), 16000, fmt)


class FliteSpeechTest(unittest.TestCase):
    """flite's speech is speech: as long as flite itself makes it, in every voice, and not silence."""

    def test_duration_matches_flite_itself(self):
        if not shutil.which("flite"):
            self.skipTest("flite's command line is not installed (apt-get install flite)")
        with tempfile.TemporaryDirectory() as d:
            ours, theirs = os.path.join(d, "sipp.wav"), os.path.join(d, "flite.wav")
            run_sipp(["speak", "flite", SENTENCE, "--voice", "slt", "-o", ours], check=True)
            subprocess.run(["flite", "-voice", "slt", "-t", SENTENCE, "-o", theirs], check=True,
                           timeout=DECODE_TIMEOUT)
            (r1, a), (r2, b) = wav_samples(ours), wav_samples(theirs)
            self.assertEqual(r1, r2)
            self.assertGreater(len(a), 0.9 * len(b))
            self.assertLess(len(a), 1.1 * len(b))
            self.assertGreater(rms(a), 0.5 * rms(b))

    def test_every_voice_speaks_at_its_rate(self):
        with tempfile.TemporaryDirectory() as d:
            for voice, want in (("kal", 8000), ("kal16", 16000), ("slt", 16000), ("rms", 16000), ("awb", 16000)):
                out = os.path.join(d, voice + ".wav")
                run_sipp(["speak", "flite", SENTENCE, "--voice", voice, "-o", out], check=True)
                rate, s = wav_samples(out)
                self.assertEqual(rate, want, voice)
                self.assertGreater(len(s), rate, voice)  # the sentence takes more than a second
                self.assertGreater(rms(s), 300, voice)

    def test_speed_changes_the_length_not_the_rate(self):
        with tempfile.TemporaryDirectory() as d:
            lengths = {}
            for speed in ("0.5", "1", "2"):
                out = os.path.join(d, speed + ".wav")
                run_sipp(["speak", "flite", SENTENCE, "--speed", speed, "-o", out], check=True)
                rate, s = wav_samples(out)
                self.assertEqual(rate, 16000)
                lengths[speed] = len(s)
            self.assertAlmostEqual(lengths["2"] / lengths["1"], 0.5, delta=0.12)
            self.assertAlmostEqual(lengths["0.5"] / lengths["1"], 2.0, delta=0.4)


class SpeakErrorsTest(unittest.TestCase):
    """Bad input is refused with a message naming it, and no file is left behind."""

    def refuse(self, args, code, words):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "x.wav")
            p = run_sipp(["speak", *args, "-o", out])
            self.assertEqual(p.returncode, code, p.stderr)
            for w in words:
                self.assertIn(w, p.stderr)
            self.assertFalse(os.path.exists(out))

    def test_empty_text(self):
        self.refuse(["flite", "  \n "], 1, ["empty"])

    def test_unknown_voice_lists_the_voices(self):
        self.refuse(["flite", "Hi.", "--voice", "alloy"], 1, ["alloy", "kal, kal16, slt, rms, awb"])

    def test_speed_out_of_range(self):
        self.refuse(["flite", "Hi.", "--speed", "5"], 2, ["--speed"])
        self.refuse(["flite", "Hi.", "--speed", "0.1"], 2, ["--speed"])

    def test_unknown_format(self):
        self.refuse(["flite", "Hi.", "--format", "aac"], 2, ["aac", "wav, pcm, flac, mp3, opus"])

    def test_missing_model_file(self):
        self.refuse(["/nonexistent/tts.gguf", "Hi.", "--mmproj", "/nonexistent/mm.gguf"], 1, ["/nonexistent"])


class SpeakPairRefusalsTest(unittest.TestCase):
    """A GGUF voice is a backbone and its speech projector: anything else is refused by name."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sipp-speak-pair-")
        cls.text = make_model(cls.dir)
        cls.vision = make_projector(cls.dir, "llava")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def refuse(self, args, words):
        out = os.path.join(self.dir, "x.wav")
        p = run_sipp(["speak", *args, "Hello.", "-o", out])
        self.assertEqual(p.returncode, 1, p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)
        self.assertFalse(os.path.exists(out))

    def test_a_backbone_needs_its_projector(self):
        self.refuse([self.text], ["needs its projector", "--mmproj"])

    def test_a_vision_projector_generates_no_audio(self):
        self.refuse([self.text, "--mmproj", self.vision], ["generates no audio", self.vision])

    def test_a_text_model_is_no_projector(self):
        self.refuse([self.text, "--mmproj", self.text], ["not a multimodal projector"])


if __name__ == "__main__":
    unittest.main()
