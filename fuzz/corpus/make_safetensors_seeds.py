#!/usr/bin/env python3
"""Writes the safetensors fuzz seeds into fuzz/corpus/safetensors/.

Files named valid_* must be accepted by oracles/io/safetensors.cpp and invalid_* must
be rejected with an InputError (tests/io/safetensors_test.cpp checks both). Each
invalid seed is a valid file with one subtle defect, so that a fuzzer starting from
it is close to the boundary of what the reader accepts.

Standard library only (struct + json). Output is deterministic; run it again after
changing it and commit the files:  python3 fuzz/corpus/make_safetensors_seeds.py
"""

import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")

SIZES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8}
PACK = {"F64": "<d", "F32": "<f", "I64": "<q"}


def encode(dtype, values):
    """Little-endian bytes of values; BF16/F16 values must be exactly representable."""
    if dtype == "BF16":
        return b"".join(struct.pack("<f", v)[2:] for v in values)  # top half of binary32
    if dtype == "F16":
        return b"".join(struct.pack("<e", v) for v in values)
    return b"".join(struct.pack(PACK[dtype], v) for v in values)


def header_bytes(header, pad=True):
    """Compact JSON as the safetensors package writes it, space-padded to 8 bytes."""
    text = header if isinstance(header, (bytes, str)) else json.dumps(
        header, separators=(",", ":"), ensure_ascii=False)
    raw = text.encode("utf-8") if isinstance(text, str) else text
    if pad:
        raw += b" " * (-len(raw) % 8)
    return raw


def assemble(header, data=b"", pad=True, length=None):
    raw = header_bytes(header, pad)
    n = len(raw) if length is None else length
    return struct.pack("<Q", n) + raw + data


def tensors(spec, metadata=None):
    """spec: list of (name, dtype, shape, values), packed contiguously in that order."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, values in spec:
        blob = encode(dtype, values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    return header, data


def seeds():
    out = {}
    # ---- valid
    h, d = tensors([("x", "F32", [2], [1.0, -2.5])])
    out["valid_single_f32"] = assemble(h, d)
    h, d = tensors([
        ("a", "F64", [2], [0.1, -1e300]),
        ("b", "F32", [1, 3], [1.0, 2.0, 3.0]),
        ("c", "BF16", [2], [1.0, -0.5]),
        ("d", "F16", [], [65504.0]),
        ("e", "I64", [2], [-(2 ** 53), 7]),
        ("z", "F32", [0, 4], []),
    ], metadata={"format": "pt", "note": "seed"})
    out["valid_all_dtypes_metadata"] = assemble(h, d)
    out["valid_empty"] = assemble({})
    # Offsets not in name order (the Python package orders by dtype alignment first),
    # header not padded.
    out["valid_unsorted_unpadded"] = assemble(
        {"b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]},
         "a": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]}},
        encode("F64", [3.0]) + encode("F32", [4.0]), pad=False)

    # ---- invalid: one defect each
    h, d = tensors([("x", "F32", [2], [1.0, -2.5])])
    out["invalid_truncated_data"] = assemble(h, d[:-1])
    out["invalid_trailing_byte"] = assemble(h, d + b"\0")
    out["invalid_header_length_beyond_eof"] = assemble(h, d, length=len(header_bytes(h)) + len(d) + 1)
    out["invalid_short_file"] = b"\x08\0\0\0\0\0\0"
    out["invalid_header_length_zero"] = struct.pack("<Q", 0) + d
    out["invalid_not_json"] = assemble(b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', d)
    out["invalid_not_object"] = assemble(b"[1,2]")
    out["invalid_not_utf8"] = assemble(b'{"\xff":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', d)
    out["invalid_duplicate_tensor"] = assemble(
        b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
        b'"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', d)
    out["invalid_duplicate_field"] = assemble(
        b'{"x":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', d)
    out["invalid_metadata_not_string"] = assemble({"__metadata__": {"k": 1}, **h}, d)
    out["invalid_extra_field"] = assemble({"x": {**h["x"], "offsets": [0, 8]}}, d)
    out["invalid_missing_shape"] = assemble({"x": {"dtype": "F32", "data_offsets": [0, 8]}}, d)
    out["invalid_unknown_dtype"] = assemble({"x": {**h["x"], "dtype": "F8_E4M3"}}, d)
    out["invalid_lowercase_dtype"] = assemble({"x": {**h["x"], "dtype": "f32"}}, d)
    out["invalid_float_shape"] = assemble(b'{"x":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', d)
    out["invalid_negative_shape"] = assemble({"x": {**h["x"], "shape": [-2]}}, d)
    out["invalid_shape_overflow"] = assemble({"x": {**h["x"], "shape": [2 ** 31, 2 ** 31]}}, d)
    out["invalid_offsets_three"] = assemble({"x": {**h["x"], "data_offsets": [0, 8, 8]}}, d)
    out["invalid_offsets_reversed"] = assemble({"x": {**h["x"], "data_offsets": [8, 0]}}, d)
    out["invalid_size_mismatch"] = assemble({"x": {**h["x"], "shape": [3]}}, d)
    out["invalid_empty_name"] = assemble({"": h["x"]}, d)
    two = encode("F32", [1.0, 2.0, 3.0])
    out["invalid_overlap"] = assemble(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, two)
    out["invalid_gap"] = assemble(
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
         "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, two)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, blob in sorted(seeds().items()):
        assert len(blob) < 2048, name
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
            f.write(blob)
    print(f"wrote {len(seeds())} seeds to {OUT}")


if __name__ == "__main__":
    main()
