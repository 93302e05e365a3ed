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
    # FLA's chunk_kda, chunk_gated_delta_rule and the preconditioned ops form their
    # intra-chunk products on TF32 operands, dg from both sides.
    for op, layer in (("chunk_kda", "kda"), ("chunk_precond_kda", "precond_kda"),
                      ("chunk_gated_delta_rule", "gated_delta_rule"),
                      ("chunk_precond_gated_delta_rule", "precond_gated_delta_rule")):
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


def linear_attn_varlen(q, k, v, cu_seqlens, h0=None, scale=None, bug=None):
    """linear_attn over a packed batch (B = 1): each sequence of cu_seqlens from its own h0
    row, as FLA's varlen convention has it; ht and dh0 have a row per sequence. bug="seq3"
    scales the last output of sequence 3."""
    cu = [int(x) for x in cu_seqlens]
    N = len(cu) - 1
    runs = [linear_attn(q[:, a:b], k[:, a:b], v[:, a:b], None if h0 is None else h0[n:n + 1], scale)
            for n, (a, b) in enumerate(zip(cu, cu[1:]))]
    o = np.concatenate([r[0][0] for r in runs], axis=1)
    ht = np.concatenate([r[0][1] for r in runs], axis=0)
    if bug == "seq3":
        o[0, cu[4] - 1] *= 1.5

    def vjp(cot):
        do, dht = cot["do"], cot.get("dht")
        parts = [r[1]({"do": do[:, a:b], **({} if dht is None else {"dht": dht[n:n + 1]})})
                 for n, (r, a, b) in enumerate(zip(runs, cu, cu[1:]))]
        grads = {g: np.concatenate([p[g] for p in parts], axis=1) for g in ("dq", "dk", "dv")}
        if h0 is not None:
            grads["dh0"] = np.concatenate([p["dh0"] for p in parts], axis=0)
        assert len(parts) == N
        return grads

    return (o, ht), vjp


def test_varlen_sequences_are_sampled_and_named_in_the_runs_tokens():
    """A varlen batch is sampled by sequence: the kept sequences (their tokens packed, their
    h0/ht rows, cu_seqlens rebuilt) x heads are judged forward and backward; a planted
    error at the last token of sequence 3 fails when sequence 3 is kept, named at the
    run's own token cu[4] - 1 and as (sequence 3, its last token), and is not judged when
    only sequence 1 is."""
    case = ttrcheck.vectors("linear_attn", "varlen")[2]
    cu = [int(x) for x in case.inputs["cu_seqlens"]]
    assert case.name == "chunk_edges" and len(cu) - 1 >= 4 and case.dims["H"] == 2
    kw = dict(suites=["varlen"], cases=[case.name], dtypes=["fp64"], form="sequential")
    r = validate_numpy(linear_attn_varlen, "linear_attn", sample={"n": [1, 3], "h": [1]}, **kw)
    assert r.passed, str(r)
    judged = {(x.direction, x.tensor) for x in r.rows if x.verdict != "absent"}
    assert {("forward", "o"), ("forward", "ht"), ("backward", "dq"), ("backward", "dh0")} <= judged
    assert all("sequences [1, 3] x h [1]" in x.note for x in r.rows)
    assert all(x.worst[2] == 1 for x in r.rows if x.worst is not None)
    assert all(x.worst_sequence[0] in (1, 3) for x in r.rows if x.worst_sequence is not None)
    r = validate_numpy(lambda **a: linear_attn_varlen(**a, bug="seq3"), "linear_attn",
                       sample={"n": [1, 3], "h": [1]}, **kw)
    (row,) = [x for x in r.failures if x.direction == "forward"]
    assert (row.tensor, row.worst, row.worst_sequence) == ("o", (0, cu[4] - 1, 1), (3, cu[4] - 1 - cu[3]))
    r = validate_numpy(lambda **a: linear_attn_varlen(**a, bug="seq3"), "linear_attn",
                       sample={"n": [1], "h": [0, 1]}, **kw)
    assert r.passed, str(r)


