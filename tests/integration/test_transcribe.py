"""`sipp transcribe` against whisper-cli, both built from the same whisper.cpp (deps/whisper.lock) on the
same ggml: on a synthetic whisper model (sipp-synth --whisper), the same clip gives the same transcript,
segment by segment, with the same start and end times, for WAV, MP3 and FLAC clips at 8, 16, 44.1 and 48
kHz, mono and stereo, and for the npm package's real speech (samples/jfk.mp3). whisper-cli runs with its
defaults (beam 5, best of 5, the temperature fallback), the same threads and the CPU backend; sipp with
its own defaults, which are whisper-cli's.

Random weights make random text, which is what makes the comparison strict: any difference in the
samples (decoding, resampling), the mel, the decoding parameters or the fallback schedule changes the
tokens. Bad input is refused with an error that names it: bytes that are not audio, a truncated file,
zero samples, a clip over --max-seconds, an unknown language.
"""
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import wave

from tests.support.paths import BUILD, ROOT, SIPP, SYNTH, VOCAB_DIR

PEER_DIR = os.path.join(BUILD, "whisper-peer")
WHISPER_CLI = os.path.join(PEER_DIR, "whisper-cli")
THREADS = "2"
TIMEOUT_S = 600
SENTENCE = "the quick brown fox jumps over the lazy dog, and then it runs away into the forest"


def cache_dir():
    return os.environ.get("SIPP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sipp")


def build_peer():
    """whisper-cli and whisper-server from the pinned source against this build's artifact (cached)."""
    if not os.path.exists(WHISPER_CLI):
        subprocess.run(["bash", os.path.join(ROOT, "deps", "build-whisper.sh"), "tools",
                        os.path.join(BUILD, "artifact"), PEER_DIR], check=True, timeout=3600,
                       stdout=subprocess.DEVNULL)


