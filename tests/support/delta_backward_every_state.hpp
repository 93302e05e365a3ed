// The delta core's adjoint as it was written before its sweeps were fused with the
// checkpoint re-stepping (reference/family/delta_backward.hpp): every state S_{t-1}
// kept, taken by stepping the forward's own delta_sequence (readout included) one
// token at a time, and the adjoint recomputing S̄_t, u_t, δ_t and S_t per token in
// three sweeps over the state. A second formulation for delta_backward_bitwise_test:
// both perform the same rounded operations on every value, in different passes and
// storage, so their gradients must be bit for bit equal.
#pragma once

#include <algorithm>
#include <vector>

#include "reference/family/delta_backward.hpp"

namespace ttr::test {

// One (batch, head) sequence, every state kept (the code before, with C = T). S0: the initial K×V state. dS: on entry ∂L/∂S_T
// (zeros when dht is absent), on exit ∂L/∂S_0.
template <class T>
void delta_sequence_backward_every_state(const DeltaSequence<T>& s, std::int64_t len, int K, int V, const T& scale, const T* S0,
                                         SeqView<const T> do_, T* dS, const DeltaGradSequence<T>& gr) {
  const T zero = from_double<T>(0.0);
  const std::size_t KV = static_cast<std::size_t>(K) * V;
  const std::int64_t C = std::max<std::int64_t>(len, 1);  // one segment: every state kept
  const std::int64_t segments = (len + C - 1) / C;
  // One token of the forward itself: S ← S_t from S_{t-1}.
  std::vector<T> o_scratch(V);
  auto step = [&](std::int64_t t, T* S) {
    const auto at = [t](const SeqView<const T>& x) { return SeqView<const T>{x.base ? x.row(t) : nullptr, x.stride, x.features}; };
    const DeltaSequence<T> one{at(s.q), at(s.k), at(s.v), at(s.w), at(s.beta), at(s.g), s.decay};
    delta_sequence(one, 1, K, V, scale, S, SeqView<T>{o_scratch.data(), 0, V});
  };
  // Forward sweep: the checkpoints S_{t-1} for t = 0, C, 2C, ...
  std::vector<T> checkpoints(static_cast<std::size_t>(segments) * KV), S(S0, S0 + KV);
  for (std::int64_t t = 0; t < len; ++t) {
    if (t % C == 0) std::copy(S.begin(), S.end(), checkpoints.begin() + static_cast<std::ptrdiff_t>(t / C * KV));
    step(t, S.data());
  }
  // Backward sweep, segment by segment.
  std::vector<T> states(static_cast<std::size_t>(C) * KV);
  std::vector<T> d(K, from_double<T>(1.0)), Sbar(KV), u(V), delta(V), r(V), ddelta(V), du(V);
  T st = zero, acc = zero, acc2 = zero;
  for (std::int64_t seg = segments - 1; seg >= 0; --seg) {
    const std::int64_t t0 = seg * C, t1 = std::min(len, t0 + C);
    std::copy(checkpoints.begin() + static_cast<std::ptrdiff_t>(seg * KV),
              checkpoints.begin() + static_cast<std::ptrdiff_t>((seg + 1) * KV), S.begin());
    for (std::int64_t t = t0; t < t1; ++t) {
      std::copy(S.begin(), S.end(), states.begin() + static_cast<std::ptrdiff_t>((t - t0) * KV));
      if (t + 1 < t1) step(t, S.data());
    }
    for (std::int64_t t = t1 - 1; t >= t0; --t) {
      decay_factors(s.decay, s.g, t, K, d);
      const T* Sp = states.data() + (t - t0) * KV;
      const T* qt = s.q.row(t);
      const T* kt = s.k.row(t);
      const T* wt = s.w.row(t);
      const T* vt = s.v.row(t);
      const T* dot_ = do_.row(t);
      const T& b = s.beta.at(t);
      // Sweep 1: S̄_t = D S_{t-1} and u_t = S̄_tᵀ k_t (as the forward), δ_t.
      for (int j = 0; j < V; ++j) u[j] = zero;
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < V; ++j) {
          const std::size_t e = static_cast<std::size_t>(i) * V + j;
          Sbar[e] = Sp[e];
          if (s.decay != Decay::none) Sbar[e] *= d[i];
          mul_add_to(u[j], kt[i], Sbar[e]);
        }
      for (int j = 0; j < V; ++j) {
        r[j] = vt[j] - u[j];
        delta[j] = b * r[j];
        ddelta[j] = zero;
      }
      // Sweep 2, per element: S_t = S̄_t + w δᵀ (as the forward writes it); the read
      // dq_t = scale·S_t do_t, dS += q̂ doᵀ; the write dw = dS δ, dδ = dSᵀ w.
      for (int i = 0; i < K; ++i) {
        const T qh = scale * qt[i];
        acc = zero;
        acc2 = zero;
        for (int j = 0; j < V; ++j) {
          const std::size_t e = static_cast<std::size_t>(i) * V + j;
          st = Sbar[e];
          mul_add_to(st, wt[i], delta[j]);
          mul_add_to(acc, st, dot_[j]);
          T& g = dS[e];
          mul_add_to(g, qh, dot_[j]);
          mul_add_to(acc2, g, delta[j]);
          mul_add_to(ddelta[j], wt[i], g);
        }
        gr.dq.row(t)[i] = scale * acc;
        gr.dw.row(t)[i] = acc2;
      }
      // δ = β (v − u).
      T db = zero;
      for (int j = 0; j < V; ++j) {
        mul_add_to(db, ddelta[j], r[j]);
        gr.dv.row(t)[j] = b * ddelta[j];
        du[j] = -(b * ddelta[j]);
      }
      gr.dbeta.at(t) = db;
      // Sweep 3, per element: the read-back u = S̄ᵀ k (dS̄ = dS + k duᵀ, dk = S̄ du),
      // then the decay S̄ = D S_{t-1} (dg = Σ dS̄ ∘ S̄ per key row, dS ← D dS̄).
      T dg_scalar = zero;
      for (int i = 0; i < K; ++i) {
        acc = zero;
        acc2 = zero;
        for (int j = 0; j < V; ++j) {
          const std::size_t e = static_cast<std::size_t>(i) * V + j;
          mul_add_to(acc, Sbar[e], du[j]);
          mul_add_to(dS[e], kt[i], du[j]);
          if (s.decay != Decay::none) {
            mul_add_to(acc2, dS[e], Sbar[e]);
            scale_by(dS[e], d[i]);
          }
        }
        gr.dk.row(t)[i] = acc;
        if (s.decay == Decay::per_key) gr.dg.row(t)[i] = acc2;
        else if (s.decay == Decay::scalar) dg_scalar += acc2;
      }
      if (s.decay == Decay::scalar) gr.dg.at(t) = dg_scalar;
    }
  }
}

