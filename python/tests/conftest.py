"""Shared fixtures: the `ttrcheck` executable and an independent safetensors reader/writer
(written here from the format's definition, so a round trip through the CLI's files
does not go through the package's own conversions)."""
from __future__ import annotations

import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_DT = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8"}


def read_st(path):
    """(tensors, metadata): F64/F32/F16/I64 as their NumPy dtypes, BF16 as uint16 bits."""
    raw = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=_DT[e["dtype"]]).reshape(e["shape"]).copy()
    return out, meta


def write_st(path, tensors, metadata=None, dtypes=None):
    """tensors: name -> array (float64/32/16, int64, or uint16 bits with dtypes[name] = 'BF16')."""
    dtypes = dtypes or {}
    names = sorted(tensors)
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in names:
        a = np.ascontiguousarray(tensors[name])
        dt = dtypes.get(name) or {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64"}[a.dtype.name]
        b = a.astype(_DT[dt]).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


@pytest.fixture(scope="session")
def exe():
    path = os.environ.get("TTRCHECK_EXE") or str(ROOT / "build" / "default" / "ttrcheck")
    if not os.path.exists(path):
        pytest.skip(f"no ttrcheck executable at {path} (set TTRCHECK_EXE)")
    return path


@pytest.fixture
def cli(exe):
    """Runs `ttrcheck ARGS...`; returns the CompletedProcess."""

    def run(*args, check=True):
        p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
        if check and p.returncode not in (0, 1):
            raise AssertionError(f"ttrcheck {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}")
        return p

    return run


def bits(a):
    """The float64 bit patterns, for bit-for-bit comparisons (NaN-safe, -0 distinct)."""
    return np.ascontiguousarray(np.asarray(a, dtype=np.float64)).view(np.uint64)