def test_sampled_varlen_run_captured_and_judged_elsewhere_names_the_same_rows(tmp_path):
    """The sample's record (sequences, heads, their first tokens in the run) travels in
    the captured file: judging the loaded run names the planted row as judging in process."""
    from ttrcheck.harness import NumpyBackend, Execution, execute, judge
    from ttrcheck.fla import NATIVE

    def bad(**a):
        return linear_attn_varlen(**a, bug="seq3")
    kw = dict(suites=["varlen"], cases=["chunk_edges"], dtypes=["fp64"], form="sequential")
    inline = validate_numpy(bad, "linear_attn", sample={"n": [3, 0], "h": [1]}, **kw)
    (e,) = list(execute(bad, NumpyBackend(), "linear_attn", adapter=NATIVE, with_oracle=False,
                        sample={"n": [3, 0], "h": [1]}, **kw))
    path = str(tmp_path / "run.npz")
    e.save(path)
    rows = judge(Execution.load(path))[0]
    assert rows == inline.rows
    assert [(x.tensor, x.worst_sequence[0]) for x in rows if x.verdict == "FAIL"] == [("o", 3)]


@pytest.mark.parametrize("sample,says", [
    ({"b": [0], "h": [0]}, r"sampled by sequence, not batch row"),
    ({"n": [9], "h": [0]}, r"n \[9\] outside the \d+ sequences of cu_seqlens"),
    ({"n": [1, 1], "h": [0]}, r"keeps a sequence twice"),
    ({"n": [1], "h": [2]}, r"sample: h \[2\] outside '\w+' of shape"),
])
def test_bad_varlen_sample_is_bad_input(sample, says):
    with pytest.raises(ttrcheck.InputError, match=says):
        validate_numpy(linear_attn_varlen, "linear_attn", suites=["varlen"], cases=["chunk_edges"], dtypes=["fp64"],
                       form="sequential", sample=sample)


def test_sequences_of_a_batch_without_cu_seqlens_is_bad_input():
    case = next(c for c in ttrcheck.vectors("linear_attn", "tiny") if c.dims["B"] == 2)
    with pytest.raises(ttrcheck.InputError, match=r"'n' keeps sequences of a varlen batch"):
        validate_numpy(linear_attn, "linear_attn", suites=["tiny"], cases=[case.name], dtypes=["fp64"],
                       form="sequential", sample={"n": [0], "h": [0]})



def precond_oracle_port(bug=None):
    """precond_gated_delta_rule by its own oracle (MPFR, rounded to float64), forward and
    vector-Jacobian product: an exact port of a layer with a per-head input
    (`log_atk_scale [H]`). bug="dlog" doubles dlog_atk_scale, bug="dq" scales dq by 1 + 1e-6."""
    layer = "precond_gated_delta_rule"
    spec = ttrcheck.layer(layer)
    names = {t.name for t in spec.inputs}
    outputs = {t.name for t in spec.outputs}

    def fn(**kw):
        inputs = {n: v for n, v in kw.items() if n in names}
        config = {k: v for k, v in kw.items() if k not in names}
        out = ttrcheck.oracle(layer, inputs, config)

        def vjp(cot):
            g = {k: v for k, v in ttrcheck.oracle(layer, {**inputs, **cot}, config, backward=True).items()
                 if k.startswith("d")}
            if bug == "dlog":
                g["dlog_atk_scale"] = 2 * g["dlog_atk_scale"]
            if bug == "dq":
                g["dq"] = g["dq"] * (1 + 1e-6)
            return g
        return {k: v for k, v in out.items() if k in outputs}, vjp
    return fn


def test_a_per_head_gradient_is_left_unjudged_by_a_sample_that_drops_sequences():
    """log_atk_scale's gradient sums over every sequence of a varlen run, so a sample of some
    sequences cannot judge it: it is left out of the check (reported absent, said in the
    note), and every other tensor is judged. A doubled dlog_atk_scale therefore passes on
    the sample and fails on the whole run; an error in dq fails on the sample."""
    from ttrcheck.fla import Adapter
    # The case's config carries log_atk_scale too (the generator's value); the port takes the input.
    kw = dict(adapter=Adapter("precond_gated_delta_rule", "sequential", config={"log_atk_scale": ""}),
              suites=["varlen"], cases=["single_tokens"], dtypes=["fp64"], form="sequential")
    sample = {"n": [0, 2], "h": [1]}
    r = validate_numpy(precond_oracle_port(), "precond_gated_delta_rule", sample=sample, **kw)
    assert r.passed, str(r)
    verdicts = {(x.direction, x.tensor): x.verdict for x in r.rows}
    assert verdicts[("backward", "dlog_atk_scale")] == "absent"
    assert all(v == "pass" for k, v in verdicts.items() if k != ("backward", "dlog_atk_scale"))
    assert {("backward", "dq"), ("backward", "dg_atk"), ("backward", "dh0")} <= set(verdicts)
    assert all("dlog_atk_scale not judged (sums over the sequences not kept)" in x.note for x in r.rows)
    assert validate_numpy(precond_oracle_port("dlog"), "precond_gated_delta_rule", sample=sample, **kw).passed
    whole = validate_numpy(precond_oracle_port("dlog"), "precond_gated_delta_rule", **kw)
    assert [x.tensor for x in whole.failures] == ["dlog_atk_scale"]
    bad = validate_numpy(precond_oracle_port("dq"), "precond_gated_delta_rule", sample=sample, **kw)
    assert [x.tensor for x in bad.failures] == ["dq"]


