"""hybrid-model-factory's GKA (awslabs/hybrid-model-factory, ``gka_chebyshev_gla``) as
ttrcheck's ``gka`` layer: the conventions of docs/validating-fla.md ("hybrid-model-
factory's GKA"), read from its source (commit 04b6242), applied as a wrapper so that
``ttrcheck.torch.validate`` can judge it forward and backward.

    from hmf.model.hybrid_zoo.layers.gated_kalmanet.ops.chebyshev import gka_chebyshev_gla
    import ttrcheck.torch, ttrcheck.hmf
    fn = ttrcheck.hmf.gka_chebyshev_gla_as_gka(gka_chebyshev_gla)
    result = ttrcheck.torch.validate(fn, "gka", suites=["tiny", "standard"], dtypes=["bf16", "fp32"],
                                     device="cuda", config=ttrcheck.hmf.CONFIG, adapter=ttrcheck.hmf.ADAPTER)

Its source is fetched and carried to the GPU machine, never committed (its
``ops/chebyshev/`` folder under its package path, empty ``__init__`` files above it, in
``$DEV/hmf``; it imports FLA). ``scripts/validate-fla`` runs it as the op
``gka_chebyshev_gla``, e.g. the device lane
``gka_chebyshev_gla:tiny/fp32,standard/bf16:cases=basic+realistic`` of
``scripts/validate-fla-device`` (the cases without initial states). What the runs found:
docs/validating-fla/hybrid-model-factory.md.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from .fla import Adapter

__all__ = ["ADAPTER", "CONFIG", "gka_chebyshev_gla_as_gka"]

# ttrcheck's gka with the solver hybrid-model-factory runs: Chebyshev (GKA Alg. 1),
# 30 iterations from ω₀ = 2, λ_t = 0.02‖H_t‖_F — its defaults (ridge_strength=0.02,
# num_iter=30).
CONFIG = {"solver": "chebyshev", "iters": 30, "omega0": 2, "a": 0.02}

# Forward: its algorithm is chunkwise (Chebyshev per chunk of 64 against the chunk-initial
# H, then FLA's chunk_simple_gla), ttrcheck's gka chunk form. ttrcheck's gka has no
# chunk backward form: the backward is judged under the sequential one's model.
ADAPTER = Adapter("gka", "chunk", backward_form="sequential",
                  note="hybrid-model-factory gka_chebyshev_gla: gk = g, alpha = 1 when absent, beta by sqrt on k and v")


def gka_chebyshev_gla_as_gka(fn: Callable, chunk_size: int = 64) -> Callable:
    """``fn`` (hybrid-model-factory's ``gka_chebyshev_gla``) called with ttrcheck's gka names:
    q, k, v, g [B,T,H] (log γ, for both H and S: its ``gk = g``), optional beta (our write gate:
    it has none, so k and v are scaled by √β, giving H += β k kᵀ and S += β k vᵀ exactly in
    exact arithmetic) and alpha (absent: ones, q̃ = x); config scale (its ``gla_scale``), a
    (``ridge_strength``), iters (``num_iter``). Returns {"o", "hkk", "ht"}; initial states
    are not supported by ``gka_chebyshev_gla`` and are refused."""

    def gka(q, k, v, g, beta=None, alpha=None, h0=None, hkk0=None, scale=None, a=0.02, iters=30,
            solver="chebyshev", omega0=2.0, use_qk_l2norm_in_kernel=False, **unused: Any) -> Dict[str, Any]:
        if h0 is not None or hkk0 is not None:
            raise ValueError("gka_chebyshev_gla takes no initial states (h0, hkk0)")
        if solver != "chebyshev" or float(omega0) != 2.0 or use_qk_l2norm_in_kernel:
            raise ValueError("gka_chebyshev_gla runs solver=chebyshev, omega0=2, no in-kernel l2norm")
        if beta is not None:
            root = beta.sqrt()[..., None]
            k, v = (root * k).to(k.dtype), (root * v).to(v.dtype)
        if alpha is None:
            alpha = q.new_ones(q.shape[:-1])
        o, hkk, ht = fn(q=q, k=k, v=v, alpha=alpha, g=g, gk=g,
                        gla_scale=q.shape[-1] ** -0.5 if scale is None else scale, ridge_strength=a,
                        num_iter=int(iters), bp_lambda=True, chunk_size=chunk_size)
        return {"o": o, "hkk": hkk, "ht": ht}

    gka.__name__ = "gka_chebyshev_gla"
    return gka
