"""The Python API: layers, oracle, check and vectors on NumPy arrays and torch tensors.

Each function calls what the matching CLI command calls (`ttrcheck layers`,
`oracle`, `check`, `vectors`), so numbers, reports and error messages are the
CLI's; inputs are named "inputs", "candidate" and "oracle" in messages where the
CLI names the file.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _core
from ._arrays import InputError, config_sets, decode, decode_list, encode_map
from .report import Report

ArrayMap = Mapping[str, Any]


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dims: Tuple[str, ...]    # symbolic: ("B", "T", "H", "K")
    required: bool
    range: str               # admissible values, e.g. "(-inf, 0]"
    doc: str
    differentiable: bool = True


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str                # number, integer, boolean, choice
    required: bool
    default: Optional[str]
    doc: str
    choices: Tuple[str, ...] = ()


@dataclass(frozen=True)
class LayerSpec:
    """A layer's interface, from its C++ spec (`ttrcheck layers --layer NAME`)."""

    name: str
    summary: str
    recurrence: str
    inputs: Tuple[TensorSpec, ...]
    outputs: Tuple[TensorSpec, ...]
    config: Tuple[ConfigKey, ...]
    forms: Tuple[str, ...]
    cotangents: Tuple[TensorSpec, ...]   # backward inputs beyond the forward ones (do, dht, ...)
    gradients: Tuple[TensorSpec, ...]    # backward outputs (dq, dk, ...)
    notes: Tuple[str, ...]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def differentiable_inputs(self) -> Tuple[str, ...]:
        return tuple(t.name for t in self.inputs if t.differentiable)


def _tensor(j, differentiable=True) -> TensorSpec:
    return TensorSpec(j["name"], tuple(j["dims"]), j["required"], j["range"], j["doc"],
                      j.get("differentiable", differentiable))


def _spec(j) -> LayerSpec:
    back = j.get("backward", {})
    return LayerSpec(
        j["name"], j["summary"], j["recurrence"], tuple(_tensor(t) for t in j["inputs"]),
        tuple(_tensor(t) for t in j["outputs"]),
        tuple(ConfigKey(c["name"], c["type"], c["required"], c.get("default"), c["doc"], tuple(c.get("choices", ())))
              for c in j["config"]),
        tuple(j["forms"]), tuple(_tensor(t) for t in back.get("cotangents", [])),
        tuple(_tensor(t) for t in back.get("gradients", [])), tuple(j["notes"]), j)


_LAYERS: Optional[Dict[str, LayerSpec]] = None


def layers() -> Dict[str, LayerSpec]:
    """Every layer's spec by name (the catalogue of `ttrcheck layers --json`)."""
    global _LAYERS
    if _LAYERS is None:
        _LAYERS = {j["name"]: _spec(j) for j in json.loads(_core.layers_json())}
    return dict(_LAYERS)


def layer(name: str) -> LayerSpec:
    """One layer's spec; InputError (the CLI's message) for an unknown name."""
    specs = layers()
    if name not in specs:
        _core.layer_json(name)  # raises the registry's "unknown layer" InputError
    return specs[name]


