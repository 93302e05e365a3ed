"""scripts/probe-tf32-rounding's expectation tables (what truncation, nearest-even and
ties-away rounding read for each probe value), checked against a bit-level emulation of
the three conversions of an fp32 value to TF32 (its 13 low significand bits dropped),
so that the probe's verdict on the GPU names the right mode."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import struct

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "probe-tf32-rounding")


def probe():
    loader = importlib.machinery.SourceFileLoader("probe_tf32_rounding", SCRIPT)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def value(b):
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def truncate(x):
    return value(bits(x) & ~0x1FFF)


def nearest_even(x):
    b = bits(x)
    low, kept = b & 0x1FFF, b & ~0x1FFF
    if low > 0x1000 or (low == 0x1000 and kept & 0x2000):
        kept += 0x2000
    return value(kept)


def ties_away(x):
    return value((bits(x) + 0x1000) & ~0x1FFF)


def test_tables_are_the_three_conversions():
    mod = probe()
    assert mod.MODES == ("truncation", "nearest-even", "ties-away")
    for v, *reads in mod.CASES:
        for sign in (1.0, -1.0):
            x = sign * v
            assert value(bits(x)) == x, f"{x!r} is not an fp32 value"
            got = [truncate(x), nearest_even(x), ties_away(x)]
            assert got == [sign * r for r in reads], (x, got, reads)


def test_every_pair_of_modes_is_told_apart():
    mod = probe()
    for i in range(3):
        for j in range(i + 1, 3):
            assert any(r[i] != r[j] for _, *r in mod.CASES), (mod.MODES[i], mod.MODES[j])
    # and no mode reads every value exactly (else exact fp32 would pass for it)
    for i in range(3):
        assert any(r[i] != v for v, *r in mod.CASES), mod.MODES[i]
