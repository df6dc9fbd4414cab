"""gguf_corrupt: writes corrupted copies of a good GGUF model, one per seed, for the tests and the
fuzzer's seed corpus.

The file is parsed (header, key/value section, tensor descriptors) so that a mutation lands on a
field, not on a random byte: a seed picks one field and one hostile value for it. Values are
overwritten in place with the same width (the layout stays readable, so the corruption reaches the
model loader rather than the GGUF parser), except for the few structural mutations (a key's type
tag, a tensor's dimension count, truncation) that test the parser itself. The hyperparameters the
loader trusts get the values that made llama.cpp assert: 0, 1, huge, all ones, NaN, infinities,
negative numbers, other architectures.

Usage as a program: python3 gguf_corrupt.py MODEL.gguf OUTDIR [FIRST_SEED] [N_SEEDS]
writes OUTDIR/corrupt-SEED.gguf and prints one line per file: the file and what was changed.
python3 gguf_corrupt.py --fuzz-seeds OUTDIR [N] writes the fuzzer's seeds: a skeleton model (about
3 KiB, no tokenizer) and N corrupted copies of it.
"""

import math
import os
import random
import struct
import sys

# GGUF value types (gguf.h's enum gguf_type) and their struct formats.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
          U64: "<Q", I64: "<q", F64: "<d"}
INTEGER = (U8, I8, U16, I16, U32, I32, U64, I64)
FLOAT = (F32, F64)
HEADER = "<4sIQQ"  # magic, version, n_tensors, n_kv

# Architectures llama.cpp knows, with their own key prefixes: a file relabelled as one of them reaches
# that architecture's loader with the llama keys, or with none of its own.
ARCHITECTURES = ["qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi2", "phi3", "mistral3", "bert", "gpt2",
                 "falcon", "starcoder2", "mamba", "rwkv6", "t5", "deepseek2", "olmo", "granite", "stablelm",
                 "nomic-bert", "command-r", "llama4", "unknown-arch", ""]

# Extra keys some loaders read without a default check; a mutation may rename a key to one of these.
EXTRA_SUFFIXES = ["expert_count", "expert_used_count", "expert_group_count", "nextn_predict_layers",
                  "attention.key_length", "attention.value_length", "rope.scaling.type",
                  "attention.sliding_window", "attention.layer_norm_epsilon", "rope.scaling.factor"]


class Field:
    """One mutable place in the file: what it is (for the report), where its bytes are, its type."""

    def __init__(self, what, offset, vtype, size, key=None):
        self.what, self.offset, self.vtype, self.size, self.key = what, offset, vtype, size, key


def _read_string(data, off):
    (n,) = struct.unpack_from("<Q", data, off)
    return data[off + 8:off + 8 + n].decode("utf-8", "replace"), off + 8 + n


def _skip_value(data, off, vtype):
    if vtype in SCALAR:
        return off + struct.calcsize(SCALAR[vtype])
    if vtype == STRING:
        return _read_string(data, off)[1]
    if vtype == ARRAY:
        etype, n = struct.unpack_from("<IQ", data, off)
        off += 12
        if etype in SCALAR:
            return off + n * struct.calcsize(SCALAR[etype])
        for _ in range(n):
            off = _skip_value(data, off, etype)
        return off
    raise ValueError(f"unknown GGUF type {vtype} at {off}")


def parse(data):
    """The fields of a GGUF file: header counts, every key's type tag and scalar value (and array
    lengths), and every tensor's dimensions, type and offset."""
    return _parse(data)[0]


