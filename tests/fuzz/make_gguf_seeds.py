#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf (tests/fuzz/corpus/gguf/, *.bin: the repository ignores
*.gguf): tiny GGUF v3 files, written here
byte by byte so that the seeds are small (a real model's vocabulary alone is megabytes) and cover
what the store reads: architecture keys, a string-array vocabulary and merges, a chat template,
BOS/EOS ids, per-layer arrays, a split set's keys, and tensors of two types.

    python3 tests/fuzz/make_gguf_seeds.py tests/fuzz/corpus/gguf
"""

import os
import struct
import sys

UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64 = 4, 5, 6, 7, 8, 9, 10
F32, F16 = 0, 1
ALIGN = 32


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = s(key) + struct.pack("<I", vtype)
    if vtype == STRING:
        return out + s(value)
    if vtype == ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        for it in items:
            out += s(it) if etype == STRING else struct.pack({UINT32: "<I", INT32: "<i"}[etype], it)
        return out
    fmt = {UINT32: "<I", INT32: "<i", FLOAT32: "<f", BOOL: "<?", UINT64: "<Q"}[vtype]
    return out + struct.pack(fmt, value)


def gguf(kvs, tensors):
    """tensors: (name, dims, type); data is zeros of the right size, each tensor aligned."""
    sizes = {F32: 4, F16: 2}
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    offset, infos = 0, b""
    for name, dims, ttype in tensors:
        infos += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", ttype, offset)
        n = sizes[ttype]
        for d in dims:
            n *= d
        offset += (n + ALIGN - 1) // ALIGN * ALIGN
    body = head + infos
    body += b"\0" * (-len(body) % ALIGN)
    return body + b"\0" * offset


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    llama = [
        kv("general.architecture", STRING, "llama"),
        kv("general.name", STRING, "fuzz seed"),
        kv("general.file_type", UINT32, 0),
        kv("llama.context_length", UINT32, 256),
        kv("llama.embedding_length", UINT32, 8),
        kv("llama.block_count", UINT32, 1),
        kv("llama.attention.head_count", ARRAY, (INT32, [2])),
        kv("llama.attention.head_count_kv", UINT32, 1),
        kv("llama.feed_forward_length", UINT32, 16),
        kv("tokenizer.ggml.model", STRING, "gpt2"),
        kv("tokenizer.ggml.tokens", ARRAY, (STRING, ["<s>", "</s>", "a", "b", "ab"])),
        kv("tokenizer.ggml.merges", ARRAY, (STRING, ["a b"])),
        kv("tokenizer.ggml.bos_token_id", UINT32, 0),
        kv("tokenizer.ggml.eos_token_id", UINT32, 1),
        kv("tokenizer.chat_template", STRING, "{% for m in messages %}{{ m.content }}{% endfor %}"),
    ]
    tensors = [("token_embd.weight", [8, 5], F32), ("output_norm.weight", [8], F16)]
    seeds = {
        "llama.bin": gguf(llama, tensors),
        "no-tensors.bin": gguf(llama[:3], []),
        # a string where a number belongs: gguf aborts if asked for its data as a number
        "string-for-number.bin": gguf(llama[:1] + [kv("llama.context_length", STRING, "2048")], tensors[:1]),
        # the odd last byte makes fuzz_gguf name it as shard 1 of a set (m-00001-of-00002.gguf)
        "split-shard1.bin": gguf(llama + [kv("split.no", UINT32, 0), kv("split.count", UINT32, 2)], tensors[:1])
        + b"\x01",
        "rank-pooling.bin": gguf([kv("general.architecture", STRING, "bert"), kv("bert.pooling_type", UINT32, 4),
                                   kv("bert.vocab_size", UINT64, 30)], tensors[1:]),
    }
    for name, data in seeds.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "gguf"))
