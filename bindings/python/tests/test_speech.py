"""sipp.speech and sipp.Voice: flite's speech, encoded by libsipp, whole and streamed."""

import io
import os
import struct
import subprocess
import unittest
import wave

import _support  # noqa: F401  (sets the import path)
import sipp

TEXT = "Hello there. This is a test. Goodbye!"


class SpeechTest(unittest.TestCase):
    def test_wav_is_the_voice_at_its_rate(self):
        with sipp.Voice("flite", voice="kal") as v:
            self.assertEqual((v.pipeline, v.sample_rate), ("flite", 8000))
            self.assertIn("slt", v.voices)
            w = wave.open(io.BytesIO(v.speech(TEXT)))
        self.assertEqual((w.getframerate(), w.getnchannels(), w.getsampwidth()), (8000, 1, 2))
        self.assertGreater(w.getnframes(), 8000)

    def test_pcm_is_24_khz_and_speed_shortens_it(self):
        normal = sipp.speech(TEXT, format="pcm")
        fast = sipp.speech(TEXT, format="pcm", speed=2.0)
        self.assertEqual(len(normal) % 2, 0)
        self.assertAlmostEqual(len(fast) / len(normal), 0.5, delta=0.12)

    def test_stream_is_the_same_audio_in_pieces(self):
        whole = sipp.speech(TEXT, format="wav")
        chunks = list(sipp.speech(TEXT, format="wav", stream=True))
        self.assertGreater(len(chunks), 3)  # a header, then every sentence as it is ready
        streamed = b"".join(chunks)
        self.assertEqual(struct.unpack("<I", streamed[40:44])[0], 0xFFFFFFFF)  # placeholder size
        self.assertEqual(streamed[44:], whole[44:])

    def test_every_format_has_its_signature(self):
        magic = {"wav": b"RIFF", "flac": b"fLaC", "opus": b"OggS"}
        for fmt, head in magic.items():
            self.assertEqual(sipp.speech("Hi.", format=fmt)[:4], head, fmt)
        mp3 = sipp.speech("Hi.", format="mp3")
        self.assertTrue(mp3[:3] == b"ID3" or (mp3[0] == 0xFF and mp3[1] & 0xE0 == 0xE0))

    def test_bad_input_raises_naming_it(self):
        with self.assertRaisesRegex(sipp.InvalidArgumentError, "alloy"):
            sipp.speech("Hi.", voice="alloy")
        with self.assertRaisesRegex(sipp.InvalidArgumentError, "aac"):
            sipp.speech("Hi.", format="aac")
        with self.assertRaisesRegex(sipp.InvalidArgumentError, "speed"):
            sipp.speech("Hi.", speed=9)
        with self.assertRaisesRegex(sipp.InvalidArgumentError, "empty"):
            sipp.speech("   ")

    def test_a_stream_left_early_stops(self):
        it = sipp.speech(" ".join(["This is a sentence."] * 20), format="pcm", stream=True)
        next(it)
        it.close()  # the voice stops within a sentence; nothing hangs


class PairTest(unittest.TestCase):
    """A synthetic Pocket TTS pair (sipp-synth --tts-pair pocket) through the binding: the same samples as
    `sipp speak`, and a stream left early stops between frames."""

    @classmethod
    def setUpClass(cls):
        _support.require_build()
        cls.dir = _support.tmpdir()
        prefix = os.path.join(cls.dir, "pocket")
        subprocess.run([_support.SYNTH, "--out", prefix, "--tts-pair", "pocket", "--vocab", _support.VOCAB,
                        *_support.TINY[:8], "--n-ff", "128"], check=True, capture_output=True, timeout=120)
        cls.model, cls.mmproj = prefix + ".gguf", prefix + "-mmproj.gguf"

    def test_same_samples_as_sipp_speak(self):
        out = os.path.join(self.dir, "cli.wav")
        subprocess.run([_support.SIPP, "speak", self.model, "--mmproj", self.mmproj, "Hello world.", "--seed", "3",
                        "-o", out], check=True, capture_output=True, timeout=300)
        with open(out, "rb") as f:
            cli = f.read()
        with sipp.Voice(self.model, mmproj=self.mmproj) as v:
            self.assertEqual((v.pipeline, v.sample_rate, v.voices), ("pockettts", 24000, ["default"]))
            self.assertEqual(v.speech("Hello world.", seed=3), cli)
            with self.assertRaisesRegex(sipp.InvalidArgumentError, "alloy"):
                v.speech("Hello world.", voice="alloy")

    def test_a_stream_left_early_stops(self):
        with sipp.Voice(self.model, mmproj=self.mmproj) as v:
            it = v.speech(" ".join(["One sentence here."] * 30), format="pcm", seed=1, stream=True)
            next(it)
            it.close()  # the voice stops at the next frame; the next call is served at once
            self.assertGreater(len(v.speech("Hi.", format="pcm", seed=1)), 0)


if __name__ == "__main__":
    unittest.main()
