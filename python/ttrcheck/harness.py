"""The port-validation loop, independent of the array library: a function runs on every
case of the chosen suites (`ttrcheck vectors`, same generators and seeds), cast to each
dtype; its outputs and the gradients its backend takes for the cotangents `vectors
--backward` draws are judged with :func:`ttrcheck.check`. Backends: PyTorch with autograd
(ttrcheck/torch.py, ``ttrcheck.torch.validate``) and NumPy with a hand-written VJP
(:func:`validate_numpy`, e.g. a port under test, or ``jax.vjp`` output converted).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from . import _core, api
from ._arrays import InputError, config_sets, decode_list, encode_map
from .fla import NATIVE, Adapter, adapter_for
from .report import Report

__all__ = ["Backend", "Execution", "NumpyBackend", "Row", "Validation", "execute", "judge", "run",
           "validate_numpy"]


@dataclass(frozen=True)
class Row:
    suite: str
    case: str
    dtype: str
    direction: str       # forward | backward
    tensor: str
    max_ratio: float
    worst: Optional[tuple]
    nonfinite: int       # NaN/Inf where the oracle is finite
    verdict: str         # pass | FAIL | absent
    note: str = ""
    rel_rms: Optional[float] = None   # FLA's criterion: RMS(candidate - oracle) / RMS(oracle)
    max_abs: Optional[float] = None   # max |candidate - oracle| (FLA passes a tensor outright when <= 1e-6)
    worst_sequence: Optional[tuple] = None  # varlen: (sequence, token) of `worst`


class Validation:
    """The result of a validation: rows, the reports behind them, and a verdict."""

    def __init__(self, layer: str, fn_name: str, rows: List[Row], reports: List[Report]):
        self.layer, self.fn_name, self.rows, self.reports = layer, fn_name, rows, reports

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.reports)

    @property
    def failures(self) -> List[Row]:
        return [r for r in self.rows if r.verdict == "FAIL"]

    def table(self) -> str:
        head = ("suite", "case", "dtype", "dir", "tensor", "max ratio", "worst (b,t,h)", "NaN/Inf", "verdict")
        body = []
        for r in self.rows:
            worst = "-" if r.worst is None else "(" + ",".join("-" if x is None else str(x) for x in r.worst) + ")"
            if r.worst_sequence is not None:  # varlen, as the CLI prints it: "(0,104,1) seq 2 t 4"
                worst += f" seq {r.worst_sequence[0]}" + ("" if r.worst_sequence[1] is None
                                                          else f" t {r.worst_sequence[1]}")
            ratio = "-" if r.verdict == "absent" else f"{r.max_ratio:.3g}"
            body.append((r.suite, r.case, r.dtype, r.direction, r.tensor, ratio, worst, str(r.nonfinite),
                         r.verdict + (f" ({r.note})" if r.note else "")))
        widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head] + body]
        verdict = "PASS" if self.passed else f"FAIL ({len(self.failures)} failing tensors)"
        lines.append(f"{self.fn_name} as {self.layer}: {verdict}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_json(self) -> List[Dict[str, Any]]:
        """Every check's report document (the CLI's `ttrcheck.report` schema)."""
        return [r.to_dict() for r in self.reports]


class Backend:
    """How a function's arrays are made and its gradients taken."""

    dtypes: Tuple[str, ...] = ()

    def cast(self, values: np.ndarray, dtype: str) -> Any:  # an array of `dtype` holding `values` (rounded)
        raise NotImplementedError

    def values(self, x: Any) -> np.ndarray:  # its values as float64
        raise NotImplementedError

    def index(self, values: np.ndarray) -> Any:  # an int64 array (cu_seqlens), where the function runs
        return np.asarray(values, dtype=np.int64)

    def run(self, fn: Callable, adapter: Adapter, inputs: Dict[str, Any], config: Dict[str, Any],
            differentiable: set, cotangents: Optional[Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """(outputs by our names, gradients d<input> for the cotangents of the returned outputs or {})."""
        raise NotImplementedError


class NumpyBackend(Backend):
    """NumPy arrays (fp64, fp32, fp16: NumPy has no bfloat16). With cotangents, ``fn`` returns
    ``(outputs, vjp)`` and ``vjp({"do": ..., "dht": ...})`` the gradients ``{"dq": ..., ...}``."""

    dtypes = ("fp16", "fp32", "fp64")
    _np = {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}

    def cast(self, values, dtype):
        return np.asarray(values).astype(self._np[dtype])

    def values(self, x):
        return np.asarray(x, dtype=np.float64)

    def run(self, fn, adapter, inputs, config, differentiable, cotangents):
        if cotangents is None:
            return adapter.call(fn, inputs, config), {}
        pair = fn(**{adapter.tensors.get(n, n): t for n, t in inputs.items()},
                  **{adapter.config.get(k, k): v for k, v in config.items() if adapter.config.get(k, k)},
                  **adapter.fixed)
        if not (isinstance(pair, tuple) and len(pair) == 2 and callable(pair[1])):
            raise InputError("fn: with backward=True a NumPy function returns (outputs, vjp)")
        outs, vjp = pair
        outs = dict(outs) if isinstance(outs, Mapping) else \
            {n: r for n, r in zip(adapter.outputs, outs if isinstance(outs, (tuple, list)) else (outs,))
             if r is not None}
        used = {"d" + n: cotangents["d" + n] for n in outs if "d" + n in cotangents}
        grads = dict(vjp(used))
        for n in differentiable & set(inputs):
            grads.setdefault("d" + n, np.zeros_like(inputs[n]))
        return outs, grads


def _config_values(spec: api.LayerSpec, config: Mapping[str, str]) -> Dict[str, Any]:
    """The case's config (canonical text) as Python values for the function's keywords."""
    types = {k.name: k.type for k in spec.config}
    out: Dict[str, Any] = {}
    for key, text in config.items():
        t = types.get(key)
        out[key] = (text == "true") if t == "boolean" else int(text) if t == "integer" else \
            float(text) if t == "number" else text
    return out


def _oracle(layer: str, inputs: Mapping[str, Any], config: Mapping[str, str], backward: bool,
            tier: str = "mpfr") -> api.Tensors:
    """The sequential oracle with the metadata `check` verifies: MPFR-256 (what `ttrcheck
    oracle` writes), or with tier="auto" double-double where its estimated own error is
    negligible and MPFR-256 slices elsewhere (`check`'s default; docs/oracle-tiers.md)."""
    if tier not in ("mpfr", "auto"):
        raise InputError(f"oracle_tier: '{tier}' is not one of auto|mpfr")
    tensors, meta = _core.oracle(layer, encode_map(inputs, "inputs"), {}, config_sets(config), bool(backward), 256,
                                 "sequential", 64, False, tier)
    return api.Tensors(decode_list(tensors), meta)


def fla_criterion(candidate: np.ndarray, oracle: np.ndarray) -> Tuple[float, float]:
    """FLA's own test criterion on one tensor (fla/utils/testing.py: get_err_ratio, get_abs_err):
    RMS(oracle - candidate) / (RMS(oracle) + 1e-8), and the greatest absolute difference.
    FLA's tests assert the first below a per-tensor ratio (0.005 for o and ht, up to 0.02
    for gradients) unless the second is <= 1e-6."""
    c, o = np.asarray(candidate, np.float64).ravel(), np.asarray(oracle, np.float64).ravel()
    d = o - c
    return (float(np.sqrt(np.mean(d * d))) / (float(np.sqrt(np.mean(o * o))) + 1e-8),
            float(np.max(np.abs(d))) if d.size else 0.0)


def _rows(report: Report, suite: str, case: str, dtype: str, direction: str, note: str,
          values: Mapping[str, np.ndarray], oracle: Mapping[str, np.ndarray]) -> List[Row]:
    rows = []
    for t in report.tensors.values():
        verdict = "absent" if not t.present else ("pass" if t.passed else "FAIL")
        rel, mx = fla_criterion(values[t.name], oracle[t.name]) if t.present and t.name in values and \
            t.name in oracle else (None, None)
        rows.append(Row(suite, case, dtype, direction, t.name, t.max_ratio, t.worst, t.nonfinite_failures,
                        verdict, note, rel, mx, t.worst_sequence))
    return rows


@dataclass
class Execution:
    """One function run on one case in one dtype, before judging: the tensors as it saw
    them and what it returned, as float64 values (integer offsets as int64). Judging needs
    nothing else, so a run captured where the kernel lives (a GPU machine, with
    :meth:`save`) can be judged anywhere the package is installed (:meth:`load`,
    :func:`judge`)."""

    layer: str
    fn_name: str
    suite: str
    case: str
    dtype: str
    config: Dict[str, str]               # canonical text: the case's config and the keys added
    form: Optional[str]
    backward_form: Optional[str]
    chunk_size: int
    note: str
    inputs: Dict[str, np.ndarray]        # forward inputs as judged (the case's own arrays when not rounded)
    outputs: Dict[str, np.ndarray]
    backward_inputs: Optional[Dict[str, np.ndarray]] = None  # inputs + the cotangents of the returned outputs
    grads: Optional[Dict[str, np.ndarray]] = None
    oracle: Optional[api.Tensors] = None           # the case's stored oracles where they apply (not saved)
    backward_oracle: Optional[api.Tensors] = None
    sample: Optional[Dict[str, List[int]]] = None  # {"b" | "n": [...], "h": [...]}: the slices kept (see execute)
    not_judged: Optional[List[str]] = None  # gradients a sample cannot judge (see _sampler), absent from grads
    seed: Optional[int] = None  # the case's seed where the inputs are its own (sampled) arrays: `save(lean=True)`

    _GROUPS = ("inputs", "outputs", "backward_inputs", "grads")

    def save(self, path: str, lean: bool = False) -> None:
        """One compressed .npz file (the arrays, and the rest as JSON), written whole or not at
        all. Lossless but small: a float64 array whose values are all float32 (every bf16, fp16
        and fp32 kernel's) is stored as float32 and read back as float64, and a backward
        input that is the forward input of the same name is stored once. ``lean=True``, where
        the inputs are the case's own arrays (``seed`` set), leaves the inputs and cotangents
        out — about half of a production run's bytes — and records the seed, their names and
        a digest of their values: :meth:`load` regenerates them with the same generator and
        refuses the file if the digest differs (the generators changed since the capture)."""
        import json
        import os
        meta = {k: getattr(self, k) for k in ("layer", "fn_name", "suite", "case", "dtype", "config", "form",
                                              "backward_form", "chunk_size", "note", "sample", "not_judged", "seed")}
        meta["widened"], meta["shared"] = [], []
        groups = self._GROUPS
        if lean and self.seed is not None:
            meta["regenerate"] = {"inputs": list(self.inputs),
                                  "backward_inputs": None if self.backward_inputs is None else list(self.backward_inputs),
                                  "digest": _digest(self.inputs, self.backward_inputs)}
            groups = ("outputs", "grads")
        arrays = {}
        for g in groups:
            for n, a in (getattr(self, g) or {}).items():
                a = np.asarray(a)
                if g == "backward_inputs" and n in self.inputs and a.dtype == np.asarray(self.inputs[n]).dtype \
                        and np.array_equal(a, self.inputs[n], equal_nan=a.dtype.kind == "f"):
                    meta["shared"].append(n)
                    continue
                if a.dtype == np.float64:
                    narrow = a.astype(np.float32)
                    if np.array_equal(narrow.astype(np.float64), a, equal_nan=True):
                        meta["widened"].append(f"{g}/{n}")
                        a = narrow
                arrays[f"{g}/{n}"] = a
        arrays["meta"] = np.array(json.dumps(meta))
        part = path + ".part"
        with open(part, "wb") as f:
            np.savez_compressed(f, **arrays)
        os.replace(part, path)

    @classmethod
    def load(cls, path: str) -> "Execution":
        import json
        import zipfile
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                widened, shared = set(meta.pop("widened")), meta.pop("shared")
                groups: Dict[str, Dict[str, np.ndarray]] = {}
                for key in z.files:
                    if key != "meta":
                        g, n = key.split("/", 1)
                        groups.setdefault(g, {})[n] = z[key].astype(np.float64) if key in widened else z[key]
            regen = meta.pop("regenerate", None)
            if regen is not None:
                groups.update(_regenerated(meta, regen, path))
            if not {"inputs", "outputs"} <= set(groups):
                raise ValueError("no inputs or outputs")
            for n in shared:
                groups.setdefault("backward_inputs", {})[n] = groups["inputs"][n]
            if "backward_inputs" in groups:  # the forward inputs first, as execute() orders them
                order = [n for n in groups["inputs"] if n in groups["backward_inputs"]]
                groups["backward_inputs"] = {n: groups["backward_inputs"][n]
                                             for n in order + sorted(set(groups["backward_inputs"]) - set(order))}
            return cls(**meta, **{g: groups.get(g) for g in cls._GROUPS})
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as e:
            raise InputError(f"{path}: not a captured run ({e})") from None


def _digest(*groups: Optional[Mapping[str, np.ndarray]]) -> str:
    """SHA-256 of tensors' names, shapes and values (floats as float64, integers as int64)."""
    import hashlib
    h = hashlib.sha256()
    for g in groups:
        for n in sorted(g or {}):
            a = np.asarray(g[n])
            a = np.ascontiguousarray(a, dtype=np.int64 if a.dtype.kind in "iub" else np.float64)
            h.update(f"{n}{a.shape};".encode())
            h.update(a.tobytes())
        h.update(b"|")
    return h.hexdigest()


def _regenerated(meta: Mapping[str, Any], regen: Mapping[str, Any], path: str) -> Dict[str, Dict[str, np.ndarray]]:
    """The inputs and cotangents a lean capture left out (:meth:`Execution.save`), made again
    from the case's generator and seed and sampled as the run was; checked against the
    recorded digest."""
    backward = regen["backward_inputs"] is not None
    cases = api.vectors(meta["layer"], meta["suite"], int(meta["seed"]), backward=backward, with_oracle=False,
                        case=meta["case"])
    if len(cases) != 1:
        raise InputError(f"{path}: case '{meta['suite']}.{meta['case']}' of layer '{meta['layer']}' no longer exists")
    case = cases[0]
    ins, src = dict(case.inputs), dict(case.backward_inputs if backward else case.inputs)
    if meta.get("sample"):
        take, _, _ = _case_sampler(api.layer(meta["layer"]), meta["sample"], src)
        ins = {n: take(n, np.asarray(a)) for n, a in ins.items()}
        src = {n: take(n, np.asarray(a)) for n, a in src.items()}
    out = {"inputs": {n: ins[n] for n in regen["inputs"]}}
    if backward:
        out["backward_inputs"] = {n: src[n] for n in regen["backward_inputs"]}
    if _digest(out["inputs"], out.get("backward_inputs")) != regen["digest"]:
        raise InputError(f"{path}: the inputs made again from seed {meta['seed']} differ from the captured run's "
                         "(the generators changed since the capture): judge it with the ttrcheck that captured it")
    return out


def _case_sampler(spec: api.LayerSpec, sample: Mapping[str, Sequence[int]], arrays: Mapping[str, np.ndarray]):
    """:func:`_sampler` for a case's tensors: the batch from its first [B, ...] input, its
    cu_seqlens if it has one."""
    batch = next(np.shape(arrays[t.name])[0] for t in spec.inputs if t.name in arrays and t.dims[:1] == ("B",))
    return _sampler(spec, sample, batch, arrays.get("cu_seqlens"))


def _sampler(spec: api.LayerSpec, sample: Mapping[str, Sequence[int]], batch: int,
             cu: Optional[np.ndarray] = None) -> Tuple[Callable[[str, np.ndarray], np.ndarray], Dict[str, List[int]],
                                                       Set[str]]:
    """The slices `sample` keeps, as a function of a tensor's name and values, and the
    sample as recorded with the run. Every layer's (b, h) slices are independent — each
    head of each batch row has its own state — so a slice's outputs, and its gradients
    under the slice's cotangents, are those of the whole run: judging the slices judges
    the run there, at a fraction of the oracle's and the model's cost (production shapes).

    A varlen batch (`cu` given) is sampled by sequence: {"n": [...], "h": [...]} keeps
    those sequences (their tokens, packed in the order given, and their rows of the
    per-sequence tensors) × heads, and `cu_seqlens` becomes the kept sequences' offsets.
    Each sequence of a varlen batch starts from its own state and its chunks restart at
    its first token (FLA's chunk indices, and the error model's), so a sequence is the
    same problem wherever it sits in the packed row. The record adds "starts", the run's
    first token of each kept sequence, to name rows in the run's own tokens.

    The third value names the gradients a sample cannot judge: those of a per-head input
    (the preconditioned layers' `log_atk_scale [H]`), which sum over every row (sequence)
    of the run, unless every row (sequence) is kept. The slice's outputs are the run's
    there all the same, and so is every other gradient; the caller leaves these out (not
    judged, said in the rows' note) and `take` refuses them.

    Refused: rows of a varlen batch or sequences of a batch without one, an index outside
    the run, a sequence kept twice."""
    dims = {t.name: t.dims for t in spec.inputs + spec.outputs + spec.cotangents + spec.gradients}
    summed = {"d" + t.name for t in spec.inputs if t.differentiable and "H" in t.dims and "B" not in t.dims}
    heads = [int(h) for h in sample.get("h", [])]
    if cu is None:
        if "n" in sample:
            raise InputError("sample: 'n' keeps sequences of a varlen batch and this case has no cu_seqlens; "
                             "give batch rows, e.g. {'b': [0, 3], 'h': [0, 7]}")
        keep = {"B": [int(b) for b in sample.get("b", [])], "H": heads}
        if not keep["B"] or not keep["H"]:
            raise InputError("sample: give the batch rows and the heads to keep, e.g. {'b': [0, 3], 'h': [0, 7]}")
        record = {"b": keep["B"], "h": heads}
        tokens, offsets, rows = None, None, batch
    else:
        if "b" in sample:
            raise InputError("sample: a varlen batch (cu_seqlens) is sampled by sequence, not batch row: "
                             "give {'n': [...], 'h': [...]}")
        cu = np.asarray(cu, dtype=np.int64)
        seqs = [int(n) for n in sample.get("n", [])]
        if not seqs or not heads:
            raise InputError("sample: give the sequences and the heads to keep, e.g. {'n': [0, 4], 'h': [0, 1]}")
        if min(seqs) < 0 or max(seqs) >= len(cu) - 1:
            raise InputError(f"sample: n {seqs} outside the {len(cu) - 1} sequences of cu_seqlens")
        if len(set(seqs)) < len(seqs):
            raise InputError(f"sample: n {seqs} keeps a sequence twice")
        keep = {"B": seqs, "H": heads}
        tokens = np.concatenate([np.arange(cu[n], cu[n + 1]) for n in seqs]).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum([cu[n + 1] - cu[n] for n in seqs])]).astype(np.int64)
        record = {"n": seqs, "h": heads, "starts": [int(cu[n]) for n in seqs]}
        rows = len(cu) - 1

    def take(name: str, a: np.ndarray) -> np.ndarray:
        if name == "cu_seqlens":
            if offsets is None:
                raise InputError("sample: cu_seqlens in a case sampled by batch row")
            return offsets.astype(np.asarray(a).dtype)
        d = dims.get(name)
        if d is None or len(d) != np.ndim(a):
            raise InputError(f"sample: no dims known for '{name}' of shape {np.shape(a)}")
        for axis, sym in enumerate(d):
            if sym == "T" and tokens is not None:
                a = np.take(a, tokens, axis=axis)
            elif sym in keep and not (sym == "B" and tokens is not None and "T" in d):
                if max(keep[sym]) >= a.shape[axis] or min(keep[sym]) < 0:
                    what = "n" if sym == "B" and tokens is not None else sym.lower()
                    raise InputError(f"sample: {what} {keep[sym]} outside '{name}' of shape {a.shape}")
                a = np.take(a, keep[sym], axis=axis)
        if name in unjudged:
            raise InputError(f"sample: '{name}' sums over the {'sequences' if tokens is not None else 'batch'}; "
                             f"a sample keeping some {'sequences' if tokens is not None else 'rows'} cannot judge it")
        return a
    unjudged = summed if len(set(keep["B"])) < rows else set()
    return take, record, unjudged