def _parse(data):
    """parse's fields, and the offset where the tensor descriptors end."""
    magic, version, n_tensors, n_kv = struct.unpack_from(HEADER, data, 0)
    if magic != b"GGUF":
        raise ValueError("not a GGUF file")
    fields = [Field("header.n_tensors", 8, U64, 8), Field("header.n_kv", 16, U64, 8)]
    off = struct.calcsize(HEADER)
    for _ in range(n_kv):
        key, off = _read_string(data, off)
        (vtype,) = struct.unpack_from("<I", data, off)
        fields.append(Field(f"{key}:type", off, U32, 4, key))
        off += 4
        if vtype in SCALAR:
            fields.append(Field(key, off, vtype, struct.calcsize(SCALAR[vtype]), key))
        elif vtype == STRING:
            fields.append(Field(key, off, STRING, 0, key))
        elif vtype == ARRAY:
            fields.append(Field(f"{key}:length", off + 4, U64, 8, key))
        off = _skip_value(data, off, vtype)
    for _ in range(n_tensors):
        name, off = _read_string(data, off)
        (n_dims,) = struct.unpack_from("<I", data, off)
        fields.append(Field(f"tensor {name}:n_dims", off, U32, 4))
        off += 4
        for d in range(n_dims):
            fields.append(Field(f"tensor {name}:ne[{d}]", off, I64, 8))
            off += 8
        fields.append(Field(f"tensor {name}:type", off, U32, 4))
        fields.append(Field(f"tensor {name}:offset", off + 4, U64, 8))
        off += 12
    return fields, off


def _hostile_int(rng, vtype):
    fmt = SCALAR[vtype]
    bits = struct.calcsize(fmt) * 8
    signed = fmt[1].islower()
    top = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    low = -(1 << (bits - 1)) if signed else 0
    choices = [0, 1, 2, 3, 7, 1000, 4096, 65536, top, top - 1, low, rng.randint(low, top)]
    if signed:
        choices += [-1, -2]
    return max(low, min(top, rng.choice(choices)))


def _hostile_float(rng):
    return rng.choice([math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1e-45, 1e38, -1e-6, 3.0e38,
                       rng.uniform(-10, 10)])


def _replace_string(data, field, value):
    """A string value replaced by another. The header grows or shrinks; the data section is padded
    to the next aligned offset after it, as the parser will look for it, so the tensors stay whole."""
    end = _parse(data)[1]
    (n,) = struct.unpack_from("<Q", data, field.offset)
    enc = value.encode()
    head = data[:field.offset] + struct.pack("<Q", len(enc)) + enc + data[field.offset + 8 + n:end]
    return head + bytes(-len(head) % GGUF_ALIGNMENT) + data[end + (-end % GGUF_ALIGNMENT):]


def corrupt(data, seed):
    """One corrupted copy of data for this seed: (bytes, description)."""
    rng = random.Random(seed)
    fields = parse(data)
    kind = rng.random()
    if kind < 0.04:
        cut = rng.randint(0, len(data) - 1)
        return data[:cut], f"truncated to {cut} of {len(data)} bytes"
    # Hyperparameters are the point: weight them above tensor descriptors and tokenizer arrays.
    hparams = [f for f in fields if f.key and (f.key.startswith("llama.") or f.key.startswith("general."))]
    pool = hparams if kind < 0.75 and hparams else fields
    f = rng.choice(pool)
    out = bytearray(data)
    if f.vtype == STRING:
        if f.key == "general.architecture":
            value = rng.choice(ARCHITECTURES)
        else:
            value = rng.choice(["", "x" * 300, "\xff", "linear", "yarn", "none"])
        return _replace_string(bytes(data), f, value), f"{f.what} = {value!r}"
    if f.what.endswith(":type") and f.key:
        value = rng.choice([U8, I32, F32, BOOL, STRING, ARRAY, U64, F64, 13, 0xFFFFFFFF])
        struct.pack_into("<I", out, f.offset, value)
        return bytes(out), f"{f.what} = {value}"
    if f.key and f.key.startswith("llama.") and rng.random() < 0.15:
        # Rename the key to another one a loader reads (the same length keeps the layout).
        name = f.key.encode()
        pos = data.rfind(name, 0, f.offset)
        target = ("llama." + rng.choice(EXTRA_SUFFIXES)).encode()
        if pos > 0 and len(target) <= len(name):
            target = target + b"_" * (len(name) - len(target))
            out[pos:pos + len(name)] = target
            struct.pack_into("<I", out, f.offset, U32)
            return bytes(out), f"key {f.key} renamed to {target.decode()}"
    if f.vtype in FLOAT:
        value = _hostile_float(rng)
        struct.pack_into(SCALAR[f.vtype], out, f.offset, value)
    elif f.vtype == BOOL:
        value = rng.choice([0, 1, 2, 255])
        struct.pack_into("<B", out, f.offset, value)
    else:
        value = _hostile_int(rng, f.vtype)
        struct.pack_into(SCALAR[f.vtype], out, f.offset, value)
    return bytes(out), f"{f.what} = {value}"


