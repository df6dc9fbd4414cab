"""Images and audio for a chat's messages: content parts in OpenAI's shape, for a model loaded with a
projector (sipp.local(..., mmproj=...)) or a gateway target that has one.

    client.chat(messages=[{"role": "user", "content": ["What is this?", sipp.image("cat.png")]}])
"""
import base64
import os

from ._errors import InvalidArgumentError

_AUDIO_FORMATS = {".wav": "wav", ".mp3": "mp3", ".flac": "flac"}


def _read(path, what):
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"sipp.{what}() needs a file path, not {path!r}")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InvalidArgumentError(f"sipp.{what}({os.fspath(path)!r}): {e.strerror}") from None


def image(path):
    """The image file at path (PNG, JPEG, GIF or BMP) as an image_url content part (a data: URL)."""
    data = base64.b64encode(_read(path, "image")).decode()
    return {"type": "image_url", "image_url": {"url": "data:application/octet-stream;base64," + data}}


def audio(path):
    """The audio file at path (WAV, MP3 or FLAC, by its extension) as an input_audio content part."""
    fmt = _AUDIO_FORMATS.get(os.path.splitext(os.fspath(path))[1].lower()) if isinstance(path, (str, os.PathLike)) \
        else None
    if fmt is None:
        raise InvalidArgumentError(f"sipp.audio({path!r}): give a .wav, .mp3 or .flac file")
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(_read(path, "audio")).decode(),
                                                   "format": fmt}}