def execute(fn: Callable, backend: Backend, layer: Optional[str] = None, *, suites: Sequence[str] = ("tiny",),
            dtypes: Sequence[str] = ("fp32",), backward: bool = True, seed: int = 0,
            config: Optional[Mapping[str, Any]] = None, adapter: Optional[Adapter] = None, form: Optional[str] = None,
            chunk_size: int = 64, cases: Optional[Sequence[str]] = None,
            with_oracle: bool = True, sample: Optional[Mapping[str, Sequence[int]]] = None) -> Iterator[Execution]:
    """Runs `fn` on every case and dtype (the first half of :func:`run`), one
    :class:`Execution` at a time; with ``with_oracle=False`` no oracle is computed here
    (capture on the kernel's machine, judge elsewhere). ``sample={"b": [...], "h": [...]}``
    keeps those batch rows × heads of every tensor after the run (the function still
    runs on the whole case), so that a production-size run is judged on a few slices;
    ``{"n": [...], "h": [...]}`` keeps sequences × heads of a varlen case (see
    :func:`_sampler`); the rows name the run's own (b, t, h) and sequence."""
    adapter = adapter or adapter_for(fn)
    fn_name = getattr(fn, "__name__", type(fn).__name__)
    layer = layer or adapter.layer
    if layer is None:
        raise InputError("layer: give the layer the function implements (its name is not in ttrcheck.fla.FLA_OPS)")
    if adapter.layer is not None and adapter.layer != layer:
        raise InputError(f"layer: {fn_name} implements '{adapter.layer}', not '{layer}'")
    spec = api.layer(layer)
    for d in dtypes:
        if d not in backend.dtypes:
            raise InputError(f"dtypes: '{d}' is not one of {'|'.join(backend.dtypes)}")
    form = form or adapter.form
    extra = dict(config or {})
    input_names = {t.name for t in spec.inputs}
    differentiable = {t.name for t in spec.inputs if t.differentiable}
    output_names = [t.name for t in spec.outputs]
    for suite in suites:
        for case in api.vectors(layer, suite, seed, backward=backward, with_oracle=with_oracle):
            if cases is not None and case.name not in cases:
                continue
            cfg_text = dict(case.config)
            cfg_text.update(dict(s.split("=", 1) for s in config_sets(extra)))
            cfg = _config_values(spec, cfg_text)
            source = case.backward_inputs if backward else case.inputs
            for dtype in dtypes:
                # Every tensor as the function sees it; `seen` holds those values exactly.
                # Integer tensors (varlen's cu_seqlens, FLA's keyword of the same name) stay
                # int64: offsets, not values of the dtype under test.
                integer = {n for n in source if np.asarray(source[n]).dtype.kind in "iu"}
                given = {n: backend.index(source[n]) if n in integer else backend.cast(source[n], dtype)
                         for n in sorted(source)}
                seen = {n: np.asarray(source[n]) if n in integer else backend.values(x) for n, x in given.items()}
                rounded = any(not np.array_equal(seen[n], np.asarray(source[n], dtype=np.float64)) for n in source)
                inputs = {n: given[n] for n in sorted(input_names & set(given))}
                cots = {n: given[n] for n in given if n not in input_names} if backward else None
                outs, grads = backend.run(fn, adapter, inputs, cfg, differentiable, cots)
                unknown = set(outs) - set(output_names)
                if unknown:
                    raise InputError(f"{fn_name} returned {sorted(unknown)}; {layer}'s outputs are {output_names}")
                own = not rounded and not extra and not sample  # the case's stored oracles apply
                note = f"inputs rounded to {dtype}" if rounded else ""
                out_vals = {n: backend.values(x) for n, x in outs.items()}
                grad_vals = {n: backend.values(x) for n, x in grads.items()} if backward else None
                case_inputs, src = dict(case.inputs), source
                record = None
                if sample:
                    take, record, unjudged = _case_sampler(spec, sample, seen)
                    seen = {n: take(n, a) for n, a in seen.items()}
                    case_inputs = {n: take(n, np.asarray(a)) for n, a in case_inputs.items()}
                    src = {n: take(n, np.asarray(a)) for n, a in source.items()}
                    out_vals = {n: take(n, a) for n, a in out_vals.items()}
                    grad_vals = {n: take(n, a) for n, a in grad_vals.items() if n not in unjudged} \
                        if backward else None
                    kept = f"sequences {record['n']}" if "n" in record else f"slices b {record['b']}"
                    note = ", ".join(x for x in (note, f"{kept} x h {record['h']}") if x)
                    dropped = sorted(unjudged & set(grads)) if backward else []
                    if dropped:
                        note += f"; {', '.join(dropped)} not judged (sums over the " \
                                f"{'sequences' if 'n' in record else 'rows'} not kept)"
                e = Execution(layer, fn_name, suite, case.name, dtype, cfg_text, form, adapter.backward_form,
                              chunk_size, note, {n: seen[n] for n in inputs} if rounded else case_inputs,
                              {n: out_vals[n] for n in output_names if n in out_vals},
                              oracle=case.oracle if own else None, sample=record,
                              not_judged=dropped or None if sample else None, seed=None if rounded else seed)
                if backward:
                    # The backward inputs: forward inputs plus the cotangents of the outputs
                    # returned (dht only with ht); the stored oracle when they are all the case's.
                    used = ["d" + n for n in outs if "d" + n in cots]
                    e.backward_inputs = {n: (seen[n] if rounded else src[n]) for n in list(inputs) + used}
                    e.grads = grad_vals
                    if own and set(used) == set(cots):
                        e.backward_oracle = case.backward_oracle
                yield e


