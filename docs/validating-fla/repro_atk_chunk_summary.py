"""FLA 0.6.0's chunked ATK preconditioner (fla/ops/atk, shared by chunk_precond_gated_delta_rule
and chunk_precond_kda) forms the decay from token t to the chunk's end as

    decays = tl.exp(sa_val - tl.cumsum(log_g_val))      # sa_val = tl.sum(log_g_val)

in `_forward_chunk_summary` and `_atk_backward_chunk_summary`: the chunk's total by a tree
reduction minus a running sum by a scan. In exact arithmetic the exponent at the chunk's last
token is 0; in fp32 it is the difference of two roundings of the same sum, about
|Σ log_g| · 2^-24, so the last token's decay is e^ε instead of 1 and every chunk summary
(the A state carried between chunks, final_A_state, and in the backward dk, dg_atk,
dbeta_atk at the chunk's last tokens) is off by that relative amount. Gates near 0
(log_g ≈ -69 for a decay of 1e-30) make |Σ log_g| thousands: errors of 1e-5..1e-4 where
fp32 allows a few 1e-7. The fix is one line in each kernel:

    decays = tl.exp(tl.cumsum(log_g_val, reverse=True) - log_g_val)   # Σ_{s>t} log_g_s

This script computes final_A_state of one 64-token chunk with FLA's chunk_atk_fwd and
the same recurrence A_t = e^{g_t} A_{t-1} + β_t k_t² in float64 (NumPy), and prints the
relative error. Needs torch and fla-core 0.6.0; on a CUDA GPU, or on the CPU in Triton's
interpreter with --interpret (ttrcheck's patched interpreter: ttrcheck.triton_interpreter).

    python3 repro_atk_chunk_summary.py [--interpret]

Measured on the CPU in the interpreter (2026-12-05, Triton 3.4.0): 1.00e-04 as shipped,
2.35e-07 with the fix in a patched copy of fla placed first on PYTHONPATH.

Found by ttrcheck's stress case decay_beta_edges (decays exactly 1 and 1e-30) in fp32, on
the CPU (2026-12-05): docs/validating-fla/failures.md, "precond stress".
"""
import sys

import numpy as np

if "--interpret" in sys.argv:
    from ttrcheck import triton_interpreter
    triton_interpreter.enable()
import torch  # noqa: E402
from fla.ops.atk import chunk_atk_fwd  # noqa: E402

dev = "cpu" if "--interpret" in sys.argv else "cuda"
T, D = 64, 16
rng = np.random.default_rng(0)
k = rng.standard_normal((1, T, 1, D)) / 4
beta = np.ones((1, T, 1))
log_g = np.full((1, T, 1), -0.05)
log_g[0, [5, 20, 40], 0] = -69.0  # decays of 1e-30 (ttrcheck's decay edges), |Σ log_g| ≈ 210
k32, b32, g32 = (torch.tensor(x, dtype=torch.float32, device=dev) for x in (k, beta, log_g))
_, at = chunk_atk_fwd(k32, b32, g32, chunk_size=64, output_final_state=True)
got = at.double().cpu().numpy().reshape(D)

# The exact recurrence, from the same fp32 inputs, in float64.
k64, b64, g64 = (x.double().cpu().numpy() for x in (k32, b32, g32))
A = np.zeros(D)
for t in range(T):
    A = np.exp(g64[0, t, 0]) * A + b64[0, t, 0] * k64[0, t, 0] ** 2
rel = np.abs(got - A) / np.abs(A)
print(f"final_A_state: max relative error {rel.max():.2e} (fp32 unit roundoff 6.0e-08; "
      f"|sum log_g| = {abs(g64.sum()):.1f})")
