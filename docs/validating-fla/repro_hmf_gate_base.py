"""hybrid-model-factory's gka_chebyshev_gla with fla-core 0.6.0: the key covariance H decays
by 2^g across chunks instead of e^g (needs torch, a CUDA GPU, fla-core and
hybrid-model-factory's training/src on PYTHONPATH; not ttrcheck).

    PYTHONPATH=<hybrid-model-factory>/training/src python3 repro_hmf_gate_base.py

gka_chebyshev_gla's final key covariance kk_final = H_T of H_t = γ_t H_{t-1} + k_t k_tᵀ,
γ_t = e^{g_t} (its docstring: g, gk are log forget gates; the same gk drives the Chebyshev
kernel's own exp(gkk)). Its ChebyshevIteration passes chunk_local_cumsum(gk) to FLA's
chunk_fwd_h, which in fla-core 0.6.0 decays by exp2 (fla/ops/common/chunk_h.py: b_h *=
exp2(b_g_last)) and expects gates pre-scaled by 1/ln 2 (FLA's own callers pass
scale=RCP_LN2 to chunk_local_cumsum). The script computes H_T in float64 on the CPU with
both bases from the same inputs and prints kk_final's relative error against each.
Found by scripts/validate-fla (docs/validating-fla/hybrid-model-factory.md)."""
import torch
import torch.nn.functional as F
from hmf.model.hybrid_zoo.layers.gated_kalmanet.ops.chebyshev import gka_chebyshev_gla

torch.manual_seed(0)
B, T, H, D = 1, 256, 2, 32
dev = "cuda"
for dt in (torch.float32, torch.bfloat16):
    q = torch.randn(B, T, H, D, device=dev).to(dt)
    k = (torch.randn(B, T, H, D, device=dev) / D ** 0.5).to(dt)
    v = torch.randn(B, T, H, D, device=dev).to(dt)
    g = F.logsigmoid(torch.randn(B, T, H, device=dev) + 3).to(dt)  # log γ in (-inf, 0): γ mostly 0.9-1
    alpha = torch.ones(B, T, H, device=dev, dtype=dt)
    o, kk_final, kv_final = gka_chebyshev_gla(q, k, v, alpha, g, g, D ** -0.5)
    kk = kk_final.double().cpu()
    kd, gd = k.double().cpu(), g.double().cpu()
    for name, base in (("e^g (its docstring)", torch.e), ("2^g", 2.0)):
        Hs = torch.zeros(B, H, D, D, dtype=torch.float64)
        for t in range(T):
            Hs = base ** gd[:, t, :, None, None] * Hs + kd[:, t, :, :, None] * kd[:, t, :, None, :]
        rel = ((kk - Hs).norm() / Hs.norm()).item()
        print(f"{str(dt):15s} kk_final vs H_T with decay {name:20s}: relative error {rel:.3e}")
