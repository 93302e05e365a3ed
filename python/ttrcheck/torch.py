"""Port validation in PyTorch: run someone's function forward and backward on ttrcheck's
generated inputs and judge every output and every gradient against the oracle.

    import ttrcheck.torch
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    result = ttrcheck.torch.validate(chunk_gated_delta_rule, suites=["tiny", "standard"],
                                     dtypes=["bf16", "fp32"], device="cuda")
    print(result)            # one row per suite x case x dtype x direction x tensor
    assert result.passed

For each case of each suite (`ttrcheck vectors`, same generators and seeds) and each
dtype, the inputs are cast to that dtype on `device` (exact for bf16 and fp32: they
lie on the bf16 grid; where a cast to fp16 rounds, the oracle is recomputed on the
values the function saw, and the row says so), the function runs through its adapter
(ttrcheck/fla.py: FLA's ops are recognised by name), the outputs are judged with
:func:`ttrcheck.check` under the model of the adapter's form, and with
``backward=True`` autograd takes the gradient of every differentiable input for the
cotangents `vectors --backward` draws (``do``, ``dht``: N(0, 1) on the bf16 grid),
judged as the backward direction. The loop is ttrcheck/harness.py's.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from .fla import Adapter
from .harness import Backend, Row, Validation, run

__all__ = ["Row", "TorchBackend", "Validation", "validate"]

_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}


def _torch():
    import torch  # the real torch (an absolute import), not this module

    return torch


class TorchBackend(Backend):
    dtypes = tuple(_DTYPES)

    def __init__(self, device):
        self.torch = _torch()
        self.device = device

    def cast(self, values, dtype):
        return self.torch.from_numpy(np.asarray(values)).to(device=self.device, dtype=getattr(self.torch,
                                                                                             _DTYPES[dtype]))

    def values(self, x):
        return x.detach().to("cpu", self.torch.float64).numpy()

    def index(self, values):  # FLA takes cu_seqlens as a LongTensor on the kernel's device
        return self.torch.from_numpy(np.asarray(values, dtype=np.int64)).to(self.device)

    def run(self, fn, adapter, inputs, config, differentiable, cotangents):
        torch = self.torch
        leaves = {n: t.clone().requires_grad_(cotangents is not None and n in differentiable and
                                              t.is_floating_point())
                  for n, t in inputs.items()}
        with torch.enable_grad():
            outs = adapter.call(fn, leaves, config)
        if cotangents is None:
            return outs, {}
        used = [n for n in outs if "d" + n in cotangents and outs[n].requires_grad]
        if not used:
            raise ValueError(f"{getattr(fn, '__name__', 'fn')}: no output requires grad; cannot take gradients")
        wrt = [n for n in leaves if leaves[n].requires_grad]
        grads = torch.autograd.grad([outs[n] for n in used], [leaves[n] for n in wrt],
                                    grad_outputs=[cotangents["d" + n].to(outs[n].dtype) for n in used],
                                    allow_unused=True)
        # An input the function never used has the gradient zero (autograd's None).
        return outs, {"d" + n: (g if g is not None else torch.zeros_like(leaves[n])) for n, g in zip(wrt, grads)}


def validate(fn: Callable, layer: Optional[str] = None, *, suites: Sequence[str] = ("tiny",),
             dtypes: Sequence[str] = ("bf16",), backward: bool = True, device: Any = "cpu", seed: int = 0,
             config: Optional[Mapping[str, Any]] = None, adapter: Optional[Adapter] = None,
             form: Optional[str] = None, chunk_size: int = 64, cases: Optional[Sequence[str]] = None,
             sample: Optional[Mapping[str, Sequence[int]]] = None) -> Validation:
    """Judges `fn` as an implementation of `layer` (see the module's doc).

    `adapter` defaults to FLA's entry for ``fn.__name__`` (ttrcheck.fla.FLA_OPS), else
    ttrcheck's own names: ``fn(q=..., k=..., ..., h0=..., **config) -> (o, ht)`` or a
    dict. `config` adds keys on top of each case's (e.g. ``{"scale": 0.1}``); `form`
    and `chunk_size` override the adapter's model of the algorithm `fn` runs; `cases`
    restricts each suite to the named cases; ``sample={"b": [...], "h": [...]}`` judges
    only those batch rows x heads of each run (``fn`` still runs on the whole case: the
    production suite's shapes, judged on a few slices).
    """
    return run(fn, TorchBackend(device), layer, suites=suites, dtypes=dtypes, backward=backward, seed=seed,
               config=config, adapter=adapter, form=form, chunk_size=chunk_size, cases=cases, sample=sample)
