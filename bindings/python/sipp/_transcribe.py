"""Speech to text through libsipp (sipp.h's speech section), with a whisper.cpp model:

    r = sipp.transcribe("ggml-tiny.bin", "clip.mp3")              # {text, language, segments, ...}
    r = sipp.transcribe("ggml-tiny.bin", data, language="de", translate=True)
    srt = sipp.transcribe("ggml-tiny.bin", "clip.wav", format="srt")   # a string

    with sipp._transcribe.Transcriber("ggml-tiny.bin", parallel=2) as t:      # load once, many clips
        t.transcribe("a.wav"); t.transcribe("b.flac")

`audio` is a path or the file's bytes (WAV, MP3 or FLAC, any rate from 8 to 192 kHz, any channels).
The decoding defaults are whisper-cli's (beam 5, best of 5, the temperature fallback), so the
transcript is the one whisper-cli gives for the same clip, language and threads. format "verbose_json"
(the default here) returns a dict: text, language, language_probability, duration, task, segments
(id, start, end, text, tokens, avg_logprob, no_speech_prob) and, with words=True, words; "json" returns
{"text"}; "text", "srt" and "vtt" return strings. Bad input raises InvalidArgumentError naming it. The
GIL is released while libsipp works, and one Transcriber serves several threads (parallel of them at
once).
"""

import ctypes
import json
import os

from . import _native
from ._errors import NotSupportedError
from ._native import ERROR_SIZE, check, text

_FORMATS = {"json": 0, "text": 1, "verbose_json": 2, "srt": 3, "vtt": 4}  # sipp_transcript_format


def _lib():
    lib = _native.library()
    missing = sorted(n for n in _native.SPEECH_FUNCTIONS if not lib.has(n))
    if missing:
        raise NotSupportedError(f"{lib.path} has no speech functions ({', '.join(missing)}); rebuild it with make")
    return lib


class Transcriber:
    """A whisper.cpp model loaded by libsipp; parallel clips at once, threads each."""

    def __init__(self, model, *, backend="auto", parallel=1, threads=0):
        self._lib = _lib()
        params = self._lib.transcriber_default_params()
        params.backend = backend.encode()
        params.parallel = parallel
        params.threads = threads
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(ERROR_SIZE)
        check(self._lib.transcriber_new(os.fsencode(model), ctypes.byref(params), ctypes.byref(handle), err), err)
        self._handle = handle

    @property
    def backend(self):
        return text(self._lib.transcriber_backend(self._handle))

    def transcribe(self, audio, *, language=None, translate=False, prompt=None, temperature=0.0,
                   temperature_inc=0.2, beam_size=5, best_of=5, words=False, max_seconds=0, format="verbose_json"):
        if format not in _FORMATS:
            raise ValueError(f"format {format!r}: expected one of {', '.join(_FORMATS)}")
        if isinstance(audio, (str, os.PathLike)):
            where = os.fspath(audio)
            with open(audio, "rb") as f:
                data = f.read()
        else:
            where, data = "the audio", bytes(audio)
        p = self._lib.transcribe_default_params()
        p.language = language.encode() if language else None
        p.translate, p.temperature, p.beam_size, p.best_of = translate, temperature, beam_size, best_of
        p.temperature_inc = temperature_inc
        p.prompt = prompt.encode() if prompt else None
        p.word_timestamps, p.max_seconds = words, float(max_seconds)
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(ERROR_SIZE)
        check(self._lib.transcribe_bytes(self._handle, data, len(data), where.encode(), ctypes.byref(p),
                                         ctypes.byref(out), err), err)
        try:
            raw = self._lib.transcript_render(out, _FORMATS[format], b"translate" if translate else b"transcribe")
            if not raw:
                raise MemoryError("out of memory rendering the transcript")
            rendered = ctypes.string_at(raw).decode("utf-8")
            self._lib.free(raw)
        finally:
            self._lib.transcript_free(out)
        return json.loads(rendered) if format in ("json", "verbose_json") else rendered

    def close(self):
        if self._handle:
            self._lib.transcriber_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def transcribe(model, audio, *, backend="auto", threads=0, **options):
    """Loads model, transcribes audio (a path or bytes) and frees the model; options as Transcriber.transcribe."""
    with Transcriber(model, backend=backend, threads=threads) as t:
        return t.transcribe(audio, **options)
