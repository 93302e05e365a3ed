"""The validation loop (ttrcheck/harness.py) without torch: a NumPy linear attention with a
hand-written VJP, written here from the recurrence, passes forward and backward; planted
bugs in the forward and in one gradient fail, naming the tensor and row."""
from __future__ import annotations

import numpy as np
import pytest

import ttrcheck
from ttrcheck.harness import validate_numpy


def linear_attn(q, k, v, h0=None, scale=None, bug=None):
    """S_t = S_{t-1} + k_t v_tᵀ, o_t = S_tᵀ (scale q_t), in the inputs' dtype; returns
    ((o, ht), vjp). Backward: G_t = dht + Σ_{τ≥t} scale q_τ do_τᵀ is the gradient of S_t,
    so dq_t = scale S_t do_t, dk_t = G_t v_t, dv_t = G_tᵀ k_t, dh0 = G_1."""
    B, T, H, K = q.shape
    s = q.dtype.type(K ** -0.5 if scale is None else scale)
    S = np.zeros((B, H, K, v.shape[-1]), q.dtype) if h0 is None else h0.copy()
    states, o = [], np.zeros_like(v)
    for t in range(T):
        S = S + np.einsum("bhk,bhv->bhkv", k[:, t], v[:, t])
        states.append(S)
        o[:, t] = np.einsum("bhkv,bhk->bhv", S, s * q[:, t])
    if bug == "forward":
        o[0, T - 1] *= 1.5
    if bug == "row1":
        o[1, T - 1] *= 1.5

    def vjp(cot):
        do, G = cot["do"], cot.get("dht", np.zeros_like(S)).astype(q.dtype)
        dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
        for t in reversed(range(T)):
            G = G + np.einsum("bhk,bhv->bhkv", s * q[:, t], do[:, t])
            dq[:, t] = s * np.einsum("bhkv,bhv->bhk", states[t], do[:, t])
            dk[:, t] = np.einsum("bhkv,bhv->bhk", G, v[:, t])
            dv[:, t] = np.einsum("bhkv,bhk->bhv", G, k[:, t])
        if bug == "dk":
            dk[0, 0] = -dk[0, 0]
        grads = {"dq": dq, "dk": dk, "dv": dv}
        if h0 is not None:
            grads["dh0"] = G
        return grads

    return (o, S), vjp


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
def test_correct_port_passes(dtype):
    r = validate_numpy(linear_attn, "linear_attn", suites=["tiny"], dtypes=[dtype], form="sequential")
    assert r.passed, str(r)
    judged = {(x.direction, x.tensor) for x in r.rows if x.verdict != "absent"}
    assert {("forward", "o"), ("forward", "ht"), ("backward", "dq"), ("backward", "dk"), ("backward", "dv")} <= judged


def test_config_on_top_of_the_case_recomputes_the_oracle():
    """A config key given to validate (here scale) changes the exact outputs, so the
    harness recomputes the oracle forward and backward instead of the stored one: a port
    that honours it passes, one that ignores it fails (independently: the ignored scale
    is the case's own, K^-1/2, a factor 0.3·√K away)."""
    r = validate_numpy(linear_attn, "linear_attn", suites=["tiny"], dtypes=["fp64"], form="sequential",
                       config={"scale": 0.3})
    assert r.passed, str(r)
    assert {(x.direction, x.tensor) for x in r.rows if x.verdict != "absent"} >= {("forward", "o"), ("backward", "dq")}

    def ignores_scale(scale=None, **kw):
        return linear_attn(**kw)
    r = validate_numpy(ignores_scale, "linear_attn", suites=["tiny"], dtypes=["fp64"], form="sequential",
                       config={"scale": 0.3})
    assert {(x.direction, x.tensor) for x in r.failures} >= {("forward", "o"), ("backward", "dq"), ("backward", "dk")}


