"""Small test images written with the standard library: an RGB PNG whose pixels vary with position
(shade moves them, so two images differ), for the tests that send images to a projector."""

import struct
import zlib


def png(width, height, shade=0):
    rows = b"".join(b"\0" + bytes((x * 40 + y * 7 + shade) % 256 for x in range(width * 3)) for y in range(height))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def jpeg_claiming(width, height):
    """A JPEG of a few dozen bytes whose frame header (SOF0) claims width x height: what a forged image
    sends (issue 44: 16 of them, each 8192 x 8192, in a 1.9 KB body)."""
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x11\x00\x02\x11\x00\x03\x11\x00"
    return b"\xff\xd8" + sof + b"\xff\xd9"
