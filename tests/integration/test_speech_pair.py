"""A speech pair through sipp and through llama.cpp's own llama-tts gives the same samples: Pocket TTS
and Qwen3-TTS.

sipp-synth --tts-pair writes a backbone and its projector with random weights: the Pocket pair's
end-of-speech head fires at once, so a sentence is the pipeline's few tail frames; the Qwen3-TTS pair's end
token wins from the second frame on, so a sentence is one frame of 16 codes, 1920 samples (llama-tts runs
its projector on 4 threads whatever the cores: a frame takes it tens of seconds on a busy 2-core machine).
llama-tts is built from the pinned source by
deps/build-llama-tts.sh, against the same artifact, and run from the artifact directory (where ggml finds
its CPU module). With the same text and seed (and the same speaker reference clip, and for Qwen3-TTS the
same language), `sipp speak` must give the same 16-bit samples, within 2 of 32767; another seed must
not."""

import array
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import wave

from tests.integration.common import BUILD, ROOT, SYNTH, VOCAB_DIR, run_sipp

TEXT = "Hello world."
TOLERANCE = 2
LLAMA_TTS_TIMEOUT = 600  # its projector runs 4 threads whatever the cores: slow on a small, shared machine
RATE = 24000
SPEECH_TIMEOUT = 300  # a bound for a thread's wait, not a time the speech must take
ATTEMPTS = 5  # two calls at once, until they overlap
QWEN3_HOP = 1920  # samples a frame: the DAC decoder's strides 8 * 5 * 4 * 3, after two 2x upsamplers


def samples(path):
    with wave.open(path) as w:
        return w.getframerate(), array.array("h", w.readframes(w.getnframes()))


class PairChecks:
    """What every pair must hold: PAIR (sipp-synth's --tts-pair), PIPELINE (what `sipp speak` reports),
    SHAPE (the backbone's flags)."""

    PAIR = PIPELINE = None
    SHAPE = []

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix=f"sipp-pair-{cls.PAIR}-")
        cls.prefix = os.path.join(cls.dir, cls.PAIR)
        subprocess.run([SYNTH, "--out", cls.prefix, "--tts-pair", cls.PAIR, *cls.SHAPE], check=True,
                       capture_output=True, timeout=120)
        cls.model, cls.mmproj = cls.prefix + ".gguf", cls.prefix + "-mmproj.gguf"
        p = subprocess.run(["bash", os.path.join(ROOT, "deps", "build-llama-tts.sh"), BUILD], capture_output=True,
                           text=True, timeout=600)
        if p.returncode != 0:
            raise AssertionError(f"llama-tts did not build: {p.stderr}")
        cls.llama_tts = p.stdout.strip()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def reference(self, seed, *extra):
        out = os.path.join(self.dir, f"ref-{seed}{''.join(extra).replace('/', '_')}.wav")
        if not os.path.exists(out):
            p = subprocess.run([self.llama_tts, "-m", self.model, "-mm", self.mmproj, "-p", TEXT, "--seed", str(seed),
                                *extra, "-o", out], cwd=os.path.join(BUILD, "artifact"), capture_output=True,
                               text=True, timeout=LLAMA_TTS_TIMEOUT)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        return samples(out)

    def speak(self, seed, *extra):
        out = os.path.join(self.dir, f"sipp-{seed}.wav")
        p = run_sipp(["speak", self.model, "--mmproj", self.mmproj, TEXT, "--seed", str(seed), "-o", out, *extra])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(self.PIPELINE, p.stderr)
        return samples(out)

    def speaker_clip(self):
        speaker = os.path.join(self.dir, "speaker.wav")  # a voice to speak in: flite's, 16 kHz (resampled to 24)
        if not os.path.exists(speaker):
            run_sipp(["speak", "flite", "This is my voice, speaking for reference.", "-o", speaker], check=True)
        return speaker

    def assert_same(self, ref, ours):
        self.assertEqual(len(ours), len(ref))
        self.assertLessEqual(max(abs(a - b) for a, b in zip(ref, ours)), TOLERANCE)

    def test_same_samples_as_llama_tts(self):
        (r1, ref), (r2, ours) = self.reference(1), self.speak(1)
        self.assertEqual((r1, r2), (RATE, RATE))
        self.assertGreater(len(ref), 0)
        self.assertTrue(any(ref), "the reference is silence")
        self.assert_same(ref, ours)

    def test_same_samples_with_a_speaker_reference(self):
        speaker = self.speaker_clip()
        _, ref = self.reference(1, "--tts-speaker-file", speaker)
        _, ours = self.speak(1, "--speaker", speaker)
        self.assert_same(ref, ours)
        _, plain = self.reference(1)
        self.assertNotEqual(ref, plain, "the speaker reference changed nothing")

    def test_named_speakers_are_voices(self):
        """speakers: a voice under a name speaks like `sipp speak --speaker` its clip (itself llama-tts's
        --tts-speaker-file); "default" stays the pair's own."""
        sipp = python_binding()
        speaker = self.speaker_clip()
        _, with_clip = self.speak(1, "--speaker", speaker)
        _, plain = self.speak(1)
        with sipp.Voice(self.model, mmproj=self.mmproj, speakers={"mine": speaker}) as v:
            self.assertEqual(v.voices, ["default", "mine"])
            self.assertEqual(samples_of(v.speech(TEXT, voice="mine", format="wav", seed=1)), with_clip)
            self.assertEqual(samples_of(v.speech(TEXT, format="wav", seed=1)), plain)
            with self.assertRaises(sipp.SippError) as e:
                v.speech(TEXT, voice="yours")
            self.assertIn("default, mine", str(e.exception))
        with self.assertRaises(sipp.SippError) as e:
            sipp.Voice(self.model, mmproj=self.mmproj, speakers={"default": speaker})
        self.assertIn("default", str(e.exception))

    def test_another_seed_is_other_audio(self):
        _, one = self.speak(1)
        _, two = self.speak(2)
        self.assertEqual(len(one), len(two))
        self.assertNotEqual(one, two)


