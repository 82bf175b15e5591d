#!/usr/bin/env python3
"""An independent reader of safetensors files, for tst_safetensors: the standard library and NumPy
only, none of ShardLab's code. It follows the format as published by Hugging Face
(https://github.com/huggingface/safetensors): u64 little-endian header length N, N bytes of UTF-8
JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
byte buffer, which the tensors must cover exactly (offsets relative to its start, no gaps).

usage: read_safetensors.py FILE [--dump OUT] [--expect-tensors N]

Prints one JSON document on stdout: {"header_bytes": N, "metadata": {...}, "tensors": [{"name",
"dtype", "shape", "begin", "end", "min", "max", "sum"}, ...]} with the tensors in buffer order.
--dump writes every tensor's values, read with numpy.frombuffer and reshaped to its shape, as
little-endian float32 in the same order, so a caller can compare them bit for bit.
Any problem: one line "read_safetensors: FILE: problem" on stderr and exit status 1.
"""

import json
import struct
import sys

import numpy as np

MAX_HEADER = 100_000_000
DTYPES = {"F32": np.dtype("<f4")}  # all ShardLab writes; anything else is refused here


class Bad(Exception):
    pass


def no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise Bad(f"header names {k!r} twice")
        seen[k] = v
    return seen


def read(path, expect_tensors=None):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise Bad(f"truncated: {len(data)} bytes, no header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER:
        raise Bad(f"header length {n} over {MAX_HEADER}")
    if 8 + n > len(data):
        raise Bad(f"truncated: header length {n}, {len(data) - 8} bytes follow")
    text = data[8 : 8 + n].decode("utf-8")
    if not text.startswith("{"):
        raise Bad("header does not start with '{'")
    header = json.loads(text, object_pairs_hook=no_duplicates)
    if not isinstance(header, dict):
        raise Bad("header is not an object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise Bad("__metadata__ is not a map of strings")
    buf = memoryview(data)[8 + n :]
    tensors = []
    for name, t in header.items():
        dtype = t.get("dtype")
        if dtype not in DTYPES:
            raise Bad(f"{name}: dtype {dtype!r} not supported by this reader")
        shape = t.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise Bad(f"{name}: bad shape {shape!r}")
        offsets = t.get("data_offsets")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) and o >= 0 for o in offsets)
            or offsets[0] > offsets[1]
        ):
            raise Bad(f"{name}: bad data_offsets {offsets!r}")
        numel = 1
        for d in shape:
            numel *= d
        if offsets[1] - offsets[0] != numel * DTYPES[dtype].itemsize:
            raise Bad(f"{name}: {offsets[1] - offsets[0]} bytes for shape {shape}")
        tensors.append((offsets[0], offsets[1], name, dtype, shape))
    if expect_tensors is not None and len(tensors) != expect_tensors:
        raise Bad(f"{len(tensors)} tensors, expected {expect_tensors}")
    tensors.sort()
    at = 0
    for begin, end, name, _, _ in tensors:
        if begin != at:
            raise Bad(f"{name}: starts at {begin}, expected {at} (gap or overlap)")
        at = end
    if at > len(buf):
        raise Bad(f"truncated: tensors need {at} bytes of data, the file holds {len(buf)}")
    if at != len(buf):
        raise Bad(f"{len(buf) - at} bytes after the last tensor")
    arrays = []
    for begin, end, name, dtype, shape in tensors:
        dt = DTYPES[dtype]
        a = np.frombuffer(buf, dtype=dt, count=(end - begin) // dt.itemsize, offset=begin)
        arrays.append((name, dtype, shape, begin, end, a.reshape(shape)))
    return n, metadata, arrays


def main(argv):
    args = argv[1:]
    dump = expect = None
    if "--dump" in args:
        i = args.index("--dump")
        dump = args[i + 1]
        del args[i : i + 2]
    if "--expect-tensors" in args:
        i = args.index("--expect-tensors")
        expect = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    path = args[0]
    try:
        n, metadata, arrays = read(path, expect)
    except (Bad, ValueError, UnicodeDecodeError, OSError) as e:
        print(f"read_safetensors: {path}: {e}", file=sys.stderr)
        return 1
    out = {"header_bytes": n, "metadata": metadata, "tensors": []}
    for name, dtype, shape, begin, end, a in arrays:
        out["tensors"].append(
            {
                "name": name,
                "dtype": dtype,
                "shape": list(a.shape),
                "begin": begin,
                "end": end,
                "min": float(a.min()) if a.size else None,
                "max": float(a.max()) if a.size else None,
                "sum": float(a.astype(np.float64).sum()),
            }
        )
    if dump is not None:
        with open(dump, "wb") as f:
            for *_, a in arrays:
                f.write(a.astype("<f4").tobytes(order="C"))
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
