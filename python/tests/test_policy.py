"""Foreign-kernel policies from Python (docs/arithmetic-policies.md, "Foreign kernels"):
the same verdicts and reports as `ttrcheck check --policy`, and an explanation that
names the smallest passing policy. The TF32 candidate is built here from the math
(NumPy, operands rounded to TF32 by bit masking), not from ttrcheck's forms."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ttrcheck
from conftest import write_st


def tf32(x):
    """float32 values rounded to TF32 (10 significand bits), to nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & ~np.uint64(0x1FFF)
    return u.astype(np.uint32).view(np.float32)


def tf32_linear_attention(q, k, v, scale, C=64):
    """Chunkwise o_t = scale·Σ_{s≤t}(q_t·k_s) v_s in fp32 with TF32 dot operands: the score
    matrix and the chunk-initial state are rounded to TF32 where they feed the next dot."""
    q, k, v = (np.asarray(a, np.float32) for a in (q, k, v))
    B, T, H, K = q.shape
    o = np.zeros(v.shape, np.float32)
    ht = np.zeros((B, H, K, v.shape[3]), np.float32)
    for b in range(B):
        for h in range(H):
            S = np.zeros((K, v.shape[3]), np.float32)
            for t0 in range(0, T, C):
                Q, Kc, Vc = tf32(q[b, t0:t0 + C, h]), tf32(k[b, t0:t0 + C, h]), tf32(v[b, t0:t0 + C, h])
                A = np.tril(Q @ Kc.T)
                o[b, t0:t0 + C, h] = np.float32(scale) * (Q @ tf32(S) + tf32(A) @ Vc)
                S = S + Kc.T @ Vc
            ht[b, h] = S
    return o, ht


@pytest.fixture(scope="module")
def case():
    return ttrcheck.vectors("linear_attn", "demo", 0)[0]   # B=1 T=128 H=2 K=V=16


def test_tf32_kernel_passes_as_tf32_fails_as_fp32(case):
    o, ht = tf32_linear_attention(case.inputs["q"], case.inputs["k"], case.inputs["v"], 0.25)
    cand = {"o": o, "ht": ht}
    fp32 = ttrcheck.check("linear_attn", case.inputs, cand, policy="fp32", config={"scale": 0.25})
    as_tf32 = ttrcheck.check("linear_attn", case.inputs, cand, policy="tf32", config={"scale": 0.25})
    assert not fp32.passed and fp32.max_ratio > 100
    assert as_tf32.passed, str(as_tf32)
    doc = as_tf32.to_dict()
    assert doc["checks"][0]["policy"] == "tf32" and doc["checks"][0]["dtype"] == "fp32"
    assert "policy" not in fp32.to_dict()["checks"][0]          # native policies: reports unchanged
    e = ttrcheck.explain_policy("linear_attn", case.inputs, cand, config={"scale": 0.25})
    assert e.best == "tf32"
    assert list(e.reports) == ["fp32", "tf32", "fp16", "bf16-storage", "bf16"]
    assert not e.reports["fp32"].passed and e.reports["tf32"].passed


