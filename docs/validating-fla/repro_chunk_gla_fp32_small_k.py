"""FLA 0.6.0's chunk_gla in fp32 (and fp16) at small head dimensions: what
scripts/validate-fla met on an H100 (2026-12-06, torch 2.11.0+cu130, Triton 3.6.0) on
ttrcheck's gla varlen case single_tokens (cu_seqlens [0, 1, 2, 3, 4, 5, 25], H = 2,
K = V = 8, fp32) was "CUDA error: misaligned address", where bf16 at V <= 8 fails to
compile instead (repro_chunk_gla_small_v.py). A CUDA fault poisons the process's
context, so each probe below runs in a fresh interpreter with CUDA_LAUNCH_BLOCKING=1
and the runner prints one line per probe, with the innermost FLA frame outside its
autotuning wrapper (fla/ops/utils), which names the op's stage that launched.
Random values stand in for the case's (the shapes alone decide).

Run on the same H100 model (2026-12-06, call 21; the first version of this file, which
printed only the innermost FLA frame, always fla/ops/utils/cache.py's autotuner):
  float32 K=V=8 and 16, fixed length and varlen, T = 25: the forward faults
    ("misaligned address"), at 16 as at 8;
  float16 K=V=8: forward ok, the backward fails to compile (tl.dot needs K >= 16: the
    missing shape check of repro_chunk_gla_small_v.py); K=V=16: forward and backward ok.
Yet the same op in fp32 at K = V = 16 ran forward and backward on the varlen cases
fla_boundaries (T = 2000) and chunk_edges (T = 200) in the validation's lanes, and at
K = V = 8 reached the backward on empty_sequences (T = 40). Every faulting run had
T = 25: the T column below (fp32, K = V = 16, fixed length) tests whether the fault
follows T rather than K.

Run again on an H100 (2026-12-06, calls 22 and 23, this version), float32:
  K=V=8 and 16, T = 25, fixed and varlen; K=V=16, T = 24, 26, 28, 32, fixed: the forward
    faults ("misaligned address") in chunk_gla_fwd_kernel_o, launched by
    chunk_gla_fwd_o_gk (fla/ops/gla/chunk.py, line 1013 in fla-core 0.6.0);
  K=V=16, T = 40, 64, 65, fixed: forward ok, backward ok.
So T decides, not K: the output kernel faults when the sequence is one chunk of at most
32 of its 64 rows, and runs from T = 40 on. That kernel is autotuned over 36
configurations on its first call in a process (its tuning key leaves T out), so which
configuration faults is not pinned down here.

    python3 docs/validating-fla/repro_chunk_gla_fp32_small_k.py [float32 float16 bfloat16]
"""
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

PROBE = r"""
import sys, torch, torch.nn.functional as F
import fla.ops.common.chunk_o as chunk_o
from fla.ops.gla import chunk_gla
chunk_o.TRITON_ABOVE_3_4_0 = False  # FLA's Hopper guard on gated backwards, bypassed as scripts/validate-fla does
dtype = getattr(torch, sys.argv[1]); K = int(sys.argv[2]); varlen = sys.argv[3] == "varlen"; T = int(sys.argv[4])
torch.manual_seed(0)
cu = torch.tensor([0, 1, 2, 3, 4, 5, T], device="cuda", dtype=torch.int32) if varlen else None
B, H = 1, 2
N = len(cu) - 1 if varlen else B
mk = lambda *s: torch.randn(*s, device="cuda", dtype=dtype).requires_grad_()
q, k, v = mk(B, T, H, K), mk(B, T, H, K), mk(B, T, H, K)
g = F.logsigmoid(torch.randn(B, T, H, K, device="cuda")).to(dtype).requires_grad_()
h0 = torch.randn(N, H, K, K, device="cuda", dtype=torch.float32).requires_grad_()
o, ht = chunk_gla(q, k, v, g, initial_state=h0, output_final_state=True, cu_seqlens=cu)
torch.cuda.synchronize()
print("forward ok", end="; ", flush=True)
(o.float().sum() + ht.float().sum()).backward()
torch.cuda.synchronize()
print("backward ok", flush=True)
"""


PROBES = ([(d, K, m, 25) for d in ("float32", "float16", "bfloat16") for K in (8, 16) for m in ("fixed", "varlen")]
          + [("float32", 16, "fixed", T) for T in (24, 26, 28, 32, 40, 64, 65)])


def probe(args):
    dtype, K, mode, T = args
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    p = subprocess.run([sys.executable, "-c", PROBE, dtype, str(K), mode, str(T)], env=env,
                       capture_output=True, text=True, timeout=900)
    tail = [l for l in p.stderr.splitlines() if l.strip()]
    frames = [l.strip() for l in tail if l.strip().startswith('File "') and "/fla/" in l]
    stage = [f for f in frames if "/fla/ops/utils/" not in f]
    why = tail[-1] if tail else ""
    return (f"{dtype:9} K=V={K:<2} T={T:<3} {mode:6}: {p.stdout.strip() or '-'}"
            + (f" | {why[:160]} | FLA stage: {stage[-1] if stage else '?'}" if p.returncode else ""))


def main():
    # The probes compile their own kernels (tens of seconds each): side by side.
    chosen = [x for x in PROBES if len(sys.argv) < 2 or x[0] in sys.argv[1:]]
    with ThreadPoolExecutor(len(chosen)) as pool:
        for line in pool.map(probe, chosen):
            print(line, flush=True)


if __name__ == "__main__":
    main()
