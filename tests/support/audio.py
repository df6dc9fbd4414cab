"""Small test audio written with the standard library: a 16-bit mono PCM WAV of a tone (or silence),
for the tests that send audio to a projector."""

import math
import struct

RATE = 16000


def wav(seconds=0.5, rate=RATE, tone_hz=440.0, amplitude=8000):
    """A WAV file's bytes: seconds of a sine at tone_hz (amplitude 0: silence)."""
    n = int(rate * seconds)
    data = b"".join(struct.pack("<h", int(amplitude * math.sin(2 * math.pi * tone_hz * i / rate))) for i in range(n))
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)  # PCM, mono, rate, bytes/s, block, bits
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body
