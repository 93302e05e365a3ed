// Scan backward of linear attention with decay (linear_attn, simple_gla, gla):
// reverse mode of the associative scan of gated_linear_scan.hpp. The forward's
// prefix compositions give every state S_t = Diag(D_{1:t}) S_0 + B_{1:t}; the
// state adjoint G_t = ∂L/∂S_t (through o_t and every later state) obeys
//
//   G_T = dht + q̂_T do_Tᵀ,   G_t = Diag(d_{t+1}) G_{t+1} + q̂_t do_tᵀ,   q̂_t = scale·q_t,
//
// the same affine recurrence run backwards in time, so it is the same prefix scan
// (compose_affine, the same ScanPlan) over the reversed sequence of pairs
// (d_{t+1}, q̂_t do_tᵀ) — with d_{T+1} = 1 — applied to dht:
//
//   G_t = Diag(D'_{t:T}) dht + B'_{t:T}.
//
// Then, token by token (the adjoint of S_t = Diag(d_t) S_{t−1} + k_t v_tᵀ, o_t = S_tᵀ q̂_t):
//   dq_t = scale·S_t do_t,   dk_t = G_t v_t,   dv_t = G_tᵀ k_t,
//   dg_t = Σ_ij G_t,ij d_t,i S_{t−1},ij  (gla: Σ_j per key i),   dh0 = Diag(d_1) G_1.
// In exact arithmetic this equals the sequential adjoint (gated_linear_backward.hpp):
// both scans only re-bracket compositions.
//
// Arithmetic policy P, as the forward scan: narrowed are the inputs q, k, v and the
// cotangents do and dht (16-bit inputs, as in the chunk backward forms), the
// additive part of every composition either scan writes to memory (StoreAffine),
// and the gradients dq, dk, dv as written. In acc (fp32): gates, their products
// D and D', h0, the leaves q̂_t do_tᵀ (exact products of narrowed operands; q̂_t
// in fp32), the states and adjoints formed from the prefixes, the reductions of
// dq, dk, dv, dg, and dg and dh0 as written.
#pragma once

#include <algorithm>
#include <vector>

#include "reference/family/gated_linear_scan.hpp"

namespace ttr {

template <class P>
struct GatedLinearScanBackwardWork {
  using A = typename P::acc;
  GatedLinearScanWork<P> fwd, bwd;  // the forward prefixes; the adjoint's (reversed) prefixes
  std::vector<A> o, d, S, Sprev, G, dht, qs;
};

// One (batch, head) sequence (w sized by the driver). S0: the initial state (zeros
// when h0 is absent). dS: on entry ∂L/∂S_T (zeros when dht is absent), on exit ∂L/∂S_0.
template <class P>
void gated_linear_scan_sequence_backward(Decay kind, SeqView<const typename P::acc> q,
                                         SeqView<const typename P::acc> k, SeqView<const typename P::acc> v,
                                         SeqView<const typename P::acc> g, std::int64_t len, int K, int V,
                                         const typename P::acc& scale, bool has_h0, const typename P::acc* S0,
                                         SeqView<const typename P::acc> do_, typename P::acc* dS,
                                         SeqView<typename P::acc> dq, SeqView<typename P::acc> dk,
                                         SeqView<typename P::acc> dv, SeqView<typename P::acc> dg,
                                         const ScanPlan& plan, GatedLinearScanBackwardWork<P>& w) {
  using A = typename P::acc;
  const A one = from_double<A>(1.0), zero = from_double<A>(0.0);
  const std::size_t KV = static_cast<std::size_t>(K) * V;
  // The forward scan, by the forward's own code, run for its prefixes (its outputs
  // o and S_T are not needed): w.fwd.steps[t] = (D_{1:t}, B_{1:t}).
  std::vector<A> S_T(S0, S0 + KV);
  w.o.assign(static_cast<std::size_t>(len) * V, zero);
  gated_linear_scan_sequence<P>(kind, q, k, v, g, len, K, V, scale, has_h0, S_T.data(),
                                SeqView<A>{w.o.data(), V, V}, plan, w.fwd);

  // The adjoint's pairs in reversed order: element i is token t = len − 1 − i,
  // (d_{t+1}, q̂_t do_tᵀ), with the factor 1 for the last token.
  const std::span<DiagonalAffine<A>> rev(w.bwd.steps.data(), static_cast<std::size_t>(len));
  for (std::int64_t i = 0; i < len; ++i) {
    const std::int64_t t = len - 1 - i;
    DiagonalAffine<A>& e = rev[i];
    std::fill(w.d.begin(), w.d.end(), one);
    if (i > 0) decay_factors(kind, g, t + 1, K, w.d);
    for (int r = 0; r < K; ++r) {
      w.qs[r] = scale;
      scale_by(w.qs[r], q.row(t)[r]);
      e.A[r] = w.d[r];
      for (int j = 0; j < V; ++j) {
        A& b = e.B[static_cast<std::size_t>(r) * V + j];
        b = w.qs[r];
        scale_by(b, P::narrow(do_.row(t)[j]));
      }
    }
  }
  prefix_scan(rev, plan, w.bwd.identity, compose_affine<A>, StoreAffine<P>{}, w.bwd.scan);

  for (std::size_t e = 0; e < KV; ++e) w.dht[e] = P::narrow(dS[e]);  // dht: a 16-bit input
  // S_t (or S_0 for t = −1) and G_t from the prefixes.
  const auto state = [&](std::int64_t t, std::vector<A>& out) {
    if (t < 0) {
      std::copy(S0, S0 + KV, out.begin());
      return;
    }
    const DiagonalAffine<A>& e = w.fwd.steps[static_cast<std::size_t>(t)];
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j) {
        const std::size_t ij = static_cast<std::size_t>(i) * V + j;
        out[ij] = e.B[ij];
        if (has_h0) mul_add_to(out[ij], e.A[i], S0[ij]);
      }
  };
  const auto adjoint = [&](std::int64_t t, std::vector<A>& out) {
    const DiagonalAffine<A>& e = rev[static_cast<std::size_t>(len - 1 - t)];
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j) {
        const std::size_t ij = static_cast<std::size_t>(i) * V + j;
        out[ij] = e.B[ij];
        mul_add_to(out[ij], e.A[i], w.dht[ij]);
      }
  };
  const bool decays = kind != Decay::none;
  for (std::int64_t t = 0; t < len; ++t) {
    state(t, w.S);
    adjoint(t, w.G);
    const A* dot_ = do_.row(t);
    for (int i = 0; i < K; ++i) {
      A acc = zero;
      for (int j = 0; j < V; ++j) mul_add_to(acc, w.S[static_cast<std::size_t>(i) * V + j], P::narrow(dot_[j]));
      dq.row(t)[i] = P::narrow(scale * acc);
    }
    for (int i = 0; i < K; ++i) {
      A acc = zero;
      for (int j = 0; j < V; ++j) mul_add_to(acc, w.G[static_cast<std::size_t>(i) * V + j], v.row(t)[j]);
      dk.row(t)[i] = P::narrow(acc);
    }
    for (int j = 0; j < V; ++j) {
      A acc = zero;
      for (int i = 0; i < K; ++i) mul_add_to(acc, k.row(t)[i], w.G[static_cast<std::size_t>(i) * V + j]);
      dv.row(t)[j] = P::narrow(acc);
    }
    if (!decays) continue;
    state(t - 1, w.Sprev);
    decay_factors(kind, g, t, K, w.d);
    A total = zero;
    for (int i = 0; i < K; ++i) {
      A acc = zero;
      for (int j = 0; j < V; ++j) {
        const std::size_t ij = static_cast<std::size_t>(i) * V + j;
        mul_add_to(acc, w.G[ij], w.Sprev[ij]);
      }
      acc *= w.d[i];
      if (kind == Decay::per_key) dg.row(t)[i] = acc;
      else total += acc;
    }
    if (kind == Decay::scalar) dg.at(t) = total;
  }
  // dh0 = Diag(d_1) G_1 (G_0 = dht when the sequence is empty).
  if (len == 0) {
    std::copy(w.dht.begin(), w.dht.end(), dS);
    return;
  }
  adjoint(0, w.G);
  std::fill(w.d.begin(), w.d.end(), one);
  decay_factors(kind, g, 0, K, w.d);
  for (int i = 0; i < K; ++i)
    for (int j = 0; j < V; ++j) {
      const std::size_t ij = static_cast<std::size_t>(i) * V + j;
      dS[ij] = w.G[ij];
      if (decays) scale_by(dS[ij], w.d[i]);
    }
}