def test_policy_matches_the_cli(case, cli, tmp_path):
    o, ht = tf32_linear_attention(case.inputs["q"], case.inputs["k"], case.inputs["v"], 0.25)
    write_st(tmp_path / "in.safetensors", dict(case.inputs))
    write_st(tmp_path / "cand.safetensors", {"o": o, "ht": ht})
    r = cli("check", "--layer", "linear_attn", "--in", str(tmp_path / "in.safetensors"), "--candidate",
            str(tmp_path / "cand.safetensors"), "--policy", "tf32", "--set", "scale=0.25", "--explain-policy",
            "--report", str(tmp_path / "r.json"), check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "explained by tf32" in r.stdout
    py = ttrcheck.check("linear_attn", dict(case.inputs), {"o": o, "ht": ht}, policy="tf32", config={"scale": 0.25},
                        name="in")
    assert json.loads((tmp_path / "r.json").read_text())["checks"] == py.to_dict()["checks"]


def test_failure_at_an_exact_zero_row_is_noted(case):
    """q_t = 0 makes o_t = 0 with model 0: only the subnormal floor bounds that row, so a
    1e-30 residue fails fp32 and tf32 and passes fp16; the explanation says why, per policy."""
    inputs = {k: np.array(v) for k, v in case.inputs.items()}
    inputs["q"][0, 3, 1, :] = 0
    exact = ttrcheck.oracle("linear_attn", inputs, {"scale": 0.25})
    cand = {"o": np.asarray(exact["o"], np.float32).copy(), "ht": np.asarray(exact["ht"], np.float32)}
    assert not cand["o"][0, 3, 1].any()
    cand["o"][0, 3, 1, 2] = 1e-30
    e = ttrcheck.explain_policy("linear_attn", inputs, cand, config={"scale": 0.25})
    assert e.best == "fp16"
    failing = [p for p, r in e.reports.items() if not r.passed]
    assert failing[:2] == ["fp32", "tf32"]
    assert sorted(e.notes) == sorted(failing)
    assert e.notes["fp32"].startswith("o fails at (0,3,1), where the exact value and the model are 0")
    assert "(o fails at (0,3,1)" in str(e)
    plain = ttrcheck.check("linear_attn", inputs, cand, config={"scale": 0.25}, dtype="fp32")
    assert not plain.passed and plain.tensors["o"].worst_at_floor and not plain.tensors["ht"].worst_at_floor
    assert "o fails at (0,3,1), where the exact value and the model are 0" in str(plain)
    assert json.loads(plain.to_json())["checks"][0]["tensors"][0]["worst_at_floor"] is True
    o, ht = tf32_linear_attention(case.inputs["q"], case.inputs["k"], case.inputs["v"], 0.25)
    assert ttrcheck.explain_policy("linear_attn", case.inputs, {"o": o, "ht": ht}, config={"scale": 0.25}).notes == {}


def test_bad_policy_is_an_input_error(case):
    with pytest.raises(ttrcheck.InputError, match=r"^--policy: unknown arithmetic policy 'tf16' "):
        ttrcheck.check("linear_attn", case.inputs, {"o": case.oracle["o"]}, policy="tf16")


def test_explain_policy_takes_the_oracle_tier(case):
    """One oracle for every policy, computed as oracle_tier says (docs/oracle-tiers.md):
    double-double on these benign inputs by default, MPFR-256 when asked;
    the verdicts are the same (the two oracles differ by at most a float64 ulp)."""
    o, ht = tf32_linear_attention(case.inputs["q"], case.inputs["k"], case.inputs["v"], 0.25)
    cand = {"o": o, "ht": ht}
    fast = ttrcheck.explain_policy("linear_attn", case.inputs, cand, config={"scale": 0.25})
    mpfr = ttrcheck.explain_policy("linear_attn", case.inputs, cand, config={"scale": 0.25}, oracle_tier="mpfr")
    assert {r.to_dict()["checks"][0]["oracle"]["tier"] for r in fast.reports.values()} == {"dd"}
    assert {r.to_dict()["checks"][0]["oracle"]["tier"] for r in mpfr.reports.values()} == {"mpfr:256"}
    assert fast.best == mpfr.best == "tf32"
    assert [r.passed for r in fast.reports.values()] == [r.passed for r in mpfr.reports.values()]
    with pytest.raises(ttrcheck.InputError, match=r"^--oracle-tier: unknown value 'dd' \(auto\|mpfr\)"):
        ttrcheck.explain_policy("linear_attn", case.inputs, cand, config={"scale": 0.25}, oracle_tier="dd")


def test_tf32_state_pass_operand_is_scaled_q():
    """FLA's chunk backward state pass (chunk_bwd_kernel_dh) multiplies scale·q, rounded to
    the product's TF32 operand, by do: dh0 = dht + tf32(scale·q)ᵀ tf32(do). At K = 8 the
    scale 8^-1/2 is not a power of two, so that rounding is real. A candidate whose other
    gradients are exact and whose dh0 is built that way (NumPy, from the math) passes as
    tf32 and fails as fp32. The model that scaled after the product had no such rounding
    and judged FLA's fp32 chunk_linear_attn at 1.6e3 as tf32 (docs/validating-fla.md)."""
    from test_harness_numpy import linear_attn
    rng = np.random.default_rng(3)
    B, T, H, K = 1, 20, 2, 8
    # Inputs TF32 values, as the suites' are (bf16 ones): the model perturbs only a value its
    # format cannot hold, so only the product's own operand scale·q is left to round.
    f32 = lambda *s: tf32(rng.standard_normal(s).astype(np.float32))
    ins = {"q": f32(B, T, H, K), "k": f32(B, T, H, K), "v": f32(B, T, H, K), "h0": f32(B, H, K, K),
           "do": f32(B, T, H, K), "dht": f32(B, H, K, K)}
    x = {n: a.astype(np.float64) for n, a in ins.items()}
    _, vjp = linear_attn(x["q"], x["k"], x["v"], x["h0"])
    exact = vjp({"do": x["do"], "dht": x["dht"]})
    cand = {n: a.astype(np.float32) for n, a in exact.items()}
    sq = tf32((np.float32(K ** -0.5) * ins["q"]).astype(np.float32)).astype(np.float64)
    sq_exact = K ** -0.5 * x["q"]
    assert np.abs(sq - sq_exact).max() > 1e-5                  # the rounding the test is about
    cand["dh0"] = (x["dht"] + np.einsum("bthk,bthv->bhkv", sq, tf32(ins["do"]).astype(np.float64))).astype(np.float32)
    fp32 = ttrcheck.check("linear_attn", ins, cand, policy="fp32", backward=True, form="chunk")
    as_tf32 = ttrcheck.check("linear_attn", ins, cand, policy="tf32", backward=True, form="chunk")
    assert as_tf32.passed, str(as_tf32)
    assert not fp32.passed and fp32.tensors["dh0"].max_ratio > 100, str(fp32)
    assert [n for n, t in fp32.tensors.items() if t.present and not t.passed] == ["dh0"]