def test_planted_forward_bug_fails_naming_row():
    case = max(ttrcheck.vectors("linear_attn", "tiny"), key=lambda c: c.dims["T"])
    T = case.dims["T"]
    r = validate_numpy(lambda **kw: linear_attn(**kw, bug="forward")[0], "linear_attn", suites=["tiny"],
                       cases=[case.name], dtypes=["fp32"], backward=False, form="sequential")
    assert not r.passed
    (row,) = r.failures
    assert (row.direction, row.tensor, row.worst[0], row.worst[1]) == ("forward", "o", 0, T - 1)
    assert "FAIL" in str(r)


def test_planted_gradient_bug_fails_naming_tensor():
    r = validate_numpy(lambda **kw: linear_attn(**kw, bug="dk"), "linear_attn", suites=["tiny"], dtypes=["fp32"],
                       form="sequential")
    assert {(x.direction, x.tensor) for x in r.failures} == {("backward", "dk")}
    assert all(x.worst[:2] == (0, 0) for x in r.failures)


def test_bad_harness_arguments():
    with pytest.raises(ttrcheck.InputError, match="bf16"):
        validate_numpy(linear_attn, "linear_attn", dtypes=["bf16"])
    with pytest.raises(ttrcheck.InputError, match="layer"):
        validate_numpy(linear_attn)


def test_adapter_passes_renamed_keys_and_drops_those_mapped_to_nothing():
    from ttrcheck.fla import FLA_OPS, Adapter
    seen = {}

    def fn(**kw):
        seen.update(kw)
        return ("o", None)

    out = Adapter("linear_attn", None, {"h0": "initial_state"}, {"log_atk_scale": ""}, {"flag": True}).call(
        fn, {"q": 1, "h0": 2}, {"scale": 0.5, "log_atk_scale": -0.2})
    assert seen == {"q": 1, "initial_state": 2, "scale": 0.5, "flag": True}
    assert out == {"o": "o"}                                      # a None result is not an output
    assert FLA_OPS["chunk_precond_kda"].outputs == ("o", "ht", "final_A_state")


def test_adapter_casts_fp32_inputs_and_names_fla_backward_forms():
    from ttrcheck.fla import FLA_OPS
    seen = {}

    def fn(**kw):
        seen.update(kw)
        return ("o", None)

    FLA_OPS["chunk_kda"].call(fn, {"q": np.ones(2), "h0": np.ones(2)}, {})
    assert seen["initial_state"].dtype == np.float32 and seen["q"].dtype == np.float64
    assert {n for n, a in FLA_OPS.items() if a.fp32} == {"chunk_kda", "chunk_gla", "chunk_precond_kda"}
    # FLA's fused-recurrent gla/simple_gla form dg by a reverse running sum (docs/validating-fla.md).
    for op in ("fused_recurrent_gla", "fused_recurrent_simple_gla"):
        assert FLA_OPS[op].backward_form == "sequential_dg_sum"
    # FLA's chunk_kda forms its intra-chunk products on TF32 operands, dg from both sides.
    for op, layer in (("chunk_kda", "kda"), ("chunk_precond_kda", "precond_kda")):
        assert FLA_OPS[op].backward_form == "chunk_tf32_intra"
        assert "cpu chunk_tf32_intra backward" in ttrcheck.layer(layer).raw["implementations"]


def test_sequential_dg_sum_form_judges_gradients():
    # The exact gradients rounded once to fp32 pass the running-sum model; a backward
    # form the layer lacks (and the forward direction) is refused by name.
    case = ttrcheck.vectors("gla", "tiny", backward=True)[0]
    cand = {n: ttrcheck.round_to(x, "fp32") for n, x in case.backward_oracle.items()}
    r = ttrcheck.check("gla", case.backward_inputs, cand, dtype="fp32", backward=True, form="sequential_dg_sum",
                       oracle=case.backward_oracle)
    assert r.passed, str(r)
    lin = ttrcheck.vectors("linear_attn", "tiny", backward=True)[0]
    with pytest.raises(ttrcheck.InputError, match="no sequential_dg_sum backward form"):
        ttrcheck.check("linear_attn", lin.backward_inputs, dict(lin.backward_oracle), dtype="fp32", backward=True,
                       form="sequential_dg_sum")