# The mutations that made llama.cpp assert in the survey, by name: the tests run them always.
def named_corruptions(data):
    """(name, bytes) for the known aborts: block_count 0, 1000 and 2^32-1, general.alignment 1 and
    the RMS epsilon NaN."""
    fields = {f.what: f for f in parse(data)}
    out = []
    for name, key, fmt, value in [("block_count_0", "llama.block_count", "<I", 0),
                                  ("block_count_1000", "llama.block_count", "<I", 1000),
                                  ("block_count_max", "llama.block_count", "<I", 0xFFFFFFFF),
                                  ("rms_eps_nan", "llama.attention.layer_norm_rms_epsilon", "<f", math.nan),
                                  ("head_count_0", "llama.attention.head_count", "<I", 0),
                                  ("embedding_length_0", "llama.embedding_length", "<I", 0)]:
        buf = bytearray(data)
        struct.pack_into(fmt, buf, fields[key].offset, value)
        out.append((name, bytes(buf)))
    out.append(("alignment_1", with_alignment(data, 1)))
    out.append(("block_count_string", with_string_value(data, "llama.block_count", "two")))
    tok = [f for f in parse(data) if f.what == "tokenizer.ggml.model"]
    if tok:
        out.append(("tokenizer_none", _replace_string(data, tok[0], "none")))
    return out


def _f32_span(data, name):
    """Where an f32 tensor's elements start in the file, and how many there are."""
    fields, end = _parse(data)
    by = {f.what: f for f in fields}
    (offset,) = struct.unpack_from("<Q", data, by[f"tensor {name}:offset"].offset)
    (ttype,) = struct.unpack_from("<I", data, by[f"tensor {name}:type"].offset)
    if ttype != 0:
        raise ValueError(f"tensor {name} is not f32")
    n = 1
    for d in range(4):
        f = by.get(f"tensor {name}:ne[{d}]")
        if f:
            n *= struct.unpack_from("<q", data, f.offset)[0]
    return end + (-end % GGUF_ALIGNMENT) + offset, n


def f32_tensor(data, name):
    """An f32 tensor's elements, as a tuple of floats."""
    start, n = _f32_span(data, name)
    return struct.unpack_from(f"<{n}f", data, start)


def with_tensor_filled(data, name, value):
    """The file with every element of an f32 tensor set to value (the header is untouched: a model
    whose weights, not metadata, are broken, e.g. NaN norms that make every output NaN)."""
    start, n = _f32_span(data, name)
    out = bytearray(data)
    out[start:start + 4 * n] = struct.pack(f"<{n}f", *([value] * n))
    return bytes(out)


def with_string_value(data, key, text):
    """The file with a scalar key's value replaced by a string (the data section moves to the next
    aligned offset, so the tensors stay whole)."""
    fields, end = _parse(data)
    f = [x for x in fields if x.what == key][0]
    enc = text.encode()
    head = data[:f.offset - 4] + struct.pack("<IQ", STRING, len(enc)) + enc + data[f.offset + f.size:end]
    old_start = end + (-end % GGUF_ALIGNMENT)
    return head + bytes(-len(head) % GGUF_ALIGNMENT) + data[old_start:]


def with_alignment(data, alignment):
    """The file with a general.alignment key of this value added (as a u32, the type gguf.h wants)."""
    magic, version, n_tensors, n_kv = struct.unpack_from(HEADER, data, 0)
    key = b"general.alignment"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<II", U32, alignment)
    head = struct.pack(HEADER, magic, version, n_tensors, n_kv + 1)
    return head + kv + data[struct.calcsize(HEADER):]


# A skeleton llama model, small enough for a fuzzer's input (about 3 KiB): the keys sipp-synth writes
# but no tokenizer, and the llama layout's tensors with tiny shapes, all f32 zeros.
SKELETON_EMBD, SKELETON_HEADS, SKELETON_KV_HEADS, SKELETON_FF, SKELETON_VOCAB = 8, 2, 1, 8, 16
GGUF_ALIGNMENT = 32


