"""Text to speech through libsipp (sipp_tts_* and sipp_audio_encoder_* in sipp.h).

    import sipp

    wav = sipp.speech("Hello there.")                          # flite, no model file: WAV bytes
    mp3 = sipp.speech("Hello.", voice="awb", speed=1.2, format="mp3")
    for chunk in sipp.speech("One. Two. Three.", format="opus", stream=True):
        player.feed(chunk)                                     # each sentence as soon as it is encoded

    with sipp.Voice("talker.gguf", mmproj="talker-mmproj.gguf", speaker="me.wav") as v:
        v.speech("Hello world.", seed=1)                       # Qwen3-TTS / Pocket TTS, as llama-tts

A Voice keeps its model loaded between calls; sipp.speech() makes one for the call. The audio is
encoded by libsipp (WAV, raw PCM at 24 kHz, FLAC, MP3, Opus in Ogg), the same bytes `sipp speak` writes.
A streamed WAV carries placeholder sizes in its header, as one written to a pipe does.
"""

import ctypes
import queue
import threading

from . import _native
from ._native import ERROR_SIZE, check, text

_END = object()


def _lib():
    return _native.library_with(_native.SPEECH_FUNCTIONS)


def _b(s):
    return s.encode() if isinstance(s, str) else s


class Voice:
    """A loaded voice: "flite" (voice= kal, kal16, slt, rms or awb) or a speech pair's backbone GGUF
    with mmproj= its projector (speaker= a reference clip). A pair speaks parallel= calls at once, each
    with threads= threads (0: the machine's cores); batch_frames=True: a Qwen3-TTS pair's calls share
    one backbone context and decode their frames together (sipp.h's sipp_tts_params.batch_frames);
    speakers={"name": "clip.wav", ...}: a pair's other voices, each a reference clip."""

    def __init__(self, model="flite", *, mmproj=None, speaker=None, voice=None, backend=None, threads=0,
                 parallel=1, batch_frames=False, speakers=None):
        self._lib = _lib()
        self._keep = [_b(model), _b(mmproj), _b(speaker), _b(voice), _b(backend)]
        p = self._lib.tts_default_params()
        p.model, p.mmproj, p.speaker, p.voice, p.backend = self._keep
        p.n_threads = threads
        p.n_parallel = parallel
        p.batch_frames = batch_frames
        if speakers:
            names = (ctypes.c_char_p * len(speakers))(*[_b(n) for n in speakers])
            paths = (ctypes.c_char_p * len(speakers))(*[_b(v) for v in speakers.values()])
            self._keep += [names, paths]
            p.speaker_names, p.speaker_paths, p.n_speakers = names, paths, len(speakers)
        err = ctypes.create_string_buffer(ERROR_SIZE)
        self._h = ctypes.c_void_p()
        check(self._lib.tts_new(ctypes.byref(p), ctypes.byref(self._h), err), err)

    @property
    def pipeline(self):
        return text(self._lib.tts_pipeline(self._h))

    @property
    def sample_rate(self):
        return self._lib.tts_sample_rate(self._h)

    @property
    def voices(self):
        out, i = [], 0
        while (name := self._lib.tts_voice_borrow(self._h, i)) is not None:
            out.append(text(name))
            i += 1
        return out

    @property
    def frames(self):
        """Qwen3-TTS with batch_frames: (frames, decodes), the frames the backbone has decoded and the
        decodes they took (calls at once share one); (0, 0) otherwise."""
        frames, decodes = ctypes.c_uint64(), ctypes.c_uint64()
        self._lib.tts_frames(self._h, ctypes.byref(frames), ctypes.byref(decodes))
        return frames.value, decodes.value

    def close(self):
        if self._h:
            self._lib.tts_free(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def speech(self, input, *, voice=None, speed=1.0, format="wav", sample_rate=0, seed=None, language=None,
               stream=False, max_frames=0):
        """The speech of input, encoded as format: bytes, or with stream=True an iterator of byte chunks
        as each sentence is encoded. max_frames: a GGUF pair's frame cap per sentence (0: llama-tts's)."""
        fmt = ctypes.c_int()
        if self._lib.audio_format_parse(_b(format), ctypes.byref(fmt)) != _native.STATUS_OK:
            check(1, f"unknown audio format '{format}': give one of {', '.join(_native.AUDIO_FORMATS)}")
        args = (input, voice, speed, fmt.value, sample_rate, seed, language, max_frames)
        if not stream:
            chunks = []
            self._speak(args, chunks.append, streamed=False)
            return b"".join(chunks)
        return self._stream(args)

    def _stream(self, args):
        q = queue.Queue()
        cancel = ctypes.c_bool(False)

        def run():
            try:
                self._speak(args, q.put, streamed=True, cancel=cancel)
                q.put(_END)
            except BaseException as e:  # noqa: BLE001 (handed to the reader)
                q.put(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        try:
            while (item := q.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            cancel.value = True  # a reader that stops early stops the voice within a sentence
            t.join()

    def _speak(self, args, sink, *, streamed, cancel=None):
        input, voice, speed, fmt, sample_rate, seed, language, max_frames = args
        lib, enc, failure = self._lib, ctypes.c_void_p(), []

        def on_bytes(data, n, user):
            sink(ctypes.string_at(data, n))
            return True

        bytes_fn = _native.BYTES_FN(on_bytes)

        def on_audio(samples, n, rate, user):
            try:
                if not enc:
                    err = ctypes.create_string_buffer(ERROR_SIZE)
                    check(lib.audio_encoder_new(fmt, rate, streamed, bytes_fn, None, ctypes.byref(enc), err), err)
                check(lib.audio_encoder_write(enc, samples, n), lib.audio_encoder_last_error(enc))
                return True
            except BaseException as e:  # noqa: BLE001 (raised after the call)
                failure.append(e)
                return False

        audio_fn = _native.AUDIO_FN(on_audio)
        o = lib.speak_default_options()
        keep = [_b(voice), _b(language)]
        o.voice, o.language = keep
        o.speed, o.sample_rate, o.max_frames = speed, sample_rate, max_frames
        if seed is not None:
            o.seed = seed
        if cancel is not None:
            o.cancel = ctypes.pointer(cancel)
        o.on_audio = audio_fn
        try:
            st = lib.tts_speak(self._h, _b(input), ctypes.byref(o), None, None, None)
            if failure:
                raise failure[0]
            check(st, text(lib.tts_last_error(self._h)))
            if enc:
                check(lib.audio_encoder_finish(enc), text(lib.audio_encoder_last_error(enc)))
        finally:
            if enc:
                lib.audio_encoder_free(enc)


def speech(input, model="flite", *, voice=None, speed=1.0, format="wav", mmproj=None, speaker=None, seed=None,
           sample_rate=0, language=None, stream=False):
    """Speaks input with a voice loaded for this call (see Voice); returns the encoded bytes, or with
    stream=True an iterator of chunks."""
    v = Voice(model, mmproj=mmproj, speaker=speaker)
    out = v.speech(input, voice=voice, speed=speed, format=format, sample_rate=sample_rate, seed=seed,
                   language=language, stream=stream)
    if not stream:
        v.close()
        return out

    def chunks():
        try:
            yield from out
        finally:
            v.close()

    return chunks()
