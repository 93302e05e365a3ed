#!/usr/bin/env python3
"""FLA 0.6.0's chunk_gated_delta_rule backward (bf16) replayed on the CPU for a one-token
sequence with an initial state, from a run `scripts/validate-fla --capture` saved on the H200
(docs/validating-fla.md, *Failures*: the varlen_16x_32k `dg` row).

    PYTHONPATH=build/default/python python3 docs/validating-fla/replay_gdn_dg_one_token.py \
        cap/chunk_gated_delta_rule.production.varlen_16x_32k.bf16.npz

The capture is the lane chunk_gated_delta_rule:production/bf16:cases=varlen_16x_32k:sample=n1,6/0,7
(sequence 1 of that case is one token long, cu_seqlens 4096..4097). For that token the script
follows FLA's kernels (recompute_w_u_fwd, chunk_gated_delta_rule_fwd_h, chunk_bwd_dv_local,
chunk_gated_delta_rule_bwd_dhu, chunk_bwd_dqkwg, prepare_wy_repr_bwd; fla-core 0.6.0) in
float64, rounding to bf16 wherever FLA stores or casts to bf16, and prints:

1. the exact dg (float64, from the recurrence) and FLA's;
2. the replay: exact when nothing is rounded, and with every bf16 store; its dq and dv equal
   FLA's bit for bit, so the replay's intermediates are FLA's;
3. FLA's dg minus the replay's, and the same error produced by the one reduction the replay
   keeps exact: chunk_bwd_kernel_dqkwg's `b_dg_last += tl.sum(b_h * b_dh)`, whose operands are
   bf16 tiles, so Triton multiplies and sums them in bf16 (tl.sum keeps a float input's
   dtype). Emulated with bf16 products and bf16 additions in random orders (the kernel's own
   order is its register layout's and is not reproduced).

Needs NumPy and ttrcheck (to read the capture); no GPU.
"""
import sys

import numpy as np
from ttrcheck.harness import Execution

RCP_LN2 = float(np.float32(1.4426950408889634))


def bf16(x):
    """Round to bfloat16 (nearest, ties to even), returned as float64."""
    x = np.asarray(x, np.float64)
    b = np.atleast_1d(x.astype(np.float32)).view(np.uint32).astype(np.uint64)
    b = ((b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)) << np.uint64(16)
    return b.astype(np.uint32).view(np.float32).astype(np.float64).reshape(x.shape)


def token(e, hi):
    bi = e.backward_inputs
    return {n: bi[n][0, 0, hi] for n in ("q", "k", "v", "g", "beta", "do")} | \
        {"h0": bi["h0"][0, hi], "dht": bi["dht"][0, hi]}


def exact_dg(t, scale):
    K = t["q"].size
    M = np.eye(K) - t["beta"] * np.outer(t["k"], t["k"])
    dS = scale * np.outer(t["q"], t["do"]) + t["dht"]
    return np.sum(dS * (np.exp(t["g"]) * M @ t["h0"]))


def replay(t, scale, rounded):
    """FLA's dg (and dq, dv) for the token; bf16 stores rounded when `rounded`."""
    r = bf16 if rounded else (lambda x: np.asarray(x, np.float64))
    q, k, v, beta, h0, do, dht = (t[n] for n in ("q", "k", "v", "beta", "h0", "do", "dht"))
    E = 2.0 ** float(np.float32(t["g"] * RCP_LN2))    # exp2 of the scaled cumulative gate
    u = r(v * beta)                                     # recompute_w_u_fwd (A = 1 for one token)
    w = r(k * beta * E)
    v_new = r(u - w @ h0)                               # chunk_gated_delta_rule_fwd_h
    dvl = r(r(scale * (k @ q)) * do)                    # chunk_bwd_dv_local
    dh = r(dht)                                         # chunk_gated_delta_rule_bwd_dhu
    dv2 = r(k @ dh + dvl)
    dg_last = E * np.sum(h0 * dh)                       # chunk_bwd_kernel_dqkwg (this sum exact here)
    ds = r((do @ v_new) * scale)
    dk0 = dh @ v_new
    dq = h0 @ do * E * scale + ds * k
    dk = dk0 + ds * q
    dw = r(-(h0 @ dv2))
    dg = np.sum(dq * q) - np.sum(dk * k) + dg_last + np.sum(dk0 * k)
    dg += np.sum(dw * (k * beta * E))                   # prepare_wy_repr_bwd's dg2
    return dg, r(dq), r(dv2 * beta), E


def bf16_sum(p, order, per=128):
    """bf16 additions: `per` terms in sequence per thread, then a pairwise tree."""
    one = lambda x: float(bf16(np.array([x]))[0])
    parts = []
    for j in range(0, p.size, per):
        s = 0.0
        for y in p[order[j:j + per]]:
            s = one(s + y)
        parts.append(s)
    while len(parts) > 1:
        parts = [one(parts[i] + parts[i + 1]) for i in range(0, len(parts) - 1, 2)] + \
            ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def main():
    e = Execution.load(sys.argv[1])
    scale = e.backward_inputs["q"].shape[-1] ** -0.5
    rng = np.random.default_rng(0)
    print(f"{e.fn_name} {e.suite}.{e.case} {e.dtype}, {e.note}; cu_seqlens {e.backward_inputs['cu_seqlens'].tolist()}")
    for hi, h in enumerate(e.sample["h"]):
        t = token(e, hi)
        fla = e.grads["dg"][0, 0, hi]
        x = exact_dg(t, scale)
        plain, _, _, _ = replay(t, scale, False)
        full, dq, dv, E = replay(t, scale, True)
        same = np.array_equal(dq, e.grads["dq"][0, 0, hi]) and np.array_equal(dv, e.grads["dv"][0, 0, hi])
        print(f"head {h}: exact dg {x:.6g}; FLA {fla:.6g}; replay {plain:.6g} unrounded, {full:.6g} with the bf16 "
              f"stores; its dq and dv equal FLA's: {same}")
        p = bf16(t["h0"] * t["dht"]).ravel()
        errs = np.array([bf16_sum(p, rng.permutation(p.size)) for _ in range(100)]) - np.sum(t["h0"] * t["dht"])
        print(f"   FLA - replay {fla - full:+.4g}; tl.sum(b_h * b_dh) in bf16 moves dg by E x (error): "
              f"median |.| {E * np.median(np.abs(errs)):.3g}, 10-90 % {E * np.percentile(errs, 10):+.3g}.."
              f"{E * np.percentile(errs, 90):+.3g} (100 orders); sum |h0 dht| {np.abs(t['h0'] * t['dht']).sum():.4g}")


if __name__ == "__main__":
    main()
