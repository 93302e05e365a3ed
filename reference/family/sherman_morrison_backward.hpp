// The exact backward pass (adjoint recurrence) of the Sherman–Morrison ridge
// recursion of sherman_morrison.hpp: pdn_exact (PDN eq. (5)) and kalman_filter
// (GKA eq. (KF), weights η). Generic over the scalar type.
//
// Forward step t, from Φ = Φ_{t-1} (Φ_0 = I/λ) and S = S_{t-1}:
//   p = Φ k_t,  c = 1/η_t + k_tᵀ p,  k̃ = p / c,  r = v_t − Sᵀ k_t,
//   S_t = S + k̃ rᵀ,  Φ_t = Φ − p k̃ᵀ,  o_t = S_tᵀ q̂_t  (q̂_t = scale·q_t).
// Φ is carried as the general matrix the code updates (symmetric only in exact
// arithmetic), so the adjoint below is the adjoint of the code's operations.
// With cotangents do_t, dht = ∂L/∂S_T (absent: 0), ∂L/∂Φ_T = 0, and dS, dΦ carried
// from the future, the adjoint step, t = T..1:
//   dq_t = scale · S_t do_t,   dS += q̂_t do_tᵀ                    (the read)
//   dk̃ = dS r,  dr = dSᵀ k̃                                        (S_t = S + k̃ rᵀ)
//   dv_t = dr,  dk_t = −S dr,  dS_{t-1} = dS − k_t drᵀ              (r = v − Sᵀk)
//   dp = −dΦ k̃,  dk̃ −= dΦᵀ p                                       (Φ_t = Φ − p k̃ᵀ)
//   dp += dk̃ / c,  dc = −⟨dk̃, k̃⟩ / c                              (k̃ = p / c)
//   dη_t = −dc / η_t²,  dk_t += dc p,  dp += dc k_t                 (c = 1/η + kᵀp)
//   dk_t += Φᵀ dp,  dΦ_{t-1} = dΦ + dp k_tᵀ                         (p = Φ k)
//   dh0 = dS_0.
// Stored vs recomputed (checkpointing, as the delta and gated linear cores' adjoints):
// a forward sweep with the forward's operations stores (Φ, S) before every C-th token
// (C = checkpoint_every, default ⌈√T⌉) and keeps the last segment's (Φ_{t-1}, S_{t-1});
// the adjoint takes the segments last to first, re-stepping each earlier one from its
// checkpoint, and recomputes p, c, k̃, r and S_t from the kept states. Memory
// (⌈T/C⌉ − 1 + C)·(K² + K·V) values per sequence instead of T·(K² + K·V); the same
// rounded operations on every value as keeping every state (C ≥ T), so the same
// gradients bit for bit (tests/backward/sherman_morrison_backward_bitwise_test.cpp).
#pragma once

#include <algorithm>
#include <vector>

#include "reference/family/checkpoint_spacing.hpp"
#include "reference/family/sherman_morrison.hpp"

