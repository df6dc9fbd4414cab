"""Small test audio written with the standard library: a 16-bit mono PCM WAV of a tone (or silence),
for the tests that send audio to a projector."""

import math
import struct

RATE = 16000


def wav(seconds=0.5, rate=RATE, tone_hz=440.0, amplitude=8000, silence_after=0.0):
    """A WAV file's bytes: seconds of a sine at tone_hz (amplitude 0: silence), then silence_after
    seconds of silence (a spoken turn, for a listener that waits for quiet)."""
    n = int(rate * seconds)
    data = b"".join(struct.pack("<h", int(amplitude * math.sin(2 * math.pi * tone_hz * i / rate))) for i in range(n))
    data += b"\0\0" * int(rate * silence_after)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)  # PCM, mono, rate, bytes/s, block, bits
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def flac_header(rate, total_samples, channels=1, bits=16, pad=0):
    """A FLAC file that is only its STREAMINFO claiming total_samples at rate (36 bits each way), then
    pad bytes of nothing: what a forged clip sends (issue 44: 140 bytes claiming 2^36 samples)."""
    info = struct.pack(">HH", 4096, 4096) + b"\0" * 6  # block sizes, frame sizes unknown
    packed = (rate << 44) | ((channels - 1) << 41) | ((bits - 1) << 36) | (total_samples & ((1 << 36) - 1))
    info += packed.to_bytes(8, "big") + b"\0" * 16  # rate, channels, bits, samples; MD5
    return b"fLaC" + bytes([0x80, 0, 0, len(info)]) + info + b"\0" * pad


def wav_pcm8(rate, n_samples):
    """A well-formed 8-bit mono PCM WAV of n_samples of silence at rate (1 Hz makes 600 KB claim 7 days)."""
    data = b"\x80" * n_samples
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def wav_adpcm_fact(samples_claimed, n_bytes=256):
    """An MS ADPCM WAV whose fact chunk claims samples_claimed frames over n_bytes of data."""
    fmt = struct.pack("<HHIIHHHH", 2, 1, 16000, 8000, 256, 4, 2, 500) + b"\0" * 28  # ADPCM coefficients
    fact = struct.pack("<I", samples_claimed)
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"fact" + struct.pack("<I", 4) + fact +
            b"data" + struct.pack("<I", n_bytes) + b"\0" * n_bytes)
    return b"RIFF" + struct.pack("<I", len(body)) + body
