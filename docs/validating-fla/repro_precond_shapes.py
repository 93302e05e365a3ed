"""Which shapes FLA 0.6.0's chunk_precond_gated_delta_rule survives, forward and backward,
on random inputs (needs torch, a CUDA GPU and fla-core; not ttrcheck). Each shape runs in
its own process with CUDA_LAUNCH_BLOCKING=1, so an illegal memory access in one neither
poisons the others nor hides which call raised it.

    python3 repro_precond_shapes.py                      # the shapes below
    python3 repro_precond_shapes.py B T H K V [h0]       # one shape (the child's form)

Found by scripts/validate-fla on the H200 (2026-12-04): ttrcheck's tiny cases (K = 4,
V = 3 and K = 3, V = 2) end in `CUDA error: an illegal memory access`. FLA's own guard
against Triton >= 3.4 < 3.7.1 on Hopper (its #640) refuses this backward before any
kernel runs; the script bypasses it (as validate-fla does) to see what runs past it."""
import os
import subprocess
import sys
import traceback

SHAPES = [(1, 7, 2, 4, 3, 0), (2, 5, 1, 3, 2, 1), (1, 7, 2, 16, 16, 0), (1, 256, 2, 16, 16, 0), (2, 64, 4, 64, 64, 0),
          (2, 64, 4, 64, 64, 1)]


def one(B, T, H, K, V, h0):
    import torch
    import torch.nn.functional as F
    import fla.ops.common.chunk_o as chunk_o
    from fla.ops.precond_gated_delta_rule import chunk_precond_gated_delta_rule
    chunk_o.TRITON_ABOVE_3_4_0 = False  # FLA's #640 guard (Triton >= 3.4 < 3.7.1 on Hopper) bypassed, as validate-fla
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    leaf = lambda x: x.detach().requires_grad_()  # noqa: E731
    q, k = leaf(torch.randn(B, T, H, K, device=dev, dtype=dt)), leaf(torch.randn(B, T, H, K, device=dev, dtype=dt))
    v = leaf(torch.randn(B, T, H, V, device=dev, dtype=dt))
    g, g_atk = leaf(F.logsigmoid(torch.randn(B, T, H, device=dev)).to(dt)), \
        leaf(F.logsigmoid(torch.randn(B, T, H, device=dev)).to(dt))
    beta, beta_atk = leaf(torch.rand(B, T, H, device=dev, dtype=dt)), leaf(torch.rand(B, T, H, device=dev, dtype=dt))
    kw = {"initial_state": leaf(torch.randn(B, H, K, V, device=dev, dtype=dt))} if h0 else {}
    stage = "forward"
    try:
        o, ht, at = chunk_precond_gated_delta_rule(q, k, v, g_atk, g, beta_atk, beta, output_final_state=True, **kw)
        torch.cuda.synchronize()
        stage = "backward"
        (o.float().sum() + ht.float().sum() + at.float().sum()).backward()
        torch.cuda.synchronize()
        print(f"B={B} T={T} H={H} K={K} V={V} h0={h0}: forward and backward ran; o finite: "
              f"{bool(torch.isfinite(o).all())}, dq finite: {bool(torch.isfinite(q.grad).all())}")
    except Exception as e:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if "/fla/" in f.filename]
        where = f"{os.path.relpath(frames[-1].filename, frames[-1].filename.split('/fla/')[0])}:{frames[-1].lineno} " \
                f"({frames[-1].line})" if frames else "?"
        print(f"B={B} T={T} H={H} K={K} V={V} h0={h0}: {stage} raised {type(e).__name__}: "
              f"{str(e).splitlines()[0]} at {where}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        one(*map(int, sys.argv[1:7]))
    else:
        env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
        # all at once (each compiles its own kernels), reported in order
        procs = [(s, subprocess.Popen([sys.executable, __file__, *map(str, s)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)) for s in SHAPES]
        for s, p in procs:
            out, err = p.communicate()
            print(out.strip() or f"{s}: exit {p.returncode}: {err.strip().splitlines()[-1:]}", flush=True)
