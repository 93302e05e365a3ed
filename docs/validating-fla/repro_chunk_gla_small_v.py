"""FLA 0.6.0's chunk_gla accepts a value head dimension V < 16 in the forward but its
backward does not compile (docs/validating-fla.md, "Refusals"). The call below is the one
scripts/validate-fla made on the H200 (torch 2.11.0+cu130, Triton 3.6.0, fla-core 0.6.0)
for ttrcheck's gla tiny.basic case (B=1 T=7 H=2 K=4 V=3, bf16), with random values in
place of the case's (the shapes alone decide): it raised

    triton.compiler.errors.CompilationError: at 39:15: ... b_dA = tl.dot(b_do, b_v, b_dA)
    AssertionError: Input shapes should have M >= 1, N >= 1 and K >= 16

from chunk_gla_bwd_dA (fla/ops/gla/chunk.py), which tiles V by
BV = min(64, triton.next_power_of_2(V)) = 4 and contracts over it with tl.dot, whose
operands need an inner dimension of at least 16: V <= 8 cannot compile (V >= 16 was not
reached in the time: chunk_gla did not come back on the standard suite).
chunk_simple_gla and chunk_linear_attn refuse their odd-sized shapes with a clear
message (chunk_bwd_dv: "requires even K and V"); chunk_gla has no such check.
This file itself has not been run on a GPU yet; run it there with fla-core installed:

    python3 docs/validating-fla/repro_chunk_gla_small_v.py
"""
import torch
import torch.nn.functional as F
from fla.ops.gla import chunk_gla

torch.manual_seed(0)
B, T, H, K, V = 1, 7, 2, 4, 3
dev, dt = "cuda", torch.bfloat16
q = torch.randn(B, T, H, K, device=dev, dtype=dt, requires_grad=True)
k = torch.randn(B, T, H, K, device=dev, dtype=dt, requires_grad=True)
v = torch.randn(B, T, H, V, device=dev, dtype=dt, requires_grad=True)
g = F.logsigmoid(torch.randn(B, T, H, K, device=dev)).to(dt).requires_grad_()
o, ht = chunk_gla(q, k, v, g, output_final_state=True)
print("forward ran:", tuple(o.shape), tuple(ht.shape))
(o.float().sum() + ht.float().sum()).backward()  # raises the CompilationError above
print("backward ran: the limit is gone in this FLA")