namespace ttr {

// One (batch, head) sequence. deta: [T] view or nullptr (pdn_exact, η = 1).
// dS: ∂L/∂S_T on entry, ∂L/∂S_0 on exit.
template <class T>
void sherman_morrison_sequence_backward(SeqView<const T> q, SeqView<const T> k, SeqView<const T> v,
                                        const SeqView<const T>* eta, std::int64_t len, int K, int V, const T& lambda,
                                        const T& scale, const T* S0, SeqView<const T> do_, T* dS, SeqView<T> dq,
                                        SeqView<T> dk, SeqView<T> dv, const SeqView<T>* deta,
                                        std::int64_t checkpoint_every = 0) {
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0);
  const std::size_t KK = static_cast<std::size_t>(K) * K, KV = static_cast<std::size_t>(K) * V;
  auto at = [](int i, int j, int n) { return static_cast<std::size_t>(i) * n + j; };
  const std::int64_t C = checkpoint_spacing(len, checkpoint_every);
  const std::int64_t segments = (len + C - 1) / C;
  const std::int64_t last0 = (segments - 1) * C;  // first token of the last segment
  // (Φ, S) before the first token of every segment but the last; Φ_{t-1}, S_{t-1} of
  // the segment at hand.
  const std::size_t checkpointed = static_cast<std::size_t>(std::max<std::int64_t>(segments - 1, 0));
  std::vector<T> Pc(checkpointed * KK), Sc(checkpointed * KV);
  std::vector<T> Ps(static_cast<std::size_t>(C) * KK), Ss(static_cast<std::size_t>(C) * KV);
  std::vector<T> P(KK, zero), S(S0, S0 + KV), p(K), kt_(K), r(V), St(KV);
  for (int i = 0; i < K; ++i) P[at(i, i, K)] = one / lambda;
  auto step = [&](std::int64_t t) {  // p, c, k̃, r from P, S (the forward's operations)
    const T* kt = k.row(t);
    for (int i = 0; i < K; ++i) p[i] = dot(&P[at(i, 0, K)], kt, K);
    const T c = (eta ? one / eta->at(t) : one) + dot(kt, p.data(), K);
    for (int i = 0; i < K; ++i) kt_[i] = p[i] / c;
    for (int j = 0; j < V; ++j) {
      T u = zero;
      for (int i = 0; i < K; ++i) mul_add_to(u, kt[i], S[at(i, j, V)]);
      r[j] = v.row(t)[j] - u;
    }
    return c;
  };
  auto advance = [&](std::int64_t t) {  // (Φ, S) ← (Φ_t, S_t)
    step(t);
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < V; ++j) mul_add_to(S[at(i, j, V)], kt_[i], r[j]);
    for (int i = 0; i < K; ++i) {
      const T pi = -p[i];
      for (int j = 0; j < K; ++j) mul_add_to(P[at(i, j, K)], pi, kt_[j]);
    }
  };
  auto keep = [&](std::int64_t slot) {  // Φ_{t-1}, S_{t-1} into the segment's slot
    std::copy(P.begin(), P.end(), Ps.begin() + static_cast<std::ptrdiff_t>(slot * KK));
    std::copy(S.begin(), S.end(), Ss.begin() + static_cast<std::ptrdiff_t>(slot * KV));
  };
  for (std::int64_t t = 0; t < len; ++t) {
    if (t % C == 0 && t < last0) {
      std::copy(P.begin(), P.end(), Pc.begin() + static_cast<std::ptrdiff_t>(t / C * KK));
      std::copy(S.begin(), S.end(), Sc.begin() + static_cast<std::ptrdiff_t>(t / C * KV));
    }
    if (t >= last0) keep(t - last0);
    if (t + 1 < len) advance(t);
  }
  // Backward sweep, segment by segment.
  std::vector<T> dP(KK, zero), dkt_(K), dr(V), dp(K);
  for (std::int64_t seg = segments - 1; seg >= 0; --seg) {
    const std::int64_t t0 = seg * C, t1 = std::min(len, t0 + C);
    if (seg < segments - 1) {  // re-step the segment from its checkpoint
      std::copy(Pc.begin() + static_cast<std::ptrdiff_t>(seg * KK),
                Pc.begin() + static_cast<std::ptrdiff_t>((seg + 1) * KK), P.begin());
      std::copy(Sc.begin() + static_cast<std::ptrdiff_t>(seg * KV),
                Sc.begin() + static_cast<std::ptrdiff_t>((seg + 1) * KV), S.begin());
      for (std::int64_t t = t0; t < t1; ++t) {
        keep(t - t0);
        if (t + 1 < t1) advance(t);
      }
    }
    for (std::int64_t t = t1 - 1; t >= t0; --t) {
      const std::int64_t slot = t - t0;
      std::copy(Ps.begin() + static_cast<std::ptrdiff_t>(slot * KK),
                Ps.begin() + static_cast<std::ptrdiff_t>((slot + 1) * KK), P.begin());
      std::copy(Ss.begin() + static_cast<std::ptrdiff_t>(slot * KV),
                Ss.begin() + static_cast<std::ptrdiff_t>((slot + 1) * KV), S.begin());
      const T c = step(t);
      const T* kt = k.row(t);
      const T* dot_ = do_.row(t);
      for (std::size_t e = 0; e < KV; ++e) St[e] = S[e];
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < V; ++j) mul_add_to(St[at(i, j, V)], kt_[i], r[j]);
      // The read.
      for (int i = 0; i < K; ++i) {
        T acc = zero;
        for (int j = 0; j < V; ++j) mul_add_to(acc, St[at(i, j, V)], dot_[j]);
        dq.row(t)[i] = scale * acc;
        const T qh = scale * q.row(t)[i];
        for (int j = 0; j < V; ++j) mul_add_to(dS[at(i, j, V)], qh, dot_[j]);
      }
      // S_t = S + k̃ rᵀ.
      for (int j = 0; j < V; ++j) dr[j] = zero;
      for (int i = 0; i < K; ++i) {
        T acc = zero;
        for (int j = 0; j < V; ++j) {
          mul_add_to(acc, dS[at(i, j, V)], r[j]);
          mul_add_to(dr[j], kt_[i], dS[at(i, j, V)]);
        }
        dkt_[i] = acc;
      }
      // r = v − Sᵀ k.
      T* dkr = dk.row(t);
      for (int j = 0; j < V; ++j) dv.row(t)[j] = dr[j];
      for (int i = 0; i < K; ++i) {
        T acc = zero;
        for (int j = 0; j < V; ++j) {
          mul_add_to(acc, S[at(i, j, V)], dr[j]);
          mul_add_to(dS[at(i, j, V)], -kt[i], dr[j]);
        }
        dkr[i] = -acc;
      }
      // Φ_t = Φ − p k̃ᵀ.
      for (int i = 0; i < K; ++i) {
        T a = zero, b = zero;
        for (int j = 0; j < K; ++j) {
          mul_add_to(a, dP[at(i, j, K)], kt_[j]);  // (dΦ k̃)_i
          mul_add_to(b, dP[at(j, i, K)], p[j]);    // (dΦᵀ p)_i
        }
        dp[i] = -a;
        dkt_[i] -= b;
      }
      // k̃ = p / c, then c = 1/η + kᵀp.
      T dc = zero;
      for (int i = 0; i < K; ++i) {
        dp[i] += dkt_[i] / c;
        mul_add_to(dc, dkt_[i], kt_[i]);
      }
      dc = -dc / c;
      if (eta) {
        const T& e = eta->at(t);
        deta->at(t) = -dc / (e * e);
      }
      for (int i = 0; i < K; ++i) {
        mul_add_to(dkr[i], dc, p[i]);
        mul_add_to(dp[i], dc, kt[i]);
      }
      // p = Φ k.
      for (int i = 0; i < K; ++i) {
        T acc = zero;
        for (int j = 0; j < K; ++j) {
          mul_add_to(acc, P[at(j, i, K)], dp[j]);
          mul_add_to(dP[at(i, j, K)], dp[i], kt[j]);
        }
        dkr[i] += acc;
      }
    }
  }
}

