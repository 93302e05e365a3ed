"""pytest helpers: assert that a kernel's outputs match the oracle under the error model.

    from ttrcheck.testing import assert_matches_oracle
    assert_matches_oracle("gated_delta_rule", inputs, {"o": o, "ht": ht}, dtype="bf16")

The failure message reads like ``torch.testing.assert_close``'s, in error ratios
(observed error over the error a correct kernel of that dtype makes on these
inputs, docs/error-model.md) instead of rtol/atol, and lists every failing tensor.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from .api import check
from .report import Report, TensorResult

__all__ = ["assert_matches_oracle", "failure_message"]


def _where(loc, seq=None) -> str:
    if loc is None:
        return "?"
    b, t, h = loc
    where = f"(b={b}, h={h})" if t is None else f"(b={b}, t={t}, h={h})"
    if seq is not None:  # varlen: the sequence, and the token in it
        where += f" = sequence {seq[0]}" + ("" if seq[1] is None else f", token {seq[1]}")
    return where


def _line(t: TensorResult, threshold: float) -> str:
    if t.nonfinite_failures:
        return (f"  {t.name!r}: {t.nonfinite_failures} NaN/Inf where the oracle is finite, first at row "
                f"{_where(t.first_nonfinite, t.first_nonfinite_sequence)} (NaN {t.nan_count}, Inf {t.inf_count}); "
                f"greatest error ratio {t.max_ratio:.3g} at row {_where(t.worst, t.worst_sequence)}")
    return (f"  {t.name!r}: greatest error ratio {t.max_ratio:.3g} at row {_where(t.worst, t.worst_sequence)} "
            f"(up to {threshold:g} "
            f"allowed); greatest absolute difference {t.max_abs_error:.3g}")


def failure_message(report: Report, msg: Optional[str] = None) -> str:
    """The assertion message for a failing report."""
    present = [t for t in report.tensors.values() if t.present]
    failing = report.failing
    lines = [
        "Tensor-likes are not close to the oracle!" if msg is None else msg,
        "",
        f"Mismatched tensors: {len(failing)} / {len(present)} ({report.layer}, {report.dtype} {report.form} form, "
        f"chunk size {report.chunk_size}; error ratio = observed error / error of a correct {report.dtype} kernel)",
    ]
    lines += [_line(t, report.threshold) for t in failing]
    if report.range is not None:
        lines.append(f"  range: {report.range}")
    return "\n".join(lines)


def assert_matches_oracle(layer: str, inputs: Mapping[str, Any], candidate: Mapping[str, Any], *,
                          dtype: Optional[str] = None, config: Optional[Mapping[str, Any]] = None,
                          backward: bool = False, form: Optional[str] = None, chunk_size: int = 64,
                          oracle: Optional[Mapping[str, Any]] = None, msg: Optional[str] = None,
                          **kwargs) -> Report:
    """Raises AssertionError naming every failing tensor, its worst row and ratio; returns the Report."""
    report = check(layer, inputs, candidate, dtype=dtype, config=config, backward=backward, form=form,
                   chunk_size=chunk_size, oracle=oracle, **kwargs)
    if not report.passed:
        raise AssertionError(failure_message(report, msg))
    return report
