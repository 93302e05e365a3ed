"""ttrcheck.testing.assert_matches_oracle: passes on the exact result rounded to bf16, fails
on planted errors with a message naming every failing tensor and its worst row."""
from __future__ import annotations

import numpy as np
import pytest

import ttrcheck
from ttrcheck.testing import assert_matches_oracle


@pytest.fixture(scope="module")
def case():
    cases = ttrcheck.vectors("gated_delta_rule", "tiny", 0, backward=True)
    return max(cases, key=lambda c: c.dims["T"] * c.dims["B"] * c.dims["H"])


def _plant(a, index, rel=0.05):
    a = a.copy()
    a[index] = a[index] * (1 + rel) + rel * np.abs(a).max()
    return a


def test_exact_rounded_to_bf16_passes(case):
    cand = {n: ttrcheck.round_to(a, "bf16") for n, a in case.oracle.items()}
    report = assert_matches_oracle(case.layer, case.inputs, cand, config=case.config)
    assert report.passed and report.dtype == "bf16"


def test_planted_rows_fail_naming_every_tensor_and_row(case):
    B, T, H = case.dims["B"], case.dims["T"], case.dims["H"]
    o = _plant(case.oracle["o"], (B - 1, T - 1, 0))
    ht = _plant(case.oracle["ht"], (0, H - 1))  # a state row: (b, h), no token
    with pytest.raises(AssertionError) as e:
        assert_matches_oracle(case.layer, case.inputs, {"o": ttrcheck.round_to(o, "bf16"),
                                                        "ht": ttrcheck.round_to(ht, "bf16")}, config=case.config)
    msg = str(e.value)
    assert msg.startswith("Tensor-likes are not close to the oracle!")
    assert "Mismatched tensors: 2 / 2" in msg
    assert "'o': greatest error ratio" in msg and f"at row (b={B - 1}, t={T - 1}, h=0)" in msg
    assert "'ht': greatest error ratio" in msg and f"at row (b=0, h={H - 1})" in msg
    assert "(up to 8 allowed)" in msg


def test_planted_gradient_rows_fail_backward(case):
    B, T, H = case.dims["B"], case.dims["T"], case.dims["H"]
    grads = {n: ttrcheck.round_to(a, "fp32") for n, a in case.backward_oracle.items()}
    assert assert_matches_oracle(case.layer, case.backward_inputs, grads, backward=True, config=case.config,
                                 dtype="fp32").passed
    grads["dk"] = ttrcheck.round_to(_plant(case.backward_oracle["dk"], (0, 1, H - 1)), "fp32")
    grads["dbeta"] = ttrcheck.round_to(_plant(case.backward_oracle["dbeta"], (B - 1, T - 1, 0)), "fp32")
    with pytest.raises(AssertionError) as e:
        assert_matches_oracle(case.layer, case.backward_inputs, grads, backward=True, config=case.config,
                              dtype="fp32")
    msg = str(e.value)
    assert "'dk'" in msg and f"(b=0, t=1, h={H - 1})" in msg
    assert "'dbeta'" in msg and f"(b={B - 1}, t={T - 1}, h=0)" in msg
    assert "'dq'" not in msg and "'dv'" not in msg


def test_nan_fails_naming_the_row(case):
    o = case.oracle["o"].copy()
    o[0, 0, 0, 0] = np.nan
    with pytest.raises(AssertionError, match=r"'o': 1 NaN/Inf where the oracle is finite, first at row \(b=0, t=0, h=0\)"):
        assert_matches_oracle(case.layer, case.inputs, {"o": ttrcheck.round_to(o, "bf16")}, config=case.config)