// Whole-tensor driver, the scan counterpart of gated_linear_backward (same
// arguments plus the scan plan). Reads q, k, v and do as a kernel under P does.
template <class P>
void gated_linear_scan_backward(Decay kind, const Tensor<typename P::acc>& q_in, const Tensor<typename P::acc>& k_in,
                                const Tensor<typename P::acc>& v_in, const Tensor<typename P::acc>* g,
                                const Tensor<typename P::acc>* h0, const typename P::acc& scale,
                                const Tensor<typename P::acc>& do_, const Tensor<typename P::acc>* dht,
                                Tensor<typename P::acc>& dq, Tensor<typename P::acc>& dk,
                                Tensor<typename P::acc>& dv, Tensor<typename P::acc>& dg,
                                Tensor<typename P::acc>& dh0, const ScanPlan& plan = ScanPlan::whole_sequence()) {
  using A = typename P::acc;
  Tensor<A> qn, kn, vn;
  const Tensor<A>& q = policy_operand<P>(q_in, qn);
  const Tensor<A>& k = policy_operand<P>(k_in, kn);
  const Tensor<A>& v = policy_operand<P>(v_in, vn);
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  const A zero = from_double<A>(0.0);
  dq = Tensor<A>(q.shape, zero);
  dk = Tensor<A>(k.shape, zero);
  dv = Tensor<A>(v.shape, zero);
  dg = g ? Tensor<A>(g->shape, zero) : Tensor<A>();
  dh0 = dht ? *dht : Tensor<A>({B, H, K, V}, zero);
  const std::vector<A> zeros(static_cast<std::size_t>(K) * V, zero);
  GatedLinearScanBackwardWork<P> w;
  w.fwd.reserve(len, K, V);
  w.bwd.reserve(len, K, V);
  for (auto* x : {&w.d, &w.qs}) x->assign(K, zero);
  for (auto* x : {&w.S, &w.Sprev, &w.G, &w.dht}) x->assign(static_cast<std::size_t>(K) * V, zero);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      gated_linear_scan_sequence_backward<P>(kind, seq(q, b, h), seq(k, b, h), seq(v, b, h),
                                             g ? seq(*g, b, h) : SeqView<const A>{nullptr, 0, 0}, len, K, V, scale,
                                             h0 != nullptr, h0 ? state_block(*h0, b, h) : zeros.data(),
                                             seq(do_, b, h), state_block(dh0, b, h), seq(dq, b, h), seq(dk, b, h),
                                             seq(dv, b, h), g ? seq(dg, b, h) : SeqView<A>{nullptr, 0, 0}, plan, w);
}

}  // namespace ttr