def _kv(key, vtype, value):
    enc = key.encode()
    out = struct.pack("<Q", len(enc)) + enc + struct.pack("<I", vtype)
    if vtype == STRING:
        v = value.encode()
        return out + struct.pack("<Q", len(v)) + v
    return out + struct.pack(SCALAR[vtype], value)


def skeleton(n_layer=1):
    """The bytes of a minimal, well-formed llama GGUF that passes sipp's pre-load check."""
    e, h, hk, ff, nv = SKELETON_EMBD, SKELETON_HEADS, SKELETON_KV_HEADS, SKELETON_FF, SKELETON_VOCAB
    head = e // h
    kv = [("general.architecture", STRING, "llama"), ("general.name", STRING, "skeleton"),
          ("llama.context_length", U32, 64), ("llama.embedding_length", U32, e),
          ("llama.block_count", U32, n_layer), ("llama.feed_forward_length", U32, ff),
          ("llama.attention.head_count", U32, h), ("llama.attention.head_count_kv", U32, hk),
          ("llama.rope.dimension_count", U32, head), ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
          ("llama.rope.freq_base", F32, 10000.0), ("llama.vocab_size", U32, nv)]
    tensors = [("token_embd.weight", [e, nv]), ("output_norm.weight", [e]), ("output.weight", [e, nv])]
    for i in range(n_layer):
        tensors += [(f"blk.{i}.attn_norm.weight", [e]), (f"blk.{i}.attn_q.weight", [e, e]),
                    (f"blk.{i}.attn_k.weight", [e, head * hk]), (f"blk.{i}.attn_v.weight", [e, head * hk]),
                    (f"blk.{i}.attn_output.weight", [e, e]), (f"blk.{i}.ffn_norm.weight", [e]),
                    (f"blk.{i}.ffn_gate.weight", [e, ff]), (f"blk.{i}.ffn_up.weight", [e, ff]),
                    (f"blk.{i}.ffn_down.weight", [ff, e])]
    out = bytearray(struct.pack(HEADER, b"GGUF", 3, len(tensors), len(kv)))
    for key, vtype, value in kv:
        out += _kv(key, vtype, value)
    offset = 0
    for name, shape in tensors:
        enc = name.encode()
        out += struct.pack("<Q", len(enc)) + enc + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<IQ", 0, offset)  # type 0: f32
        size = 4 * math.prod(shape)
        offset += size + (-size % GGUF_ALIGNMENT)
    out += bytes(-len(out) % GGUF_ALIGNMENT)
    return bytes(out) + bytes(offset)


def main(argv):
    if len(argv) >= 3 and argv[1] == "--fuzz-seeds":
        # --fuzz-seeds OUTDIR [N]: the skeleton and N corrupted copies of it, for the libFuzzer harness.
        outdir, count = argv[2], int(argv[3]) if len(argv) > 3 else 64
        os.makedirs(outdir, exist_ok=True)
        base = skeleton()
        blobs = [("skeleton", base), ("skeleton-2", skeleton(2))] + named_corruptions(base)
        blobs += [(f"seed-{s}", corrupt(base, s)[0]) for s in range(count)]
        for name, blob in blobs:
            with open(os.path.join(outdir, name + ".gguf"), "wb") as fh:
                fh.write(blob)
        return 0
    if len(argv) < 3:
        print("usage: gguf_corrupt.py MODEL.gguf OUTDIR [FIRST_SEED] [N_SEEDS] | --fuzz-seeds OUTDIR [N]", file=sys.stderr)
        return 2
    src, outdir = argv[1], argv[2]
    first = int(argv[3]) if len(argv) > 3 else 0
    count = int(argv[4]) if len(argv) > 4 else 100
    with open(src, "rb") as fh:
        data = fh.read()
    os.makedirs(outdir, exist_ok=True)
    for seed in range(first, first + count):
        blob, what = corrupt(data, seed)
        path = os.path.join(outdir, f"corrupt-{seed}.gguf")
        with open(path, "wb") as fh:
            fh.write(blob)
        print(f"{path}\t{what}")
    for name, blob in named_corruptions(data):
        path = os.path.join(outdir, f"known-{name}.gguf")
        with open(path, "wb") as fh:
            fh.write(blob)
        print(f"{path}\t{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
