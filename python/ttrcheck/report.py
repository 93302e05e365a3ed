"""The verdict of one check, as `ttrcheck check` reports it (docs/reports.md)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

Location = Tuple[int, Optional[int], int]  # (b, t, h); t is None for a state row (ht, dh0)
# Varlen inputs (cu_seqlens): the row's sequence and its token in that sequence (None
# for a state row, whose b is the sequence), beside the packed (b, t, h).
SequenceLocation = Tuple[int, Optional[int]]


def _loc(j) -> Optional[Location]:
    return None if j is None else (j["b"], j["t"], j["h"])


def _seq(j) -> Optional[SequenceLocation]:
    return None if j is None or "sequence" not in j else (j["sequence"], j["token"])


def _num(x) -> float:
    return float(x)  # the report writes non-finite numbers as "inf", "-inf", "nan"


@dataclass(frozen=True)
class TensorResult:
    """One output tensor (or gradient) of a check."""

    name: str
    present: bool             # False: the candidate did not hold it (not compared)
    elements: int
    rows: int
    max_abs_error: float
    max_ratio: float          # observed error / modelled error of a correct kernel, worst row
    worst: Optional[Location]  # the row of max_ratio
    nan_count: int
    inf_count: int
    nonfinite_failures: int   # NaN/Inf where the oracle is finite and representable
    first_nonfinite: Optional[Location]
    passed: bool
    worst_sequence: Optional[SequenceLocation] = None            # varlen: (sequence, token) of `worst`
    first_nonfinite_sequence: Optional[SequenceLocation] = None  # varlen: ... of `first_nonfinite`
    worst_at_floor: bool = False  # the worst row's exact value and model are 0: only the subnormal floor bounds it


class Report:
    """A check's verdict: per-tensor error ratios against the error model.

    ``to_json()`` is the document `ttrcheck check --report` writes (schema
    ``ttrcheck.report``), ``str(report)`` the table it prints.
    """

    def __init__(self, report_json: str, table: str):
        self._json = report_json
        self._doc = json.loads(report_json)
        self.table = table
        (c,) = self._doc["checks"]
        self._check = c
        self.id: str = c["id"]
        self.layer: str = c["layer"]
        self.dtype: str = c["dtype"]
        self.form: str = c["model_form"]
        self.chunk_size: int = c["chunk_size"]
        self.threshold: float = _num(c["threshold"])
        self.verdict: str = c["verdict"]  # "pass", "fail" or "range" (excused NaN/Inf: docs/error-model.md)
        self.passed: bool = c["pass"]
        self.range: Optional[Dict[str, Any]] = c["range"]
        self.tensors: Dict[str, TensorResult] = {
            t["name"]: TensorResult(t["name"], t["present"], t["elements"], t["rows"], _num(t["max_abs_error"]),
                                    _num(t["max_ratio"]), _loc(t["worst"]), t["nan_count"], t["inf_count"],
                                    t["nonfinite_failures"], _loc(t["first_nonfinite"]), t["pass"],
                                    _seq(t["worst"]), _seq(t["first_nonfinite"]), t.get("worst_at_floor", False))
            for t in c["tensors"]}

    @property
    def max_ratio(self) -> float:
        return max((t.max_ratio for t in self.tensors.values() if t.present), default=0.0)

    @property
    def failing(self) -> List[TensorResult]:
        return [t for t in self.tensors.values() if t.present and not t.passed]

    def to_json(self) -> str:
        """The report document, byte for byte what `ttrcheck check --report` writes."""
        return self._json

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self._json)

    def __str__(self) -> str:
        return self.table

    def __repr__(self) -> str:
        return f"<ttrcheck.Report {self.id}: {self.verdict}, max ratio {self.max_ratio:.3g}>"
