// The delta rule with decay: the shared sequential core of delta_rule,
// gated_delta_rule, kda, kaczmarz_delta_rule and the preconditioned layers.
//
//   S̄_t = Diag(d_t) S_{t-1}                      (decay first, as FLA's naive refs)
//   δ_t = β_t (v_t − S̄_tᵀ k_t)                   (residual read with the key k_t)
//   S_t = S̄_t + w_t δ_tᵀ                          (written along w_t)
//   o_t = S_tᵀ (scale · q_t)
//
// d_t: 1 (DeltaNet, PDN eq. (4)), e^{g_t} (GDN), e^{g_t} per key row (KDA).
// β_t: the write strength; kaczmarz_delta_rule substitutes β_t/(‖k_t‖²+eps)
// (KLA-Z eq. (3)) before calling. w_t = k_t except for the preconditioned layers,
// whose write key is k̃_t = B_t ⊙ k_t (PDN eq. (9), FLA precond_gated_delta_rule).
#pragma once

#include <vector>

#include "reference/family/gated_linear.hpp"

namespace ttr {

template <class T>
struct DeltaSequence {
  SeqView<const T> q, k, v;
  SeqView<const T> w;     // write key (the same view as k when not preconditioned)
  SeqView<const T> beta;  // effective step β_t, [T]
  SeqView<const T> g;     // log decay, [T] or [T, K]; ignored for Decay::none
  Decay decay;
};

template <class T>
void delta_sequence(const DeltaSequence<T>& s, std::int64_t len, int K, int V, const T& scale, T* S,
                    SeqView<T> o) {
  std::vector<T> d(K, from_double<T>(1.0)), qs(K), u(V), delta(V);
  const T zero = from_double<T>(0.0);
  for (std::int64_t t = 0; t < len; ++t) {
    decay_factors(s.decay, s.g, t, K, d);
    const T* kt = s.k.row(t);
    const T* wt = s.w.row(t);
    const T* vt = s.v.row(t);
    // Pass 1: S̄ = Diag(d) S and u = S̄ᵀ k (u_j = Σ_i k_i S̄_ij, i ascending).
    for (int j = 0; j < V; ++j) u[j] = zero;
    for (int i = 0; i < K; ++i) {
      T* Si = S + static_cast<std::ptrdiff_t>(i) * V;
      for (int j = 0; j < V; ++j) {
        if (s.decay != Decay::none) scale_by(Si[j], d[i]);
        mul_add_to(u[j], kt[i], Si[j]);
      }
    }
    const T& b = s.beta.at(t);
    for (int j = 0; j < V; ++j) delta[j] = b * (vt[j] - u[j]);
    // Pass 2: S = S̄ + w δᵀ and o = Sᵀ q̂ in the same sweep over the state.
    write_and_read(S, wt, delta.data(), s.q.row(t), scale, K, V, qs, o.row(t));
  }
}

// Whole-tensor driver. q, k, w [B,T,H,K]; v [B,T,H,V]; beta [B,T,H]; g [B,T,H] or
// [B,T,H,K] (nullptr for Decay::none); h0 optional [B,H,K,V].
template <class T>
void delta_forward(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& w,
                   const Tensor<T>& v, const Tensor<T>& beta, const Tensor<T>* g, const Tensor<T>* h0,
                   const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  o = Tensor<T>({B, len, H, V}, from_double<T>(0.0));
  ht = h0 ? *h0 : Tensor<T>({B, H, K, V}, from_double<T>(0.0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      DeltaSequence<T> s{seq(q, b, h), seq(k, b, h), seq(v, b, h), seq(w, b, h), seq(beta, b, h),
                         g ? seq(*g, b, h) : SeqView<const T>{nullptr, 0, 0}, kind};
      delta_sequence(s, len, K, V, scale, state_block(ht, b, h), seq(o, b, h));
    }
}

}  // namespace ttr