def _check_range(what: str, value: int, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise InputError(f"{what}: {value!r} is not an integer in [{lo}, {hi}]")
    return int(value)


def oracle(layer: str, inputs: ArrayMap, config: Optional[Mapping[str, Any]] = None, *, backward: bool = False,
           bits: int = 256, form: str = "sequential", chunk_size: int = 64,
           certified: bool = False, oracle_tier: str = "mpfr") -> Dict[str, np.ndarray]:
    """The layer's outputs in MPFR at `bits` bits, rounded to float64 (`ttrcheck oracle`).

    `inputs` maps tensor names to arrays or tensors (any of F64/F32/F16/BF16; bf16
    as a torch.bfloat16 tensor or :class:`BF16`); `backward=True` also takes the
    cotangents (do, dht, ...) and returns the gradients (dq, dk, ...). `certified`
    adds '<name>.lower'/'<name>.upper', an MPFI enclosure. `oracle_tier="auto"`
    (`oracle --oracle-tier auto`): double-double where its estimated own error is
    negligible, MPFR slices elsewhere (docs/oracle-tiers.md).
    """
    _check_range("bits", bits, 24, 100000)
    _check_range("chunk_size", chunk_size, 1, 1 << 20)
    tensors, _ = _core.oracle(layer, encode_map(inputs, "inputs"), {}, config_sets(config), bool(backward),
                              int(bits), form, int(chunk_size), bool(certified), str(oracle_tier))
    return decode_list(tensors)


def _check_options(chunk_size: int, samples: Optional[int], seed: int, oracle: Optional[ArrayMap]):
    """The options `check` and `explain_policy` share, validated as the CLI does: the
    number of model samples (the default when None) and the precomputed oracle, encoded
    with its metadata (None, {} when there is none)."""
    _check_range("chunk_size", chunk_size, 1, 1 << 20)
    if samples is None:
        samples = _core.default_samples
    _check_range("samples", samples, 1, 100000)
    _check_range("seed", seed, 0, 2**64 - 1)
    if oracle is None:
        return samples, None, {}
    return samples, encode_map(oracle, "oracle"), dict(getattr(oracle, "metadata", {}) or {})


def check(layer: str, inputs: ArrayMap, candidate: ArrayMap, *, dtype: Optional[str] = None,
          policy: Optional[str] = None, config: Optional[Mapping[str, Any]] = None, backward: bool = False, form: Optional[str] = None,
          chunk_size: int = 64, samples: Optional[int] = None, seed: int = 0, strict_range: bool = False,
          oracle: Optional[ArrayMap] = None, name: Optional[str] = None, oracle_tier: str = "auto",
          not_judged: Sequence[str] = ()) -> Report:
    """A candidate's outputs judged against the oracle under the error model (`ttrcheck check`).

    `dtype` is the kernel's arithmetic (bf16|fp16|fp32|fp64; default: the storage
    dtype of the candidate's 'o', or of its first gradient); `policy` a foreign kernel's
    arithmetic instead (fp32|tf32|fp16|bf16-storage|bf16|fp64, as `check --policy`; tf32
    is an fp32 kernel with TF32 matrix products; it sets the dtype); `form` the algorithm it
    runs (chunk|scan|sequential; default chunk where the layer has it; sequential_dg_sum for
    FLA's fused-recurrent gla/simple_gla backward, dg by a reverse running sum). `oracle` may
    hold precomputed float64 outputs (from :func:`oracle`, or a :class:`Case`'s, with
    its metadata) to skip recomputing them; otherwise `oracle_tier` says how it is
    computed: "auto" (double-double where its estimated own error is negligible,
    MPFR-256 slices elsewhere; the report's `oracle` object says which) or "mpfr"
    (MPFR-256 throughout, as :func:`oracle` computes it). `not_judged` names outputs or
    gradients left unjudged (`check --not-judged`): not required of the candidate and
    reported absent ('o' is always judged). Returns a :class:`Report`.
    """
    samples, oracle_tensors, oracle_meta = _check_options(chunk_size, samples, seed, oracle)
    js, table = _core.check(layer, encode_map(inputs, "inputs"), {}, encode_map(candidate, "candidate"),
                            oracle_tensors, oracle_meta, dtype or "", policy or "", form or "", int(chunk_size),
                            int(samples), int(seed), bool(backward), bool(strict_range), config_sets(config),
                            name or "", str(oracle_tier), [str(n) for n in not_judged])
    return Report(js, table)


@dataclass
class PolicyExplanation:
    """`check --explain-policy`: a report per policy, smallest modelled error first, and
    the first policy the candidate passes (None when none does)."""

    reports: Dict[str, Report]
    best: Optional[str]
    #: per policy, why it failed where its ratio would mislead ("" otherwise): the worst
    #: row's exact value and model are 0, so the subnormal floor alone bounds it.
    notes: Dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = []
        for p, r in self.reports.items():
            lines.append(f"  {p:<13} max ratio {r.max_ratio:<10.3g} {'pass' if r.passed else 'FAIL'}")
            if self.notes.get(p):
                lines.append(f"                ({self.notes[p]})")
        lines.append(f"explained by {self.best} (the smallest policy it passes)" if self.best
                     else "explained by none of these policies")
        return "\n".join(lines)


def explain_policy(layer: str, inputs: ArrayMap, candidate: ArrayMap, *,
                   config: Optional[Mapping[str, Any]] = None, backward: bool = False, form: Optional[str] = None,
                   chunk_size: int = 64, samples: Optional[int] = None, seed: int = 0, strict_range: bool = False,
                   oracle: Optional[ArrayMap] = None, name: Optional[str] = None,
                   oracle_tier: str = "auto", not_judged: Sequence[str] = ()) -> PolicyExplanation:
    """Which arithmetic explains a candidate's error: :func:`check` under every policy of
    ``check --explain-policy`` (fp32, tf32, fp16, bf16-storage, bf16), one oracle for all
    (computed as `oracle_tier` says, as in :func:`check`; `not_judged` as there)."""
    samples, oracle_tensors, oracle_meta = _check_options(chunk_size, samples, seed, oracle)
    pairs, best, notes = _core.explain_policy(layer, encode_map(inputs, "inputs"), {}, encode_map(candidate, "candidate"),
                                       oracle_tensors, oracle_meta, form or "", int(chunk_size), int(samples),
                                       int(seed), bool(backward), bool(strict_range), config_sets(config), name or "",
                                       str(oracle_tier), [str(n) for n in not_judged])
    order = _core.explain_order()
    return PolicyExplanation({p: Report(js, table) for p, (js, table) in zip(order, pairs)}, best or None,
                             {p: n for p, n in zip(order, notes) if n})


class Tensors(dict):
    """A dict of tensor name to array, with the metadata of the file the CLI would write."""

    def __init__(self, tensors, metadata):
        super().__init__(tensors)
        self.metadata: Dict[str, str] = dict(metadata)


def _file(pair) -> Optional[Tensors]:
    if pair is None:
        return None
    tensors, metadata = pair
    return Tensors(decode_list(tensors), metadata)


@dataclass
class Case:
    """One test-vector case, as `ttrcheck vectors` writes it (<stem>.inputs.safetensors, ...)."""

    layer: str
    suite: str
    name: str
    stem: str
    doc: str
    dims: Dict[str, int]
    config: Dict[str, str]
    inputs: Tensors                         # F32 arrays, every value on the bf16 grid
    oracle: Optional[Tensors]               # float64
    backward_inputs: Optional[Tensors]      # the inputs plus a cotangent of every output
    backward_oracle: Optional[Tensors]      # the gradients


def vectors(layer: str, suite: str, seed: int = 0, *, backward: bool = False, with_oracle: bool = True,
            bits: int = 256, case: Optional[str] = None) -> List[Case]:
    """A suite's cases for `layer` (`ttrcheck vectors`): same generators, seeds and arrays as the CLI's files."""
    _check_range("seed", seed, 0, 2**64 - 1)
    _check_range("bits", bits, 24, 100000)
    out = []
    for c in _core.vectors(layer, suite, int(seed), int(bits), bool(with_oracle), bool(backward), case):
        e = json.loads(c.entry)
        out.append(Case(layer, suite, e["case"], c.stem, e["doc"], dict(e["dims"]), dict(e["config"]),
                        _file(c.inputs), _file(c.oracle), _file(c.backward_inputs), _file(c.backward_oracle)))
    return out


def round_to(x, dtype: str = "bf16"):
    """Values rounded to nearest-even into bf16 (a :class:`BF16`), fp16 or fp32 (NumPy arrays):
    what a kernel storing its outputs in that dtype writes, rounded once from float64."""
    spelling = {"bf16": "BF16", "fp16": "F16", "fp32": "F32", "fp64": "F64"}.get(dtype)
    if spelling is None:
        raise InputError(f"dtype: unknown dtype '{dtype}' (bf16|fp16|fp32|fp64)")
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    return decode(spelling, list(a.shape), _core.round_to(a.tobytes(), list(a.shape), spelling))