def judge(e: Execution, oracle_tier: str = "mpfr") -> Tuple[List[Row], List[Report]]:
    """Judges one :class:`Execution` (the second half of :func:`run`): its outputs, then its
    gradients, each with :func:`ttrcheck.check` against the oracle of the inputs it saw
    (the case's stored one where it applies, else computed as `oracle_tier` says: "mpfr",
    or "auto": on a production head its oracles took 13-16x less time, the same ratios)."""
    fwd_oracle = e.oracle if e.oracle is not None else _oracle(e.layer, e.inputs, e.config, False, oracle_tier)
    name = f"{e.suite}.{e.case}"
    rep = api.check(e.layer, e.inputs, e.outputs, dtype=e.dtype, config=e.config, form=e.form,
                    chunk_size=e.chunk_size, oracle=fwd_oracle, name=name)
    rows = _rows(rep, e.suite, e.case, e.dtype, "forward", e.note, e.outputs, fwd_oracle)
    reports = [rep]
    if e.backward_inputs is not None and e.grads is not None:
        bwd_oracle = e.backward_oracle if e.backward_oracle is not None else \
            _oracle(e.layer, e.backward_inputs, e.config, True, oracle_tier)
        brep = api.check(e.layer, e.backward_inputs, e.grads, dtype=e.dtype, config=e.config,
                         form=e.backward_form or e.form, chunk_size=e.chunk_size, backward=True,
                         oracle=bwd_oracle, name=name, not_judged=e.not_judged or ())
        reports.append(brep)
        rows += _rows(brep, e.suite, e.case, e.dtype, "backward", e.note, e.grads, bwd_oracle)
    if e.sample:
        rows = [_in_run(r, e.sample) for r in rows]
    return rows, reports


