"""Arrays and tensors to and from the C++ core.

A tensor crosses as (name, dtype, shape, bytes): the safetensors spelling (F64, F32,
BF16, F16, I64) and little-endian C-order bytes, so the core builds the very
structure `ttrcheck` reads from a file and validates it the same way. NumPy has no
bfloat16, and DLPack does not standardise it, so bf16 is handled explicitly: a torch
bfloat16 tensor is viewed as int16 (the same 16 bits), an ``ml_dtypes.bfloat16`` array
is taken by its dtype name, and :class:`BF16` wraps raw bits. CUDA tensors are copied
to the host with a blocking ``.cpu()``, which orders after the work queued on the
current stream.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from . import _core

InputError = _core.InputError

_NUMPY_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "bfloat16": "BF16"}
_TORCH_DTYPES = {"torch.float64": "F64", "torch.float32": "F32", "torch.float16": "F16",
                 "torch.bfloat16": "BF16", "torch.int64": "I64"}
_STORAGE = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
            "I64": np.dtype("<i8")}


@dataclass(frozen=True)
class BF16:
    """bfloat16 values as their raw bits: a uint16 array (the upper half of each float32)."""

    bits: np.ndarray

    def __post_init__(self):
        if not isinstance(self.bits, np.ndarray) or self.bits.dtype != np.uint16:
            raise TypeError("BF16 wraps a numpy uint16 array of raw bfloat16 bits")

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.bits.shape)

    def to_float64(self) -> np.ndarray:
        """The exact values (bf16 widens to float32 by appending 16 zero bits)."""
        return (self.bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def is_torch(x: Any) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def encode(name: str, x: Any, source: str) -> Tuple[str, str, List[int], bytes]:
    """One array or tensor as the core's (name, dtype, shape, bytes)."""
    if isinstance(x, BF16):
        return name, "BF16", list(x.bits.shape), np.ascontiguousarray(x.bits, dtype="<u2").tobytes()
    if is_torch(x):
        import torch

        t = x.detach()
        dtype = _TORCH_DTYPES.get(str(t.dtype))
        if dtype is None:
            raise InputError(f"{source}: tensor '{name}' has dtype {t.dtype}; expected a floating dtype "
                             "(F64, F32, BF16, F16)")
        if dtype == "BF16":
            t = t.view(torch.int16)  # the same 16 bits: DLPack and NumPy have no bfloat16
        a = t.cpu().contiguous().numpy()  # a blocking copy: ordered after the current stream's work
    else:
        try:
            a = np.asarray(x)
        except (TypeError, ValueError) as e:
            raise InputError(f"{source}: tensor '{name}' is not an array ({type(x).__name__}: {e})") from None
        dtype = _NUMPY_DTYPES.get(a.dtype.name)
        if dtype is None:
            raise InputError(f"{source}: tensor '{name}' has dtype {a.dtype.name}; expected a floating dtype "
                             "(F64, F32, BF16, F16)")
    storage = _STORAGE[dtype]
    if dtype == "BF16":
        a = a.view(np.uint16)
    return name, dtype, list(a.shape), np.ascontiguousarray(a).astype(storage, copy=False).tobytes()


def encode_map(tensors: Mapping[str, Any], source: str) -> List[Tuple[str, str, List[int], bytes]]:
    if not isinstance(tensors, Mapping):
        raise InputError(f"{source}: expected a dict of tensor name to array, got {type(tensors).__name__}")
    out = []
    for name, x in tensors.items():
        if not isinstance(name, str):
            raise InputError(f"{source}: tensor names are strings, got {name!r}")
        if x is None:
            continue  # an optional tensor left out (h0=None), as FLA's signatures allow
        out.append(encode(name, x, source))
    return out


def decode(dtype: str, shape: List[int], data: bytes):
    """The core's tensor as a NumPy array of its own dtype (BF16: a :class:`BF16` of its bits)."""
    a = np.frombuffer(data, dtype=_STORAGE[dtype]).reshape(shape)
    a = a.astype(a.dtype.newbyteorder("="), copy=True)
    return BF16(a) if dtype == "BF16" else a


def decode_list(tensors) -> Dict[str, np.ndarray]:
    return {name: decode(dtype, shape, data) for name, dtype, shape, data in tensors}


def config_sets(config: Mapping[str, Any] | None) -> List[str]:
    """A config dict as the CLI's --set key=value pairs (values in the text Config parses)."""
    if config is None:
        return []
    if not isinstance(config, Mapping):
        raise InputError(f"config: expected a dict of key to value, got {type(config).__name__}")
    sets = []
    for key, value in config.items():
        if isinstance(value, (bool, np.bool_)):
            text = "true" if value else "false"
        elif isinstance(value, (float, np.floating)):
            text = repr(float(value))
        elif is_torch(value):
            text = repr(float(value.item()))
        else:
            text = str(value)
        sets.append(f"{key}={text}")
    return sets