def test_captured_run_judged_elsewhere_gives_the_same_rows(tmp_path):
    """execute() without oracles, save, load, judge(): the rows of judging in process, for a
    correct port and for the planted dk bug (the file carries everything judging needs;
    the oracles are recomputed from the saved inputs, not read from the case)."""
    from ttrcheck.harness import NumpyBackend, Execution, execute, judge
    from ttrcheck.fla import NATIVE

    def bad(**kw):
        return linear_attn(**kw, bug="dk")
    for fn, failing in ((linear_attn, set()), (bad, {("backward", "dk")})):
        inline = validate_numpy(fn, "linear_attn", suites=["tiny"], dtypes=["fp32"], form="sequential")
        runs = list(execute(fn, NumpyBackend(), "linear_attn", suites=["tiny"], dtypes=["fp32"], form="sequential",
                            adapter=NATIVE, with_oracle=False))
        assert runs and all(e.oracle is None and e.backward_oracle is None for e in runs)
        rows = []
        for i, e in enumerate(runs):
            path = str(tmp_path / f"{fn.__name__}.{i}.npz")
            e.save(path)
            assert not (tmp_path / f"{fn.__name__}.{i}.npz.part").exists()
            rows += judge(Execution.load(path))[0]
        assert rows == inline.rows
        assert {(x.direction, x.tensor) for x in rows if x.verdict == "FAIL"} == failing


def test_loading_a_file_that_is_not_a_captured_run_raises_input_error(tmp_path):
    from ttrcheck.harness import Execution
    bad = tmp_path / "x.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ttrcheck.InputError, match="x.npz: not a captured run"):
        Execution.load(str(bad))
    np.savez(str(tmp_path / "y.npz"), a=np.zeros(2))
    with pytest.raises(ttrcheck.InputError, match="y.npz: not a captured run"):
        Execution.load(str(tmp_path / "y.npz"))


def test_sampled_slices_are_judged_and_named_in_the_runs_coordinates():
    """`sample` keeps batch rows x heads of each run after the function ran on the whole
    case (production shapes): the kept slices are judged forward and backward, and a
    planted error at (b = 1, t = T-1) fails when row 1 is kept, named at the run's own
    (b, t, h), and is not judged when only row 0 is."""
    case = next(c for c in ttrcheck.vectors("linear_attn", "tiny") if c.dims["B"] == 2)
    T = case.dims["T"]
    kw = dict(suites=["tiny"], cases=[case.name], dtypes=["fp64"], form="sequential")
    r = validate_numpy(linear_attn, "linear_attn", sample={"b": [1], "h": [0]}, **kw)
    assert r.passed, str(r)
    judged = {(x.direction, x.tensor) for x in r.rows if x.verdict != "absent"}
    assert {("forward", "o"), ("backward", "dq"), ("backward", "dk"), ("backward", "dh0")} <= judged
    assert all("slices b [1] x h [0]" in x.note for x in r.rows)
    assert all(x.worst[0] == 1 for x in r.rows if x.worst is not None)
    r = validate_numpy(lambda **a: linear_attn(**a, bug="row1"), "linear_attn", sample={"b": [1], "h": [0]}, **kw)
    (row,) = [x for x in r.failures if x.direction == "forward"]
    assert (row.tensor, row.worst[0], row.worst[1], row.worst[2]) == ("o", 1, T - 1, 0)
    r = validate_numpy(lambda **a: linear_attn(**a, bug="row1"), "linear_attn", sample={"b": [0], "h": [0]}, **kw)
    assert r.passed, str(r)


def test_sample_outside_the_run_is_bad_input():
    case = next(c for c in ttrcheck.vectors("linear_attn", "tiny") if c.dims["B"] == 2)
    with pytest.raises(ttrcheck.InputError, match=r"sample: b \[2\] outside '\w+' of shape"):
        validate_numpy(linear_attn, "linear_attn", suites=["tiny"], cases=[case.name], dtypes=["fp64"],
                       form="sequential", sample={"b": [2], "h": [0]})