@pytest.mark.parametrize("not_judged,says", [
    (["dnope"], r"--not-judged: 'dnope' is not one of the backward gradients of layer 'linear_attn'"),
    (["dq", "dk", "dv"], r"--not-judged: every gradient left unjudged"),
])
def test_bad_not_judged_is_bad_input(not_judged, says):
    case = ttrcheck.vectors("linear_attn", "tiny", backward=True)[0]
    grads = ttrcheck.oracle("linear_attn", case.backward_inputs, case.config, backward=True)
    with pytest.raises(ttrcheck.InputError, match=says):
        ttrcheck.check("linear_attn", case.backward_inputs, grads, backward=True, config=case.config,
                       not_judged=not_judged)


def test_o_is_always_judged():
    case = ttrcheck.vectors("linear_attn", "tiny")[0]
    out = ttrcheck.oracle("linear_attn", case.inputs, case.config)
    with pytest.raises(ttrcheck.InputError, match=r"--not-judged: 'o' is always judged"):
        ttrcheck.check("linear_attn", case.inputs, out, config=case.config, not_judged=["o"])


def test_a_lean_capture_makes_the_inputs_again_and_refuses_other_inputs(tmp_path):
    """save(lean=True) leaves the inputs and cotangents of a run on the case's own arrays
    out (seed, names and digest instead): loading makes them again with the generator and
    the sample, equal to a full save's and judged to the same rows; a digest that does not
    match (the generator changed) is bad input naming the file. A run on rounded inputs
    (fp16 here) keeps them whatever `lean` says."""
    import json
    from ttrcheck.harness import NumpyBackend, Execution, execute, judge
    from ttrcheck.fla import NATIVE

    def bad(**a):
        return linear_attn_varlen(**a, bug="seq3")
    kw = dict(suites=["varlen"], cases=["chunk_edges"], form="sequential", adapter=NATIVE, with_oracle=False,
              sample={"n": [3, 0], "h": [1]})
    (e,) = list(execute(bad, NumpyBackend(), "linear_attn", dtypes=["fp64"], **kw))
    assert e.seed == 0
    full, lean = str(tmp_path / "full.npz"), str(tmp_path / "lean.npz")
    e.save(full)
    e.save(lean, lean=True)
    with np.load(lean) as z:
        assert sorted({k.split("/")[0] for k in z.files if k != "meta"}) == ["grads", "outputs"]
    a, b = Execution.load(full), Execution.load(lean)
    for g in ("inputs", "backward_inputs"):
        ga, gb = getattr(a, g), getattr(b, g)
        assert list(ga) == list(gb) and all(np.array_equal(ga[n], gb[n]) for n in ga), g
    assert judge(b)[0] == judge(a)[0]
    assert [(x.tensor, x.worst_sequence[0]) for x in judge(b)[0] if x.verdict == "FAIL"] == [("o", 3)]

    with np.load(lean) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    meta["regenerate"]["digest"] = "0" * 64
    arrays["meta"] = np.array(json.dumps(meta))
    tampered = str(tmp_path / "tampered.npz")
    np.savez_compressed(tampered, **arrays)
    with pytest.raises(ttrcheck.InputError, match=r"tampered.npz: the inputs made again from seed 0 differ"):
        Execution.load(tampered)

    (r,) = list(execute(bad, NumpyBackend(), "linear_attn", dtypes=["fp16"], **kw))
    assert r.seed is None
    r.save(lean, lean=True)
    with np.load(lean) as z:
        assert {"inputs", "backward_inputs"} <= {k.split("/")[0] for k in z.files if k != "meta"}
