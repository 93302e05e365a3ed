// Weighted online ridge regression by Sherman–Morrison: the shared core of
// pdn_exact (PDN eq. (5), weights 1) and kalman_filter (GKA eq. (KF), weights η).
//
//   Φ_0 = I/λ;  p = Φ_{t-1} k_t;  d = 1/η_t + k_tᵀ p
//   S_t = S_{t-1} + (p/d) (v_t − S_{t-1}ᵀ k_t)ᵀ;   Φ_t = Φ_{t-1} − p pᵀ/d
//   o_t = S_tᵀ (scale·q_t)
//
// Φ_t = (Σ_{s≤t} η_s k_s k_sᵀ + λI)⁻¹ (Woodbury with a rank-one update), and from
// S_0 = 0, S_t = Φ_t Σ η_s k_s v_sᵀ: the minimiser of GKA eq. (3) (PDN Thm 3.1 for η = 1).
#pragma once

#include <vector>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"
#include "reference/family/gated_linear.hpp"  // write_and_read

namespace ttr {

template <class T>
void sherman_morrison_sequence(SeqView<const T> q, SeqView<const T> k, SeqView<const T> v, const SeqView<const T>* eta,
                               std::int64_t len, int K, int V, const T& lambda, const T& scale, T* S, SeqView<T> o) {
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0);
  std::vector<T> P(static_cast<std::size_t>(K) * K, zero), p(K), kt_(K), r(V), qs(K);
  for (int i = 0; i < K; ++i) P[static_cast<std::size_t>(i) * K + i] = one / lambda;
  for (std::int64_t t = 0; t < len; ++t) {
    const T* kt = k.row(t);
    for (int i = 0; i < K; ++i) p[i] = dot(&P[static_cast<std::size_t>(i) * K], kt, K);  // p = P k
    // 1/η_t + kᵀΦk (η = 1: PDN eq. (5))
    const T denom = (eta ? one / eta->at(t) : one) + dot(kt, p.data(), K);
    for (int i = 0; i < K; ++i) kt_[i] = p[i] / denom;  // k̃
    // r = v − Sᵀk
    for (int j = 0; j < V; ++j) r[j] = v.row(t)[j];
    for (int j = 0; j < V; ++j) {
      T u = zero;
      for (int i = 0; i < K; ++i) mul_add_to(u, kt[i], S[static_cast<std::ptrdiff_t>(i) * V + j]);
      r[j] -= u;
    }
    write_and_read(S, kt_.data(), r.data(), q.row(t), scale, K, V, qs, o.row(t));
    // Φ −= p k̃ᵀ  (= p pᵀ / d)
    for (int i = 0; i < K; ++i) {
      const T pi = -p[i];
      for (int j = 0; j < K; ++j) mul_add_to(P[static_cast<std::size_t>(i) * K + j], pi, kt_[j]);
    }
  }
}

// Whole-tensor driver; eta optional [B,T,H].
template <class T>
void sherman_morrison_forward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>* eta,
                              const Tensor<T>* h0, const T& lambda, const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  o = Tensor<T>({B, len, H, V}, from_double<T>(0.0));
  ht = h0 ? *h0 : Tensor<T>({B, H, K, V}, from_double<T>(0.0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const SeqView<const T> e = eta ? seq(*eta, b, h) : SeqView<const T>{nullptr, 0, 0};
      sherman_morrison_sequence<T>(seq(q, b, h), seq(k, b, h), seq(v, b, h), eta ? &e : nullptr, len, K, V, lambda,
                                   scale, state_block(ht, b, h), seq(o, b, h));
    }
}

}  // namespace ttr
