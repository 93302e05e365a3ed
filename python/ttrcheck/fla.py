"""How flash-linear-attention's ops map onto ttrcheck's layers (the adapter table).

Facts from FLA's source (fla/ops/<layer>/{chunk,fused_recurrent}.py, fla-org/
flash-linear-attention): every op takes ``q, k, v`` ``[B, T, H, K|V]`` (FLA's
``head_first=False`` layout, ours), its gates as natural logs of decays (``g``; GLA's
fused_recurrent calls the per-key gate ``gk``), ``scale`` (default ``K**-0.5``, as our
config key), ``initial_state`` (our ``h0``, ``[B, H, K, V]``) and ``output_final_state``
(returned second: our ``ht``). ``use_qk_l2norm_in_kernel`` is our config key of the
same name. Not modelled, so kept at FLA's defaults: ``use_gate_in_kernel`` (the gate
transform ``-exp(A_log) softplus(g + dt_bias)``), ``use_beta_sigmoid_in_kernel``,
``allow_neg_eigval``, ``state_v_first`` and ``g_gamma``. ``chunk_linear_attn`` defaults
to ``normalize=True``, which our ``linear_attn`` does not model: the adapter passes
``normalize=False``. ``chunk_kda``, ``chunk_gla`` and ``chunk_precond_kda`` assert an
fp32 ``initial_state`` (fla/ops/{kda,gla,precond_kda}/chunk.py): the adapter passes h0
in fp32 whatever the dtype (exact: the inputs lie on the bf16 grid). The preconditioned ops (``chunk_precond_gated_delta_rule``,
``chunk_precond_kda`` and their fused-recurrent forms) use our tensor names already.
Variable lengths: FLA's ``cu_seqlens`` (an int64 tensor of N+1 offsets, ``B = 1``;
``initial_state`` and the final state ``[N, H, K, V]``) is ttrcheck's input of the same
name and convention (docs/varlen.md), so the adapters pass it through unchanged: the
``varlen`` suite validates an op's variable-length path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

__all__ = ["Adapter", "FLA_OPS", "NATIVE", "adapter_for"]


@dataclass(frozen=True)
class Adapter:
    """A calling convention: our tensor and config names -> a function's arguments and results."""

    layer: Optional[str]                     # None: the layer given to validate()
    form: Optional[str]                      # the algorithm it runs (the error model's form); None: the layer's default
    tensors: Mapping[str, str] = field(default_factory=dict)   # ours -> its argument (missing: same name)
    config: Mapping[str, str] = field(default_factory=dict)    # ours -> its keyword (missing: same name; "": not passed)
    fixed: Mapping[str, Any] = field(default_factory=dict)     # keywords always passed
    outputs: Tuple[str, ...] = ("o", "ht")   # its results in order, by our names
    note: str = ""
    backward_form: Optional[str] = None      # the backward's model form where it differs (None: `form`)
    fp32: Tuple[str, ...] = ()               # our tensors it takes in fp32 whatever the dtype (exact: bf16 grid)

    def call(self, fn: Callable, tensors: Mapping[str, Any], config: Mapping[str, Any]) -> Dict[str, Any]:
        kwargs = {self.tensors.get(n, n): (_as_fp32(t) if n in self.fp32 else t) for n, t in tensors.items()}
        kwargs.update({self.config.get(k, k): v for k, v in config.items() if self.config.get(k, k)})
        kwargs.update(self.fixed)
        result = fn(**kwargs)
        if isinstance(result, Mapping):
            return dict(result)
        if not isinstance(result, (tuple, list)):
            result = (result,)
        return {name: r for name, r in zip(self.outputs, result) if r is not None}


def _as_fp32(t):
    """A torch tensor (autograd follows the cast back to the leaf) or an array, in fp32."""
    if hasattr(t, "float"):
        return t.float()
    import numpy as np
    return np.asarray(t, dtype=np.float32)


# A function written with ttrcheck's own names: fn(q=..., k=..., ..., h0=..., scale=...)
# returning (o, ht) or a dict of outputs.
NATIVE = Adapter(layer=None, form=None)

_STATE = {"h0": "initial_state"}
_FINAL = {"output_final_state": True}
_NO_CENTRE = {"log_atk_scale": ""}
_PRECOND_OUT = ("o", "ht", "final_A_state")