class PocketPairTest(PairChecks, unittest.TestCase):
    PAIR, PIPELINE = "pocket", "pockettts"
    SHAPE = ["--vocab", os.path.join(VOCAB_DIR, "ggml-vocab-llama-spm.gguf"), "--n-embd", "64", "--n-layer", "2",
             "--n-head", "4", "--n-head-kv", "4", "--n-ff", "128", "--n-ctx", "512"]

    def test_speed_and_formats_apply_to_the_pair(self):
        _, normal = self.speak(1)
        _, fast = self.speak(1, "--speed", "2")
        self.assertEqual(len(fast), -(-len(normal) // 2))  # resampled: ceil(n / 2)
        out = os.path.join(self.dir, "pair.flac")
        run_sipp(["speak", self.model, "--mmproj", self.mmproj, TEXT, "--seed", "1", "-o", out], check=True)
        with open(out, "rb") as f:
            self.assertEqual(f.read(4), b"fLaC")

    def test_batch_frames_is_refused_for_pocket(self):
        sipp = python_binding()
        with self.assertRaises(sipp.SippError) as e:
            sipp.Voice(self.model, mmproj=self.mmproj, batch_frames=True)
        self.assertIn("batch_frames", str(e.exception))

    def test_parallel_states_speak_at_once_the_same(self):
        """parallel=2: two calls generate at once, each in its own state, and each gives what one alone
        gives (and what `sipp speak` gives)."""
        sipp = python_binding()
        long_text = " ".join([TEXT] * 6)
        _, alone = self.speak(1)
        with sipp.Voice(self.model, mmproj=self.mmproj, threads=1, parallel=2) as v:
            solo = v.speech(long_text, format="pcm", seed=1)
            results, spans = [None, None], [None, None]

            def one(i):
                t0 = time.monotonic()
                results[i] = v.speech(long_text, format="pcm", seed=1)
                spans[i] = (t0, time.monotonic())

            threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(results, [solo, solo])
            first = v.speech(TEXT, format="wav", seed=1)
        self.assertEqual(samples_of(first), alone)
        self.assertLess(max(a for a, _ in spans), min(b for _, b in spans), "the two calls did not overlap")


class Qwen3PairTest(PairChecks, unittest.TestCase):
    """Qwen's own tokenizer (the talker's text vocabulary)."""

    PAIR, PIPELINE = "qwen3tts", "qwen3tts"
    SHAPE = ["--vocab", os.path.join(VOCAB_DIR, "ggml-vocab-qwen2.gguf"), "--n-embd", "64", "--n-layer", "2",
             "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--n-ctx", "1024"]

    def test_one_frame_then_the_end_token(self):
        _, ref = self.reference(1)
        self.assertEqual(len(ref), QWEN3_HOP)

    def test_same_samples_in_another_language(self):
        _, ref = self.reference(1, "--tts-lang", "zh")
        _, ours = self.speak(1, "--language", "zh")
        self.assert_same(ref, ours)
        _, english = self.reference(1)
        self.assertNotEqual(ref, english, "the language changed nothing")

    def test_an_unknown_language_is_refused(self):
        p = run_sipp(["speak", self.model, "--mmproj", self.mmproj, TEXT, "--language", "xx", "-o",
                      os.path.join(self.dir, "xx.wav")])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("xx", p.stderr)

    def test_batched_frames_alone_are_llama_tts_samples(self):
        """batch_frames: sipp's own frame loop on a shared backbone context (tts_batch.c), not the helper's;
        one call alone decodes llama-tts's rows in llama-tts's order."""
        sipp = python_binding()
        _, ref = self.reference(1)
        with sipp.Voice(self.model, mmproj=self.mmproj, threads=1, parallel=2, batch_frames=True) as v:
            ours = samples_of(v.speech(TEXT, format="wav", seed=1))
            frames, decodes = v.frames
        self.assert_same(ref, ours)
        self.assertEqual((frames, decodes), (1, 1))  # the one frame's row, in one decode


class Qwen3EndlessPairTest(unittest.TestCase):
    """`sipp-synth --tts-pair qwen3tts --tts-endless`: the end token never wins, so every sentence runs to the
    frame cap; long generations without llama-tts (which takes tens of seconds a frame here)."""

    FRAMES = 24
    LONG_TEXT = "Hello world. This is a test of speech. Goodbye for now!"  # three sentences

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sipp-pair-endless-")
        prefix = os.path.join(cls.dir, "endless")
        subprocess.run([SYNTH, "--out", prefix, "--tts-pair", "qwen3tts", "--tts-endless", *Qwen3PairTest.SHAPE],
                       check=True, capture_output=True, timeout=120)
        cls.model, cls.mmproj = prefix + ".gguf", prefix + "-mmproj.gguf"

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def two_at_once(self, v):
        results = [None, None]
        together = threading.Barrier(2)

        def one(i):
            together.wait(SPEECH_TIMEOUT)
            results[i] = v.speech(self.LONG_TEXT, format="pcm", seed=1, max_frames=self.FRAMES)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def test_frames_fed_back_are_llama_tts_frames(self):
        """Three frames, each after the first decoded from the one before (the projector's hidden state plus
        <tts_pad>, at the next position): the same samples from llama-tts -n 3, from the helper's loop and
        from sipp's own (batch_frames)."""
        p = subprocess.run(["bash", os.path.join(ROOT, "deps", "build-llama-tts.sh"), BUILD], capture_output=True,
                           text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = os.path.join(self.dir, "ref-3.wav")
        p = subprocess.run([p.stdout.strip(), "-m", self.model, "-mm", self.mmproj, "-p", TEXT, "--seed", "1", "-n",
                            "3", "-o", out], cwd=os.path.join(BUILD, "artifact"), capture_output=True, text=True,
                           timeout=LLAMA_TTS_TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        _, ref = samples(out)
        self.assertEqual(len(ref), 3 * QWEN3_HOP)
        sipp = python_binding()
        for batch_frames in (False, True):
            with sipp.Voice(self.model, mmproj=self.mmproj, threads=1, batch_frames=batch_frames) as v:
                ours = samples_of(v.speech(TEXT, format="wav", seed=1, max_frames=3))
            self.assertEqual(len(ours), len(ref))
            self.assertLessEqual(max(abs(a - b) for a, b in zip(ref, ours)), TOLERANCE, batch_frames)

    def test_every_sentence_runs_to_the_cap(self):
        sipp = python_binding()
        with sipp.Voice(self.model, mmproj=self.mmproj, threads=1) as v:
            pcm = v.speech(self.LONG_TEXT, format="pcm", seed=1, max_frames=self.FRAMES)
        self.assertEqual(len(pcm) // 2, 3 * self.FRAMES * QWEN3_HOP)

    def test_states_of_their_own_speak_at_once_the_same(self):
        sipp = python_binding()
        with sipp.Voice(self.model, mmproj=self.mmproj, threads=1, parallel=2) as v:
            solo = v.speech(self.LONG_TEXT, format="pcm", seed=1, max_frames=self.FRAMES)
            self.assertEqual(self.two_at_once(v), [solo, solo])
            self.assertEqual(v.frames, (0, 0))

    def test_batched_frames_share_the_backbone_decodes(self):
        """Two calls at once on batch_frames: their frames' rows go through shared decodes (fewer decodes
        than rows), each call runs to its cap, and a call alone afterwards gives what it gave before. Two
        threads started together may still not overlap on a loaded machine (one may run to its end before
        the other is scheduled), so the pair is tried up to ATTEMPTS times; without batching every try has
        a decode per row."""
        sipp = python_binding()
        with sipp.Voice(self.model, mmproj=self.mmproj, threads=1, parallel=2, batch_frames=True) as v:
            solo = v.speech(self.LONG_TEXT, format="pcm", seed=1, max_frames=self.FRAMES)
            self.assertEqual(v.frames, (3 * self.FRAMES,) * 2)
            tries = []
            while len(tries) < ATTEMPTS and not any(d < f for f, d in tries):
                before = v.frames
                results = self.two_at_once(v)
                self.assertEqual([len(r) for r in results], [len(solo)] * 2)
                tries.append(tuple(a - b for a, b in zip(v.frames, before)))
            again = v.speech(self.LONG_TEXT, format="pcm", seed=1, max_frames=self.FRAMES)
        self.assertTrue(all(f == 2 * 3 * self.FRAMES for f, _ in tries), tries)
        self.assertTrue(any(d < f for f, d in tries), f"no decode held both calls' rows (frames, decodes): {tries}")
        self.assertEqual(again, solo)


class SynthPairUsageTest(unittest.TestCase):
    """sipp-synth's usage errors for a pair: exit status 2 and the flag named, no file written."""

    def synth(self, *args):
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([SYNTH, "--out", os.path.join(d, "x"), "--vocab",
                                os.path.join(VOCAB_DIR, "ggml-vocab-qwen2.gguf"), *args], capture_output=True,
                               text=True, timeout=60)
            return p.returncode, p.stderr, os.listdir(d)

    def test_bad_pairs_are_usage_errors(self):
        for args, words in [(["--tts-pair", "bark"], ["unknown pair 'bark'", "qwen3tts"]),
                            (["--tts-pair", "qwen3tts", "--tts-pair", "pocket"], ["give one pair"]),
                            (["--tts-pair", "qwen3tts", "--stop-token", "<|im_end|>"], ["--stop-token"]),
                            (["--tts-pair", "qwen3tts", "--layers", "1"], ["--layers"]),
                            (["--tts-pair", "pocket", "--tts-endless"], ["--tts-endless", "qwen3tts"])]:
            rc, err, files = self.synth(*args)
            self.assertEqual(rc, 2, (args, err))
            for w in words:
                self.assertIn(w, err)
            self.assertEqual(files, [])


def python_binding():
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import sipp
    return sipp


def samples_of(wav_bytes):
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        f.write(wav_bytes)
        f.flush()
        return samples(f.name)[1]


if __name__ == "__main__":
    unittest.main()