template <class T>
void delta_backward_every_state(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& w, const Tensor<T>& v,
                    const Tensor<T>& beta, const Tensor<T>* g, const Tensor<T>* h0, const T& scale,
                    const Tensor<T>& do_, const Tensor<T>* dht, DeltaGrads<T>& out) {
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  const T zero = from_double<T>(0.0);
  out.dq = Tensor<T>(q.shape, zero);
  out.dk = Tensor<T>(k.shape, zero);
  out.dw = Tensor<T>(w.shape, zero);
  out.dv = Tensor<T>(v.shape, zero);
  out.dbeta = Tensor<T>(beta.shape, zero);
  out.dg = g ? Tensor<T>(g->shape, zero) : Tensor<T>();
  out.dh0 = dht ? *dht : Tensor<T>({B, H, K, V}, zero);
  const std::vector<T> zeros(static_cast<std::size_t>(K) * V, zero);
  const SeqView<T> no_dg{nullptr, 0, 0};
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const DeltaSequence<T> s{seq(q, b, h), seq(k, b, h), seq(v, b, h), seq(w, b, h), seq(beta, b, h),
                               g ? seq(*g, b, h) : SeqView<const T>{nullptr, 0, 0}, kind};
      const DeltaGradSequence<T> gr{seq(out.dq, b, h), seq(out.dk, b, h), seq(out.dw, b, h), seq(out.dv, b, h),
                                    seq(out.dbeta, b, h), g ? seq(out.dg, b, h) : no_dg};
      delta_sequence_backward_every_state(s, len, K, V, scale, h0 ? state_block(*h0, b, h) : zeros.data(),
                                          seq(do_, b, h), state_block(out.dh0, b, h), gr);
    }
}

}  // namespace ttr::test
