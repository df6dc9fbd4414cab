"""Writes the seed corpus of fuzz_whisper_file (tests/fuzz/corpus/whisper_file/): tiny whisper.cpp
model files in whisper.cpp's ggml format (magic, hyperparameters, mel filters, vocabulary, tensors),
one whole and a few that whisper_file.c must refuse. Run from the repository root."""

import os
import struct

OUT = os.path.join("tests", "fuzz", "corpus", "whisper_file")
MAGIC = 0x67676D6C
F32, F16 = 0, 1


def tensor(name, ne, ggml_type=F32):
    n = 1
    for d in ne:
        n *= d
    data = bytes(n * (4 if ggml_type == F32 else 2))
    return struct.pack("<3i", len(ne), len(name), ggml_type) + struct.pack(f"<{len(ne)}i", *ne) + name.encode() + data


def model(tensors, n_vocab=2):
    hp = struct.pack("<11i", n_vocab, 4, 8, 1, 1, 4, 8, 1, 1, 2, 1)
    mel = struct.pack("<2i", 2, 3) + bytes(2 * 3 * 4)
    vocab = struct.pack("<i", n_vocab) + b"".join(struct.pack("<i", 1) + bytes([97 + i]) for i in range(n_vocab))
    return struct.pack("<I", MAGIC) + hp + mel + vocab + b"".join(tensors)


def main():
    os.makedirs(OUT, exist_ok=True)
    whole = model([tensor("encoder.conv1.weight", [3, 2, 8], F16), tensor("decoder.ln.weight", [8])])
    seeds = {
        "whole.bin": whole,
        "truncated.bin": whole[:-3],
        "five-dims.bin": model([struct.pack("<3i", 5, 1, F32) + struct.pack("<5i", 1, 1, 1, 1, 1) + b"x"]),
        "long-name.bin": model([struct.pack("<3i", 1, 1 << 30, F32) + struct.pack("<i", 4) + b"x"]),
        "header-only.bin": whole[:48],
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