def _in_run(r: Row, sample: Mapping[str, List[int]]) -> Row:
    """A row of a sampled run named in the run's own coordinates: batch row and head, or
    under varlen sequence, head and the run's token (its first token plus the token within
    the sequence, which sampling leaves as it was)."""
    if r.worst is None or len(r.worst) != 3:
        return r
    b, t, h = r.worst
    h = sample["h"][h]
    if "n" not in sample:
        return replace(r, worst=(sample["b"][b], t, h))
    if r.worst_sequence is None:
        return replace(r, worst=(b, t, h))
    i, tau = r.worst_sequence
    n = sample["n"][i]
    if tau is None:  # a per-sequence tensor (ht, dh0): its row is the sequence
        return replace(r, worst=(n, t, h), worst_sequence=(n, None))
    return replace(r, worst=(b, sample["starts"][i] + tau, h), worst_sequence=(n, tau))


def run(fn: Callable, backend: Backend, layer: Optional[str] = None, *, suites: Sequence[str] = ("tiny",),
        dtypes: Sequence[str] = ("fp32",), backward: bool = True, seed: int = 0,
        config: Optional[Mapping[str, Any]] = None, adapter: Optional[Adapter] = None, form: Optional[str] = None,
        chunk_size: int = 64, cases: Optional[Sequence[str]] = None,
        sample: Optional[Mapping[str, Sequence[int]]] = None) -> Validation:
    """The loop behind ``ttrcheck.torch.validate`` and :func:`validate_numpy` (see their
    docs): :func:`execute`, then :func:`judge` each run."""
    adapter = adapter or adapter_for(fn)
    rows: List[Row] = []
    reports: List[Report] = []
    layer = layer or adapter.layer
    for e in execute(fn, backend, layer, suites=suites, dtypes=dtypes, backward=backward, seed=seed, config=config,
                     adapter=adapter, form=form, chunk_size=chunk_size, cases=cases, sample=sample):
        r, rep = judge(e)
        rows += r
        reports += rep
    return Validation(layer, getattr(fn, "__name__", type(fn).__name__), rows, reports)


def validate_numpy(fn: Callable, layer: Optional[str] = None, *, suites: Sequence[str] = ("tiny",),
                   dtypes: Sequence[str] = ("fp32",), backward: bool = True, seed: int = 0,
                   config: Optional[Mapping[str, Any]] = None, adapter: Optional[Adapter] = None,
                   form: Optional[str] = None, chunk_size: int = 64,
                   cases: Optional[Sequence[str]] = None,
                   sample: Optional[Mapping[str, Sequence[int]]] = None) -> Validation:
    """Validates a NumPy function: ``fn(q=..., k=..., ..., **config)`` returns the outputs
    (``(o, ht)`` or a dict) or, with ``backward=True``, ``(outputs, vjp)`` where ``vjp``
    maps the cotangents ``{"do": ..., "dht": ...}`` of the returned outputs to the
    gradients ``{"dq": ..., ...}`` (a gradient left out counts as zero)."""
    return run(fn, NumpyBackend(), layer, suites=suites, dtypes=dtypes, backward=backward, seed=seed,
               config=config, adapter=adapter or NATIVE, form=form, chunk_size=chunk_size, cases=cases,
               sample=sample)
