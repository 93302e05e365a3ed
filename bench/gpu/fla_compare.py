#!/usr/bin/env python3
"""gated_delta_rule chunk forward: ttrcheck's CUDA kernel vs flash-linear-attention's
Triton chunk_gated_delta_rule, same inputs, same run (scripts/gpu-check bench).

Usage: fla_compare.py BENCH_BINARY WORKDIR [B T H K V]
Prints the machine's measured ceilings (bf16 matmul 8192^3, device-to-device copy),
both medians, achieved TFLOP/s and GB/s, and the relative RMS between the outputs.
"""
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
import triton.testing


def flops(B, T, H, K, V, C=64):
    # Per chunk: A = K Kᵀ, W = T(βK), U = T(βV), Q Kᵀ, scores·Δ (2C²(3K+2V)),
    # Δ = U − W h, h += wᵀΔ, Q h (6CKV); the 64×64 triangular solve (~C³/3) is left out.
    n = math.ceil(T / C)
    return B * H * n * (2 * C * C * (3 * K + 2 * V) + 6 * C * K * V)


def min_bytes(B, T, H, K, V):
    # Each input read once, each output written once: q, k, v, o in bf16, beta bf16,
    # g fp32, ht fp32.
    return B * T * H * (2 * K * 2 + 2 * V * 2 + 2 + 4) + B * H * K * V * 4


def main():
    binary, work = sys.argv[1], sys.argv[2]
    B, T, H, K, V = (int(x) for x in sys.argv[3:8]) if len(sys.argv) >= 8 else (4, 4096, 8, 128, 128)
    os.makedirs(work, exist_ok=True)
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    # Ceilings, measured here on random data.
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    mm_ms = triton.testing.do_bench(lambda: a @ b, warmup=100, rep=500, return_mode="median")
    mm_tflops = 2 * 8192**3 / (mm_ms * 1e-3) / 1e12
    del a, b
    x = torch.randn(2**29, device=dev, dtype=torch.float32)  # 2 GiB
    y = torch.empty_like(x)
    cp_ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=50, rep=300, return_mode="median")
    copy_gbs = 2 * x.numel() * 4 / (cp_ms * 1e-3) / 1e9
    del x, y
    torch.cuda.empty_cache()

    g0 = torch.Generator(device=dev).manual_seed(0)
    q = torch.randn(B, T, H, K, device=dev, generator=g0).to(torch.bfloat16)
    k = F.normalize(torch.randn(B, T, H, K, device=dev, generator=g0), dim=-1).to(torch.bfloat16)
    v = torch.randn(B, T, H, V, device=dev, generator=g0).to(torch.bfloat16)
    g = F.logsigmoid(torch.randn(B, T, H, device=dev, generator=g0) + 4.0).float()
    beta = torch.rand(B, T, H, device=dev, generator=g0).to(torch.bfloat16)
    for nm, t in (("q", q), ("k", k), ("v", v), ("beta", beta)):
        t.contiguous().view(torch.int16).cpu().numpy().tofile(f"{work}/{nm}.bf16")
    g.contiguous().cpu().numpy().tofile(f"{work}/g.f32")

    ours = subprocess.run([binary, work, str(B), str(T), str(H), str(K), str(V), "50"], check=True,
                          capture_output=True, text=True)
    ours = json.loads(ours.stdout.strip().splitlines()[-1])
    # Per-stage times (events around each launch; a separate run, since timing syncs).
    staged = subprocess.run([binary, work, str(B), str(T), str(H), str(K), str(V), "5"], check=True,
                            capture_output=True, text=True, env={**os.environ, "TTR_GPU_STAGE_TIMING": "1"})
    stages = [l for l in staged.stderr.splitlines() if l.startswith("stage ms")]

    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    scale = K ** -0.5

    def fla():
        return chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, output_final_state=True)

    with torch.inference_mode():
        o_fla, ht_fla = fla()  # compiles (slow the first time)
        fla_ms = triton.testing.do_bench(fla, warmup=100, rep=1000, return_mode="median")
        fla_ms2 = triton.testing.do_bench(fla, warmup=100, rep=1000, return_mode="median")
    import numpy as np

    o_ttr = torch.from_numpy(np.fromfile(f"{work}/o_ttr.bf16", dtype=np.int16)).view(torch.bfloat16)
    o_ttr = o_ttr.reshape(B, T, H, V).float()
    of = o_fla.float().cpu()
    rel = ((o_ttr - of).norm() / of.norm()).item()
    ht_ttr = torch.from_numpy(np.fromfile(f"{work}/ht_ttr.f32", dtype=np.float32)).reshape(B, H, K, V)
    ht_f = ht_fla.float().cpu()
    if ht_f.shape != ht_ttr.shape:  # FLA may keep the state as [V, K]
        ht_f = ht_f.transpose(-1, -2)
    rel_ht = ((ht_ttr - ht_f).norm() / ht_f.norm()).item()

    fl, by = flops(B, T, H, K, V), min_bytes(B, T, H, K, V)
    res = {
        "device": name, "shape": dict(B=B, T=T, H=H, K=K, V=V), "ceiling_bf16_tflops": mm_tflops,
        "ceiling_copy_gbs": copy_gbs, "flop": fl, "min_bytes": by,
        "ttr_chunk_ms": ours["chunk_ms"], "ttr_chunk_ms_repeat": ours["chunk_ms_repeat"],
        "ttr_recurrent_ms": ours["recurrent_ms"], "fla_ms": fla_ms, "fla_ms_repeat": fla_ms2,
        "ratio_ttr_over_fla": ours["chunk_ms"] / fla_ms, "rel_rms_o_ttr_vs_fla": rel, "rel_rms_ht_ttr_vs_fla": rel_ht,
    }
    for side, ms in (("ttr", ours["chunk_ms"]), ("fla", fla_ms)):
        res[f"{side}_tflops"] = fl / (ms * 1e-3) / 1e12
        res[f"{side}_gbs"] = by / (ms * 1e-3) / 1e9
    print(json.dumps(res))
    print(f"\n{name}: gated_delta_rule chunk fwd B={B} T={T} H={H} K={K} V={V} bf16")
    print(f"ceilings: bf16 matmul {mm_tflops:.0f} TFLOP/s, copy {copy_gbs:.0f} GB/s; "
          f"floor {max(fl / mm_tflops / 1e12, by / copy_gbs / 1e9) * 1e3:.4f} ms")
    print(f"{'kernel':<28}{'median ms':>12}{'TFLOP/s':>10}{'GB/s':>10}")
    print(f"{'ttrcheck cuda chunk':<28}{ours['chunk_ms']:>12.4f}{res['ttr_tflops']:>10.1f}{res['ttr_gbs']:>10.0f}")
    print(f"{'FLA chunk_gated_delta_rule':<28}{fla_ms:>12.4f}{res['fla_tflops']:>10.1f}{res['fla_gbs']:>10.0f}")
    print(f"{'ttrcheck cuda recurrent':<28}{ours['recurrent_ms']:>12.4f}")
    if stages:
        print("ttrcheck " + stages[len(stages) // 2])
    print(f"ttr/fla time ratio {res['ratio_ttr_over_fla']:.2f}; rel RMS o {rel:.2e}, ht {rel_ht:.2e}")


if __name__ == "__main__":
    main()
