"""Variable-length batches from Python (docs/varlen.md, docs/python.md): a NumPy Gated
DeltaNet written here for FLA's cu_seqlens convention (B = 1, h0/ht [N, H, K, V], the
state restarting at every sequence) passes the `varlen` suite; the same code with the
state carried across a boundary (FLA #836's class of bug) fails, and the report names
the sequence and the token of the worst row."""
from __future__ import annotations

import numpy as np
import pytest

import ttrcheck
from ttrcheck.harness import validate_numpy
from ttrcheck.testing import failure_message


def gdn_varlen(q, k, v, g, beta, h0=None, cu_seqlens=None, scale=None, use_qk_l2norm_in_kernel=False,
               leak=False):
    """Per sequence n of cu_seqlens: S = h0[n]; S̄ = e^{g_t} S; S ← S̄ + k_t (β_t (v_t − S̄ᵀk_t))ᵀ;
    o_t = Sᵀ(scale q_t). `leak`: carry S from the previous sequence instead of h0[n]."""
    q, k, v, g, beta = (np.asarray(x, np.float64) for x in (q, k, v, g, beta))
    _, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    if use_qk_l2norm_in_kernel:
        q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    cu = np.asarray(cu_seqlens) if cu_seqlens is not None else np.array([0, T])
    assert cu.dtype == np.int64, "cu_seqlens reaches the function as int64"
    N = len(cu) - 1
    o = np.zeros((1, T, H, V))
    ht = np.zeros((N, H, K, V))
    S = np.zeros((H, K, V))
    for n in range(N):
        if not (leak and n > 0):
            S = np.zeros((H, K, V)) if h0 is None else np.array(h0[n], np.float64)
        for t in range(cu[n], cu[n + 1]):
            S = S * np.exp(g[0, t])[:, None, None]
            r = v[0, t] - np.einsum("hkv,hk->hv", S, k[0, t])
            S = S + np.einsum("hk,hv->hkv", k[0, t], beta[0, t][:, None] * r)
            o[0, t] = np.einsum("hkv,hk->hv", S, scale * q[0, t])
        ht[n] = S
    return o, ht


def test_varlen_suite_passes_a_correct_numpy_port():
    v = validate_numpy(gdn_varlen, "gated_delta_rule", suites=["varlen"], dtypes=["fp32"], backward=False)
    assert v.passed, v.table()
    cases = {r.case for r in v.rows}
    assert {"fla_boundaries", "single_tokens", "chunk_edges", "empty_sequences"} <= cases
    # Every row carries the sequence of its worst row (varlen inputs).
    assert all(r.worst_sequence is not None for r in v.rows if r.verdict != "absent")


def test_state_leaking_across_a_boundary_fails_and_names_the_sequence():
    leaky = lambda **kw: gdn_varlen(**kw, leak=True)  # noqa: E731
    v = validate_numpy(leaky, "gated_delta_rule", suites=["varlen"], dtypes=["fp32"], backward=False,
                       cases=["chunk_edges"])
    assert not v.passed
    fails = v.failures
    assert {r.tensor for r in fails} >= {"o", "ht"}
    for r in fails:
        seq, token = r.worst_sequence
        assert seq >= 1, r  # the first sequence starts from its own h0: only later ones are wrong
        b, t, h = r.worst
        assert b == (0 if r.tensor == "o" else seq)  # a state row's b is its sequence
    o_row = next(r for r in fails if r.tensor == "o")
    cu = [0, 64, 65, 192, 200]
    seq, token = o_row.worst_sequence
    assert cu[seq] + token == o_row.worst[1]  # (sequence, token) is the packed t
    assert f"seq {seq} t {token}" in v.table()


def test_check_report_names_sequence_and_token():
    case = next(c for c in ttrcheck.vectors("gated_delta_rule", "varlen", 0) if c.name == "single_tokens")
    o, ht = gdn_varlen(**case.inputs, **{k: (float(x) if k == "scale" else x == "true")
                                        for k, x in case.config.items()})
    planted = o.copy()
    planted[0, 3] *= 1.01  # token 3 = sequence 3's only token
    rep = ttrcheck.check("gated_delta_rule", case.inputs, {"o": planted, "ht": ht}, dtype="fp32",
                         config=case.config)
    assert not rep.passed
    t = rep.tensors["o"]
    assert t.worst[1] == 3 and t.worst_sequence == (3, 0)
    assert "sequence 3, token 0" in failure_message(rep)
    assert rep.tensors["ht"].passed and rep.tensors["ht"].worst_sequence[1] is None  # a state row: no token


def test_cu_seqlens_must_be_integer():
    case = next(c for c in ttrcheck.vectors("gated_delta_rule", "varlen", 0) if c.name == "single_tokens")
    bad = dict(case.inputs, cu_seqlens=np.asarray(case.inputs["cu_seqlens"], np.float64))
    with pytest.raises(ttrcheck.InputError, match="cu_seqlens"):
        ttrcheck.check("gated_delta_rule", bad, case.oracle, dtype="fp32", config=case.config)