FLA_OPS: Dict[str, Adapter] = {
    # chunk_bwd_kernel_dqkwg forms dq = dS k and dk = dS^T q by two tl.dot on fp32 operands
    # (TF32 on Hopper) and dg from q*dq - k*dk: the scalar-gate chunk_tf32_intra.
    "chunk_gated_delta_rule": Adapter("gated_delta_rule", "chunk", _STATE, {}, _FINAL,
                                      backward_form="chunk_tf32_intra"),
    "fused_recurrent_gated_delta_rule": Adapter("gated_delta_rule", "sequential", _STATE, {}, _FINAL),
    "chunk_delta_rule": Adapter("delta_rule", "chunk", _STATE, {}, _FINAL),
    "fused_recurrent_delta_rule": Adapter("delta_rule", "sequential", _STATE, {}, _FINAL),
    # FLA's chunk_kda_bwd_intra forms the intra-chunk dq, dk across 16-token sub-chunks by
    # tl.dot on fp32 operands (TF32 on Hopper) and dg from q*dq - k*dk: modelled by the
    # backward form chunk_tf32_intra (reference/family/delta_chunk_backward.hpp,
    # sub_chunk_products_backward_tf32; docs/validating-fla.md, "Failures").
    "chunk_kda": Adapter("kda", "chunk", _STATE, {}, _FINAL, fp32=("h0",), backward_form="chunk_tf32_intra",
                         note="g is the final per-key log decay (use_gate_in_kernel=False, FLA's default); "
                              "initial_state in fp32 (FLA asserts it)"),
    "fused_recurrent_kda": Adapter("kda", "sequential", _STATE, {}, _FINAL),
    "chunk_gla": Adapter("gla", "chunk", _STATE, {}, _FINAL, fp32=("h0",),
                         note="initial_state in fp32 (FLA asserts it)"),
    # FLA's fused-recurrent backward forms dg by a reverse running sum of q*dq - k*dk
    # (fla/ops/common/fused_recurrent.py): modelled by the backward form sequential_dg_sum
    # (reference/family/gated_linear_dg_sum.hpp; docs/validating-fla.md, "Failures").
    "fused_recurrent_gla": Adapter("gla", "sequential", {"g": "gk", **_STATE}, {}, _FINAL,
                                   backward_form="sequential_dg_sum",
                                   note="FLA's fused_recurrent_gla names the per-key gate gk"),
    "chunk_simple_gla": Adapter("simple_gla", "chunk", _STATE, {}, _FINAL),
    "fused_recurrent_simple_gla": Adapter("simple_gla", "sequential", _STATE, {}, _FINAL,
                                          backward_form="sequential_dg_sum"),
    "chunk_linear_attn": Adapter("linear_attn", "chunk", _STATE, {}, {**_FINAL, "normalize": False},
                                 note="normalize=False: FLA's default normalize=True is not modelled"),
    "fused_recurrent_linear_attn": Adapter("linear_attn", "sequential", _STATE, {}, {**_FINAL, "normalize": False}),
    # The preconditioned ops take our names (g_atk, beta_atk, initial_A_state, the tensor
    # log_atk_scale, config x and eps) and return the final A third. Our config key
    # log_atk_scale (the squash centre when the tensor is absent, default −0.2) is not
    # passed: FLA wants a tensor there and defaults to the same −0.2.
    # Its chunk_bwd_kernel_dqkwg is chunk_gated_delta_rule's: the scalar-gate chunk_tf32_intra
    # (docs/validating-fla/failures.md, stress.long as tf32).
    "chunk_precond_gated_delta_rule": Adapter("precond_gated_delta_rule", "chunk", _STATE, _NO_CENTRE, _FINAL,
                                              outputs=_PRECOND_OUT, backward_form="chunk_tf32_intra"),
    "fused_recurrent_precond_gated_delta_rule": Adapter("precond_gated_delta_rule", "sequential", _STATE, _NO_CENTRE,
                                                        _FINAL, outputs=_PRECOND_OUT),
    "chunk_precond_kda": Adapter("precond_kda", "chunk", _STATE, _NO_CENTRE, _FINAL, outputs=_PRECOND_OUT,
                                 backward_form="chunk_tf32_intra",
                                 fp32=("h0",),
                                 note="FLA 0.6.0 always l2-normalises q and k here (our default); "
                                      "use_qk_l2norm_in_kernel=false is ignored by it; initial_state in fp32"),
    "fused_recurrent_precond_kda": Adapter("precond_kda", "sequential", _STATE, _NO_CENTRE, _FINAL,
                                           outputs=_PRECOND_OUT),
}


def adapter_for(fn: Callable) -> Adapter:
    """FLA's adapter by the function's name (functools.partial unwrapped), else NATIVE."""
    while hasattr(fn, "func"):
        fn = fn.func
    return FLA_OPS.get(getattr(fn, "__name__", ""), NATIVE)
