#!/usr/bin/env python3
"""Per-stage roofline of the delta family's CUDA chunk forward and backward (bf16 or fp32,
gated_delta_rule's scalar gate): for each stage, the algorithm's FLOP and the compulsory
traffic of the stage as designed, against the measured bf16 matmul and copy ceilings.

Usage:
  stage_roofline.py --shape B T H K V (--ceilings TFLOPS GBS | --ceilings-from FLA_OUT)
                    [--dtype bf16|fp32] [--markdown] [--stage PASS.NAME=MS ...] [STAGE_LOG ...]

STAGE_LOG: stderr of a run with TTR_GPU_STAGE_TIMING=1 (lines "stage ms: name ms ...";
gdn_train_bench, scripts/device-gdn-bench's stages-T*-new-3.txt); the median of each
stage over the lines is taken, forward lines told from backward ones by their names.
--stage forward.output=0.241 gives a time by hand (e.g. a documented median).
FLA_OUT: the output of bench/gpu/fla_backward_compare.py (its JSON line has the ceilings).

FLOP: every product 2·m·n·k with triangles counted full (as fla_backward_compare.py's
totals, which the stages sum to); the triangular inverse and element-wise work are not
counted. Traffic: per chunk, every input of the stage read once and every output written
once (gpu/family/delta_chunk_stages.cuh's Work, delta_chunk_backward/common.cuh's);
re-reads by several blocks (the state passes read a chunk's W once per column tile) and
the per-head states h0, ht, dht, dh0 are left out. The floor of a stage is
max(FLOP / matmul ceiling, bytes / copy ceiling); "to 2x floor" is the speed-up that
would bring the stage to half the attainable rate, i.e. its time to twice its floor.
"""
import argparse
import json
import math
import re
import statistics
import sys

C = 64
FORWARD = ("ut_transform", "state_pass", "output")
BACKWARD = ("ut_transform", "state_pass", "prep", "dstate_pass", "dqkwg", "wy")


def stage_model(K, V, e):
    """(pass, stage) -> (FLOP, bytes read, bytes written) per chunk and head; e the
    activation dtype's bytes (2 bf16, 4 fp32), gates and fp32 workspaces 4 bytes."""
    f = 4
    nvt = V // (32 if V % 32 == 0 else 16)           # dstate_pass column tiles
    nkb = math.ceil(K / (64 if e == 2 else 32))      # dqkwg key blocks
    s0 = K * V * e                                   # a chunk-initial state, stored narrowed (FLA's h)
    ut_r = C * K * e + C * V * e + C * e + C * f     # k, v, beta, g
    ut_w = 2 * C * K * e + C * V * e + C * f         # W, WD, U, G (b)
    sp_r = 2 * C * K * e + C * V * e + C * f         # W, WD, U, G
    return {
        ("forward", "ut_transform"): (4 * C * C * K + 2 * C * C * V, ut_r, ut_w),
        ("forward", "state_pass"): (4 * C * K * V, sp_r, C * V * e + K * V * e),  # Δ, S_0 (E)
        ("forward", "output"): (2 * C * K * V + 2 * C * C * K + 2 * C * C * V,
                                2 * C * K * e + C * f + K * V * e + C * V * e, C * V * e),
        ("backward", "ut_transform"): (4 * C * C * K + 2 * C * C * V, ut_r, ut_w + C * C * e),  # + T
        ("backward", "state_pass"): (4 * C * K * V, sp_r, C * V * e + s0),  # Δ, S_0 (E), the forward's stage
        ("backward", "prep"): (2 * C * C * K, 2 * C * K * e + C * f, C * C * e + C * K * e),  # M, Q ⊙ e^b
        ("backward", "dstate_pass"): (2 * C * C * V + 6 * C * K * V,
                                      3 * C * K * e + C * C * e + C * V * e + s0 + C * f,
                                      K * V * e + C * V * e + nvt * K * f),  # dH, dΔ, row sums
        ("backward", "dqkwg"): (6 * C * K * V + 2 * C * C * V + 6 * C * C * K,
                                3 * C * V * e + K * V * e + 2 * C * K * e + s0 + C * f + nvt * K * f,
                                2 * C * K * e + C * K * f + nkb * C * f),  # dq, dWy, dWk, gate partials
        ("backward", "wy"): (10 * C * C * K + 4 * C * C * V + 4 * C**3,
                             C * C * e + 2 * C * K * e + 2 * C * V * e + C * f + C * e + C * K * f + nkb * C * f,
                             C * V * e + C * K * e + C * e + C * f),  # dv, dk, dβ, dg
    }


