#!/usr/bin/env python3
"""Writes the seed corpora of the report, baseline, config and layer harnesses
(fuzz/harness/*_fuzz.cpp) into fuzz/corpus/<harness>/, and a few small valid
layer-input files into fuzz/corpus/safetensors/ (valid_layer_*: they parse, and
carry the metadata 'layer'/'config' that `ttrcheck vectors` records, so the
safetensors harness reaches validation and config parsing).

The safetensors format seeds are make_safetensors_seeds.py's. Inputs libFuzzer
found and `-merge=1` kept live beside these as found_* files (not written here).

Standard library only; deterministic. Run again after editing and commit:
    python3 fuzz/corpus/make_seeds.py
"""

import json
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))


def write(harness, name, data):
    d = os.path.join(ROOT, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- reports
def tensor(name, ratio, present=True, passed=True):
    return {"name": name, "present": present, "elements": 12, "rows": 4, "max_abs_error": 0.001,
            "max_ratio": ratio, "worst": {"b": 0, "t": 3, "h": 1} if present else None, "nan_count": 0,
            "inf_count": 0, "nonfinite_failures": 0, "first_nonfinite": None, "pass": passed}


def check(cid, tensors, passed=True):
    layer, form, dtype = cid.split("/")[:3]
    return {"id": cid, "layer": layer, "dtype": dtype, "model_form": form, "chunk_size": 64, "threshold": 8,
            "pass": passed, "tensors": tensors}


def report(checks, kind="check", threshold=8):
    return {"schema": "ttrcheck-report", "schema_version": 1, "kind": kind, "tool_version": "0.1.0",
            "threshold": threshold, "pass": all(c["pass"] for c in checks), "checks": checks}


def dump(doc):
    return json.dumps(doc, indent=2) + "\n"


ok = check("gated_delta_rule/chunk/bf16/tiny.basic", [tensor("o", 0.52), tensor("ht", 1.25)])
fail_inf = check("kda/chunk/fp32/x", [tensor("o", "inf", passed=False), tensor("ht", 0.0, present=False)], False)
with_nan = check("gka/chunk/bf16/stress.key_norms", [tensor("o", "nan", passed=False)], False)
write("report", "valid_check.json", dump(report([ok])))
write("report", "valid_gate_two_checks.json", dump(report([ok, fail_inf], kind="gate")))
write("report", "valid_nan_ratio_null_threshold.json", dump(report([with_nan], kind="gate", threshold=None)))
write("report", "valid_empty.json", json.dumps(report([])))
write("report", "invalid_duplicate_id.json", dump(report([ok, ok])))
write("report", "invalid_version.json", dump(dict(report([ok]), schema_version=2)))
write("report", "invalid_negative_ratio.json", dump(report([check("kda/chunk/fp32/y", [tensor("o", -1.5)])])))
write("report", "invalid_minus_inf_ratio.json", dump(report([check("kda/chunk/fp32/z", [tensor("o", "-inf")])])))
write("report", "invalid_ratio_string.json", dump(report([check("kda/chunk/fp32/w", [tensor("o", "big")])])))
write("report", "invalid_truncated.json", dump(report([ok]))[:200])

# ---------------------------------------------------------------- baselines
def baseline(checks, factor=2, floor=0.05):
    return {"schema": "ttrcheck-baseline", "schema_version": 1, "tool_version": "0.1.0", "factor": factor,
            "floor": floor, "checks": checks}


rows = {"gated_delta_rule/chunk/bf16/tiny.basic": {"o": 0.52, "ht": 1.25}, "kda/chunk/fp32/x": {"o": "inf"}}
write("baseline", "valid.json", dump(baseline(rows)))
write("baseline", "valid_empty.json", json.dumps(baseline({}, factor=1, floor=0)))
write("baseline", "invalid_factor.json", dump(baseline(rows, factor=0.5)))
write("baseline", "invalid_ratio.json", dump(baseline({"a/chunk/bf16/c": {"o": "nan"}})))
write("baseline", "invalid_negative_ratio.json", dump(baseline({"a/chunk/bf16/c": {"o": -2}})))
write("baseline", "invalid_huge_factor.json", dump(baseline(rows)).replace('"factor": 2', '"factor": 1e999'))
write("baseline", "invalid_schema.json", dump(dict(baseline(rows), schema="ttrcheck-report")))

# ---------------------------------------------------------------- config
# layer / arithmetic / metadata config JSON (or empty) / --set lines
configs = {
    "gdn_default": ["gated_delta_rule", "bf16", "", ""],
    "gdn_sets": ["gated_delta_rule", "mpfr:128", '{"use_qk_l2norm_in_kernel":"true"}', "scale=0.125",
                 "use_qk_l2norm_in_kernel=0"],
    "gka_solver": ["gka", "mpfi:64", '{"solver":"cg","iters":"30"}', "solver=chebyshev", "a=1e-4", "omega0=2",
                   "lambda=0.5"],
    "kaczmarz": ["kaczmarz_delta_rule", "fp32", "", "eps=0"],
    "pdn_exact": ["pdn_exact", "fp64", '{"lambda":"1e-10"}', "lambda=2.5e-3"],
    "kla": ["kla_kalman", "fp16", "", "log_atk_scale=-0.2", "eps=1e-6"],
    "bad_number": ["simple_gla", "mpfr:23", "", "scale=1e999"],
    "bad_twice": ["delta_rule", "mpfr", "", "scale=1", "scale=2"],
    "bad_metadata": ["linear_attn", "mpfr:x", '{"scale":1}', ""],
    "unknown_key": ["gla", "bf16", '{"nope":"1"}', "nope=1"],
}
for name, lines in configs.items():
    write("config", name + ".txt", "\n".join(lines) + "\n")

# ---------------------------------------------------------------- layer (structured)
# Byte layout: fuzz/harness/layer_fuzz.cpp. Target indices: layer_targets.def
# (0 gated_delta_rule/chunk, 1 kda/chunk, 2 simple_gla/scan, 3 delta_rule/chunk).
def layer_seed(target, T, H, K, V, log2_chunk, tail):
    head = bytes([target, T - 1, H - 1, K - 1, V - 1, log2_chunk - 1])
    return head + tail


def ramp(n, start=0, step=37):
    return bytes((start + step * i) % 256 for i in range(n))


for target in range(4):
    # Sizes around the chunk boundary: T = C - 1, C, C + 1 for C = 4.
    for T in (3, 4, 5):
        write("layer", f"t{target}_T{T}_C4.bin", layer_seed(target, T, 1, 4, 4, 2, ramp(1200, T + target)))
    # Zero tail: every gate exactly 0/1 edge, zero tensors (exhausted input reads as zeros).
    write("layer", f"t{target}_zeros.bin", layer_seed(target, 8, 2, 3, 2, 1, b""))
    # Large magnitudes (scale byte 255 -> 2^(24 - ...)) with spread, T = 17 > 2 chunks of 8.
    write("layer", f"t{target}_wide.bin", layer_seed(target, 17, 2, 8, 8, 3, bytes([1, 255, 200]) + ramp(4000, 7, 101)))

# ---------------------------------------------------------------- safetensors: layer inputs
def safetensors(tensors, metadata):
    header = {"__metadata__": metadata} if metadata else {}
    data = b""
    for name in sorted(tensors):
        shape, values = tensors[name]
        raw = b"".join(struct.pack("<f", v) for v in values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + data


def vals(n, k=1):
    return [((i * 7 + k) % 5 - 2) / 4 for i in range(n)]


B, T, H, K, V = 1, 3, 1, 2, 2
qkv = {"q": ([B, T, H, K], vals(T * K, 1)), "k": ([B, T, H, K], vals(T * K, 2)), "v": ([B, T, H, V], vals(T * V, 3))}
gdn = dict(qkv, g=([B, T, H], [0.0, -0.5, -69.0]), beta=([B, T, H], [0.0, 1.0, 0.5]))
meta = {"kind": "inputs", "layer": "gated_delta_rule", "config": '{"scale":"0.5","use_qk_l2norm_in_kernel":"false"}'}
write("safetensors", "valid_layer_gated_delta_rule.safetensors", safetensors(gdn, meta))
sgla = dict(qkv, g=([B, T, H], [0.0, -1.0, -0.25]), h0=([B, H, K, V], vals(K * V, 4)))
write("safetensors", "valid_layer_simple_gla.safetensors",
      safetensors(sgla, {"layer": "simple_gla", "config": '{"scale":"1"}'}))
write("safetensors", "valid_layer_bad_config.safetensors",
      safetensors(gdn, {"layer": "gated_delta_rule", "config": '{"scale":2}'}))
