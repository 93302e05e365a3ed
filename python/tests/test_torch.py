"""The PyTorch side: bf16 tensors in and out, and the port-validation harness
(ttrcheck.torch.validate) on a pure-PyTorch Gated DeltaNet written here: the correct
recurrence passes forward and backward; a planted bug fails, naming the tensor and row.
Skipped without torch (CI installs none: README.md, "Python")."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ttrcheck  # noqa: E402
import ttrcheck.torch  # noqa: E402
from ttrcheck.fla import FLA_OPS, adapter_for  # noqa: E402


def gdn(q, k, v, g, beta, h0=None, scale=None, use_qk_l2norm_in_kernel=False, bug_at=None):
    """Gated DeltaNet, one token at a time, in fp32 (README.md's recurrence):
    S̄ = e^{g_t} S_{t-1}; S_t = S̄ + k_t (β_t (v_t − S̄ᵀ k_t))ᵀ; o_t = S_tᵀ (scale q_t).
    `bug_at`: forget the decay at that token (a planted bug)."""
    B, T, H, K = q.shape
    scale = K ** -0.5 if scale is None else scale
    f = lambda x: x.to(torch.float32)
    if use_qk_l2norm_in_kernel:
        q = f(q) / torch.sqrt((f(q) ** 2).sum(-1, keepdim=True) + 1e-6)
        k = f(k) / torch.sqrt((f(k) ** 2).sum(-1, keepdim=True) + 1e-6)
    S = q.new_zeros(B, H, K, v.shape[-1], dtype=torch.float32) if h0 is None else f(h0)
    outs = []
    for t in range(T):
        if t != bug_at:
            S = S * torch.exp(f(g[:, t]))[..., None, None]
        kt, vt = f(k[:, t]), f(v[:, t])
        residual = vt - torch.einsum("bhkv,bhk->bhv", S, kt)
        S = S + torch.einsum("bhk,bhv->bhkv", kt, f(beta[:, t])[..., None] * residual)
        outs.append(torch.einsum("bhkv,bhk->bhv", S, f(q[:, t]) * scale))
    return torch.stack(outs, 1).to(v.dtype), S.to(v.dtype)


def test_bf16_tensors_in_and_out():
    case = ttrcheck.vectors("gated_delta_rule", "tiny", 0)[0]
    t_in = {n: torch.from_numpy(a).to(torch.bfloat16) for n, a in case.inputs.items()}
    # Inputs lie on the bf16 grid: the bf16 tensors carry the same values, hence the same oracle.
    ours = ttrcheck.oracle("gated_delta_rule", t_in, case.config)
    assert all(np.array_equal(ours[n], case.oracle[n]) for n in case.oracle)
    # Through float32 on both sides (torch rounds float64 to bf16 via float32).
    cand_t = {n: torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16) for n, a in case.oracle.items()}
    cand_np = {n: ttrcheck.round_to(a.astype(np.float32), "bf16") for n, a in case.oracle.items()}
    # torch's bf16 rounding (RNE) and ours agree bit for bit.
    for n in cand_t:
        assert np.array_equal(cand_t[n].view(torch.int16).numpy().view(np.uint16), cand_np[n].bits)
    r_t = ttrcheck.check("gated_delta_rule", t_in, cand_t, config=case.config)
    r_np = ttrcheck.check("gated_delta_rule", case.inputs, cand_np, config=case.config)
    assert r_t.dtype == "bf16" and r_t.passed and r_t.to_json() == r_np.to_json()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensor_same_verdict_as_cpu():
    case = ttrcheck.vectors("gated_delta_rule", "tiny", 0)[0]
    o = ttrcheck.round_to(case.oracle["o"] * 1.001, "bf16").to_float64()
    cpu = torch.from_numpy(o).to(torch.bfloat16)
    r_cpu = ttrcheck.check("gated_delta_rule", case.inputs, {"o": cpu}, config=case.config)
    r_gpu = ttrcheck.check("gated_delta_rule", case.inputs, {"o": cpu.cuda()}, config=case.config)
    assert r_cpu.to_json() == r_gpu.to_json()


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_correct_recurrence_passes_forward_and_backward(dtype):
    result = ttrcheck.torch.validate(gdn, "gated_delta_rule", suites=["tiny"], dtypes=[dtype], form="sequential")
    assert result.passed, str(result)
    directions = {(r.direction, r.tensor) for r in result.rows if r.verdict != "absent"}
    assert {("forward", "o"), ("forward", "ht"), ("backward", "dq"), ("backward", "dk"), ("backward", "dv"),
            ("backward", "dg"), ("backward", "dbeta")} <= directions
    assert all(r.max_ratio <= 8 for r in result.rows if r.verdict != "absent")


def test_planted_bug_fails_naming_tensor_and_row():
    case = max(ttrcheck.vectors("gated_delta_rule", "tiny", 0), key=lambda c: c.dims["T"])
    T = case.dims["T"]
    buggy = lambda **kw: gdn(**kw, bug_at=T - 1)
    result = ttrcheck.torch.validate(buggy, "gated_delta_rule", suites=["tiny"], cases=[case.name],
                                     dtypes=["fp32"], form="sequential")
    assert not result.passed
    failing = {(r.direction, r.tensor): r for r in result.failures}
    assert ("forward", "o") in failing and ("forward", "ht") in failing
    assert failing[("forward", "o")].worst[1] == T - 1      # the token whose decay was dropped
    assert ("backward", "dg") in failing                    # the dropped decay's gradient is wrong
    assert "FAIL" in str(result) and "o" in str(result)


def test_fla_adapter_table_maps_names():
    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, **kwargs):
        # FLA's signature and conventions, computed by the reference above.
        return gdn(q, k, v, g, beta, h0=initial_state, scale=scale,
                   use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)

    a = adapter_for(chunk_gated_delta_rule)
    assert a is FLA_OPS["chunk_gated_delta_rule"] and a.layer == "gated_delta_rule" and a.form == "chunk"
    result = ttrcheck.torch.validate(chunk_gated_delta_rule, suites=["tiny"], dtypes=["fp32"])
    assert result.layer == "gated_delta_rule" and result.passed, str(result)
    # Config keys travel as FLA's keywords: a scale the function ignored would fail.
    ignored = lambda **kw: chunk_gated_delta_rule(**{**kw, "scale": None})
    ignored.__name__ = "chunk_gated_delta_rule"
    assert not ttrcheck.torch.validate(ignored, suites=["tiny"], dtypes=["fp32"], backward=False,
                                       config={"scale": 0.3}).passed


def test_varlen_fla_signature_forward_and_backward():
    """FLA's varlen convention: cu_seqlens (a LongTensor on the function's device) passed
    through by the adapter, B = 1, initial_state and the final state [N, H, K, V]; each
    sequence restarts from its own initial state. Autograd through the per-sequence
    recurrence gives the gradients, judged on the `varlen` suite."""
    def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                               use_qk_l2norm_in_kernel=False, cu_seqlens=None, **kwargs):
        assert cu_seqlens is not None and cu_seqlens.dtype == torch.int64 and not cu_seqlens.requires_grad
        cu = cu_seqlens.tolist()
        outs, finals = [], []
        for n in range(len(cu) - 1):
            s = slice(cu[n], cu[n + 1])
            h0 = None if initial_state is None else initial_state[n:n + 1]
            if cu[n + 1] == cu[n]:  # an empty sequence: no tokens, its final state is its initial one
                outs.append(v[:, s])
                finals.append(h0 if h0 is not None else v.new_zeros(1, q.shape[2], q.shape[3], v.shape[3]))
                continue
            o, ht = gdn(q[:, s], k[:, s], v[:, s], g[:, s], beta[:, s], h0=h0, scale=scale,
                        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
            outs.append(o)
            finals.append(ht)
        return torch.cat(outs, 1), torch.cat(finals, 0)

    result = ttrcheck.torch.validate(chunk_gated_delta_rule, suites=["varlen"], dtypes=["fp32"],
                                     cases=["chunk_edges", "empty_sequences"], form="sequential")
    assert result.passed, str(result)
    assert {("backward", "dh0"), ("backward", "dq")} <= {(r.direction, r.tensor) for r in result.rows}
    assert all(r.worst_sequence is not None for r in result.rows if r.verdict != "absent")