def parse_stage_logs(paths):
    times = {}
    for p in paths:
        with open(p) as fh:
            for line in fh:
                if not line.startswith("stage ms:"):
                    continue
                items = line.split()[2:]
                names = items[0::2]
                which = "backward" if "prep" in names else "forward"
                for nm, ms in zip(names, items[1::2]):
                    times.setdefault((which, nm), []).append(float(ms))
    return {k: statistics.median(v) for k, v in times.items()}


def ceilings_from(path):
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line.startswith("{"):
                d = json.loads(line)
                return d["ceiling_bf16_tflops"], d["ceiling_copy_gbs"]
    sys.exit(f"stage_roofline: no JSON line with the ceilings in {path}")


def table(shape, dtype, tflops, gbs, times):
    B, T, H, K, V = shape
    e = 2 if dtype == "bf16" else 4
    chunks = B * H * math.ceil(T / C)
    rows = []
    for key, (fl, rd, wr) in stage_model(K, V, e).items():
        flop, byt = chunks * fl, chunks * (rd + wr)
        t_mm, t_mem = flop / (tflops * 1e12) * 1e3, byt / (gbs * 1e9) * 1e3
        floor = max(t_mm, t_mem)
        ms = times.get(key)
        rows.append(dict(pass_=key[0], stage=key[1], ms=ms, gflop=flop / 1e9, mb=byt / 1e6,
                         floor=floor, bound="memory" if t_mem >= t_mm else "compute"))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", nargs=5, type=int, required=True, metavar=("B", "T", "H", "K", "V"))
    ap.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--ceilings", nargs=2, type=float, metavar=("TFLOPS", "GBS"))
    g.add_argument("--ceilings-from", metavar="FLA_OUT")
    ap.add_argument("--stage", action="append", default=[], metavar="PASS.NAME=MS")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("logs", nargs="*")
    a = ap.parse_args(argv)
    B, T, H, K, V = a.shape
    if min(a.shape) < 1 or K % 16 or V % 16:
        ap.error(f"--shape {a.shape}: need positive sizes, K and V multiples of 16")
    tflops, gbs = a.ceilings if a.ceilings else ceilings_from(a.ceilings_from)
    if not (tflops > 0 and gbs > 0):
        ap.error("the ceilings must be positive")
    times = parse_stage_logs(a.logs)
    for s in a.stage:
        m = re.fullmatch(r"(forward|backward)\.(\w+)=([0-9.]+(?:e-?\d+)?)", s)
        if not m or (m.group(1), m.group(2)) not in stage_model(K, V, 2):
            ap.error(f"--stage '{s}': expected forward|backward.<stage>=<ms> with a stage of {FORWARD} / {BACKWARD}")
        times[(m.group(1), m.group(2))] = float(m.group(3))
    rows = table(a.shape, a.dtype, tflops, gbs, times)
    print("\n".join(render(rows, tflops, gbs, a.markdown,
                           f"ceilings {tflops:.0f} TFLOP/s, {gbs:.0f} GB/s; B={B} T={T} H={H} K={K} V={V} {a.dtype}")))


def with_sums(rows):
    """The rows, then a sum per pass and over both (its time only where every stage has one)."""
    sums = {}
    for r in rows:
        for scope in (r["pass_"], "all"):
            s = sums.setdefault(scope, dict(pass_=scope, stage="(sum)", ms=0.0, gflop=0.0, mb=0.0, floor=0.0, bound=""))
            for k in ("gflop", "mb", "floor"):
                s[k] += r[k]
            s["ms"] = None if s["ms"] is None or r["ms"] is None else s["ms"] + r["ms"]
    return rows + [sums[k] for k in ("forward", "backward", "all") if k in sums]


def render(rows, tflops, gbs, markdown, title):
    head = ["pass", "stage", "ms", "GFLOP", "MB", "TFLOP/s (% mm)", "GB/s (% copy)", "floor ms", "bound",
            "ms / floor", "to 2x floor"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] if markdown else [title, "  ".join(head)]
    for r in with_sums(rows):
        ms = r["ms"]
        cells = [r["pass_"], r["stage"], "-", f"{r['gflop']:.1f}", f"{r['mb']:.0f}", "-", "-", f"{r['floor']:.3f}",
                 r["bound"], "-", "-"]
        if ms is not None:
            tf, gb = r["gflop"] / ms, r["mb"] / ms  # GFLOP/ms = TFLOP/s, MB/ms = GB/s
            cells[2], cells[5], cells[6] = f"{ms:.3f}", f"{tf:.1f} ({100 * tf / tflops:.1f} %)", f"{gb:.0f} ({100 * gb / gbs:.1f} %)"
            cells[9] = f"{ms / r['floor']:.2f}"
            cells[10] = f"{ms / (2 * r['floor']):.2f}x" if ms > 2 * r["floor"] else "reached"
        out.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    return out


if __name__ == "__main__":
    main()