// Whole-tensor driver, the backward of sherman_morrison_forward. deta is filled
// ([B,T,H]) when eta is given, else left empty.
template <class T>
void sherman_morrison_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>* eta,
                               const Tensor<T>* h0, const T& lambda, const T& scale, const Tensor<T>& do_,
                               const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& deta,
                               Tensor<T>& dh0, std::int64_t checkpoint_every = 0) {
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  const T zero = from_double<T>(0.0);
  dq = Tensor<T>(q.shape, zero);
  dk = Tensor<T>(k.shape, zero);
  dv = Tensor<T>(v.shape, zero);
  deta = eta ? Tensor<T>(eta->shape, zero) : Tensor<T>();
  dh0 = dht ? *dht : Tensor<T>({B, H, K, V}, zero);
  const std::vector<T> zeros(static_cast<std::size_t>(K) * V, zero);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const SeqView<const T> e = eta ? seq(*eta, b, h) : SeqView<const T>{nullptr, 0, 0};
      const SeqView<T> de = eta ? seq(deta, b, h) : SeqView<T>{nullptr, 0, 0};
      sherman_morrison_sequence_backward<T>(seq(q, b, h), seq(k, b, h), seq(v, b, h), eta ? &e : nullptr, len, K, V,
                                            lambda, scale, h0 ? state_block(*h0, b, h) : zeros.data(), seq(do_, b, h),
                                            state_block(dh0, b, h), seq(dq, b, h), seq(dk, b, h), seq(dv, b, h),
                                            eta ? &de : nullptr, checkpoint_every);
    }
}

}  // namespace ttr