def read_wav(path):
    with wave.open(path, "rb") as w:
        frames = w.readframes(w.getnframes())
        return w.getframerate(), list(struct.unpack("<%dh" % (len(frames) // 2), frames))


def write_wav(path, rate, samples, channels=1):
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        if channels == 1:
            w.writeframes(struct.pack("<%dh" % len(samples), *samples))
        else:  # the second channel a quieter copy, so that the mixdown is not one channel doubled
            inter = []
            for s in samples:
                inter += [s, s // 2]
            w.writeframes(struct.pack("<%dh" % len(inter), *inter))


def resample(samples, rate_in, rate_out):
    """Linear interpolation: the clip at another rate, the same length in seconds."""
    n_out = int(len(samples) * rate_out / rate_in)
    out = []
    for i in range(n_out):
        x = i * rate_in / rate_out
        j = int(x)
        a = samples[min(j, len(samples) - 1)]
        b = samples[min(j + 1, len(samples) - 1)]
        out.append(int(a + (b - a) * (x - j)))
    return out


def per_byte_text(raw):
    """Bytes as sipp prints them: each byte of an invalid UTF-8 sequence becomes U+FFFD."""
    s = raw.decode("utf-8", errors="surrogateescape")
    return "".join("\ufffd" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in s)


def whisper_cli(model, clip, language, out_base):
    """whisper-cli's segments: [(start ms, end ms, text)] from its JSON output, and its language."""
    subprocess.run([WHISPER_CLI, "-m", model, "-f", clip, "-l", language, "-t", THREADS, "-ng", "-np",
                    "-oj", "-of", out_base], check=True, timeout=TIMEOUT_S, capture_output=True)
    with open(out_base + ".json", "rb") as f:
        raw = f.read()
    # whisper-cli escapes only quotes and backslashes: control characters stay raw (strict=False), and
    # a token's bytes need not be UTF-8
    doc = json.loads(raw.decode("utf-8", errors="surrogateescape"), strict=False)
    segs = [(s["offsets"]["from"], s["offsets"]["to"], per_byte_text(s["text"].encode("utf-8", "surrogateescape")))
            for s in doc["transcription"]]
    return segs, doc["result"]["language"]


def sipp_transcribe(model, clip, *extra, check=True):
    return subprocess.run([SIPP, "transcribe", model, clip, "--threads", THREADS, "--backend", "cpu", *extra],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=check)


def sipp_segments(model, clip, language=None):
    args = ["--format", "verbose_json"] + (["--language", language] if language else [])
    doc = json.loads(sipp_transcribe(model, clip, *args).stdout)
    return [(round(s["start"] * 1000), round(s["end"] * 1000), s["text"]) for s in doc["segments"]], doc


class TestTranscribe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        build_peer()
        cls.tmp = tempfile.mkdtemp(prefix="sipp-transcribe-")
        cls.model = os.path.join(cls.tmp, "ggml-test.bin")
        subprocess.run([SYNTH, "--whisper", "test", "--out", cls.model, "--vocab",
                        os.path.join(VOCAB_DIR, "ggml-vocab-gpt-2.gguf")], check=True, timeout=TIMEOUT_S)
        speech = os.path.join(cls.tmp, "speech-8k.wav")
        subprocess.run(["flite", "-t", SENTENCE, "-o", speech], check=True, timeout=60)
        rate, samples = read_wav(speech)
        cls.clips = {"wav 8 kHz": speech}
        for name, out_rate, channels in (("wav 16 kHz", 16000, 1), ("wav 44.1 kHz", 44100, 1),
                                         ("wav 48 kHz stereo", 48000, 2)):
            path = os.path.join(cls.tmp, name.replace(" ", "-") + ".wav")
            write_wav(path, out_rate, resample(samples, rate, out_rate), channels)
            cls.clips[name] = path
        src = cls.clips["wav 44.1 kHz"]
        cls.clips["mp3 44.1 kHz"] = os.path.join(cls.tmp, "speech.mp3")
        subprocess.run(["lame", "--quiet", src, cls.clips["mp3 44.1 kHz"]], check=True, timeout=120)
        cls.clips["flac 48 kHz stereo"] = os.path.join(cls.tmp, "speech.flac")
        subprocess.run(["flac", "-s", "-f", "-o", cls.clips["flac 48 kHz stereo"], cls.clips["wav 48 kHz stereo"]],
                       check=True, timeout=120)
        jfk = glob.glob(os.path.join(cache_dir(), "npm", "nodejs-whisper-0.3.1-*.d", "package", "cpp",
                                     "whisper.cpp", "samples", "jfk.mp3"))
        if jfk:
            cls.clips["jfk.mp3 (real speech)"] = jfk[0]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_same_transcript_as_whisper_cli(self):
        self.assertIn("jfk.mp3 (real speech)", self.clips, "the npm package's samples/jfk.mp3 is in the cache")
        for name, clip in self.clips.items():
            with self.subTest(clip=name):
                ref, ref_lang = whisper_cli(self.model, clip, "auto", os.path.join(self.tmp, "ref"))
                got, doc = sipp_segments(self.model, clip)
                self.assertEqual(doc["language"], ref_lang)
                self.assertGreater(len(ref), 0)
                self.assertEqual(got, ref)
                self.assertEqual(doc["text"], "".join(t for _, _, t in ref).strip(" \n"))

    def test_given_language_and_translate_match(self):
        clip = self.clips["mp3 44.1 kHz"]
        ref, ref_lang = whisper_cli(self.model, clip, "de", os.path.join(self.tmp, "ref-de"))
        got, doc = sipp_segments(self.model, clip, "de")
        self.assertEqual((doc["language"], doc["language_probability"]), ("de", 1.0))
        self.assertEqual(got, ref)

    def test_formats(self):
        clip = self.clips["wav 16 kHz"]
        _, doc = sipp_segments(self.model, clip)
        srt = sipp_transcribe(self.model, clip, "--format", "srt").stdout
        vtt = sipp_transcribe(self.model, clip, "--format", "vtt").stdout
        text = sipp_transcribe(self.model, clip, "--format", "text").stdout
        js = json.loads(sipp_transcribe(self.model, clip, "--format", "json").stdout)
        self.assertEqual(js, {"text": doc["text"]})
        self.assertEqual(text, doc["text"] + "\n")
        self.assertTrue(srt.startswith("1\n00:00:00,000 --> "), srt[:40])
        self.assertTrue(vtt.startswith("WEBVTT\n\n00:00:00.000 --> "), vtt[:40])
        self.assertEqual(srt.count(" --> "), len(doc["segments"]))
        for seg in doc["segments"]:
            self.assertLessEqual(seg["start"], seg["end"])
            self.assertTrue(all(isinstance(t, int) for t in seg["tokens"]))
            self.assertLessEqual(seg["avg_logprob"], 0.0)
            self.assertTrue(0.0 <= seg["no_speech_prob"] <= 1.0)

    def test_word_timestamps(self):
        out = sipp_transcribe(self.model, self.clips["wav 16 kHz"], "--format", "verbose_json", "--words").stdout
        doc = json.loads(out)
        self.assertIn("words", doc)
        for w in doc["words"]:
            self.assertLessEqual(w["start"], w["end"])

    def test_bad_input_is_refused_by_name(self):
        cases = []
        not_audio = os.path.join(self.tmp, "notes.wav")
        with open(not_audio, "w") as f:
            f.write("this is a text file, not audio\n" * 20)
        cases.append(("not audio", not_audio, [], "notes.wav"))
        with open(self.clips["wav 16 kHz"], "rb") as f:
            whole = f.read()
        truncated = os.path.join(self.tmp, "truncated.wav")
        with open(truncated, "wb") as f:
            f.write(whole[: len(whole) // 3])
        cases.append(("truncated", truncated, [], "truncated.wav"))
        with open(self.clips["flac 48 kHz stereo"], "rb") as f:
            whole = f.read()
        truncated_flac = os.path.join(self.tmp, "truncated.flac")
        with open(truncated_flac, "wb") as f:
            f.write(whole[: len(whole) // 4])
        cases.append(("truncated flac", truncated_flac, [], "truncated.flac"))
        empty = os.path.join(self.tmp, "empty.wav")
        write_wav(empty, 16000, [])
        cases.append(("zero samples", empty, [], "empty.wav"))
        cases.append(("over max seconds", self.clips["wav 16 kHz"], ["--max-seconds", "1"], "max_audio_seconds"))
        cases.append(("unknown language", self.clips["wav 16 kHz"], ["--language", "xx"], "language 'xx'"))
        for what, clip, extra, named in cases:
            with self.subTest(what=what):
                r = sipp_transcribe(self.model, clip, *extra, check=False)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(named, r.stderr)
                self.assertNotIn("Traceback", r.stderr)

    def test_python_and_node_bindings_give_the_cli_transcript(self):
        clip = self.clips["flac 48 kHz stereo"]
        _, want = sipp_segments(self.model, clip)
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"), SIPP_BUILD=BUILD,
                   SIPP_PYTHON_BACKEND="cpu")
        py = ("import json, sys, sipp\n"
              "print(json.dumps(sipp.transcribe(sys.argv[1], sys.argv[2], backend='cpu', threads=2)))")
        r = subprocess.run([sys.executable, "-c", py, self.model, clip], env=env, capture_output=True, text=True,
                           timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), want)
        js = ("require(process.argv[1]).transcribe(process.argv[2], process.argv[3], "
              "{backend: 'cpu', threads: 2}).then((t) => console.log(JSON.stringify(t)), "
              "(e) => { console.error(e.code, e.message); process.exit(1); });")
        r = subprocess.run(["node", "-e", js, os.path.join(ROOT, "bindings", "node"), self.model, clip],
                           env=dict(os.environ, SIPP_BUILD=BUILD, SIPP_NODE_BACKEND="cpu"), capture_output=True,
                           text=True, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), want)
        r = subprocess.run([sys.executable, "-c", "import sipp, sys\n"
                            "try:\n sipp.transcribe(sys.argv[1], b'not audio at all' * 10)\n"
                            "except sipp.InvalidArgumentError as e: print('refused:', e)", self.model],
                           env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertIn("refused:", r.stdout, r.stderr)

    def test_not_a_whisper_model(self):
        gguf = os.path.join(VOCAB_DIR, "ggml-vocab-gpt-2.gguf")
        r = sipp_transcribe(gguf, self.clips["wav 16 kHz"], check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a whisper.cpp model", r.stderr)


if __name__ == "__main__":
    unittest.main()
