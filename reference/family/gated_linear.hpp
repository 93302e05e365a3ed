// Linear attention with an optional decay: the shared sequential core of
// linear_attn, simple_gla and gla (PDN §2.1, §3.4; FLA naive_recurrent_*).
//
//   S_t = Diag(d_t) S_{t-1} + k_t v_tᵀ,    o_t = S_tᵀ (scale · q_t)
//
// with d_t = 1 (linear_attn), d_t = e^{g_t} 1 (simple_gla, g [B,T,H]) or
// d_t = e^{g_t} (gla, g [B,T,H,K], decaying the K rows of the K×V state, as FLA).
#pragma once

#include <cmath>
#include <vector>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

enum class Decay { none, scalar, per_key };

// Fills d[0..K) with the decay factors of token t (nothing for Decay::none).
template <class T>
void decay_factors(Decay kind, const SeqView<const T>& g, std::int64_t t, int K, std::vector<T>& d) {
  using std::exp;
  if (kind == Decay::scalar) {
    const T a = exp(g.at(t));
    for (int i = 0; i < K; ++i) d[i] = a;
  } else if (kind == Decay::per_key) {
    for (int i = 0; i < K; ++i) d[i] = exp(g.row(t)[i]);
  }
}

// The write-then-read step shared by the delta family and Sherman–Morrison:
// S += w δᵀ and o = Sᵀ (scale·q), in one sweep over the K×V state
// (o_j = Σ_i q̂_i S_ij with i ascending). qs is K scratch values.
template <class T>
void write_and_read(T* S, const T* w, const T* delta, const T* q, const T& scale, int K, int V, std::vector<T>& qs,
                    T* o) {
  for (int i = 0; i < K; ++i) qs[i] = scale * q[i];
  for (int j = 0; j < V; ++j) o[j] = from_double<T>(0.0);
  for (int i = 0; i < K; ++i) {
    T* Si = S + static_cast<std::ptrdiff_t>(i) * V;
    for (int j = 0; j < V; ++j) {
      mul_add_to(Si[j], w[i], delta[j]);
      mul_add_to(o[j], qs[i], Si[j]);
    }
  }
}

// Runs one (batch, head) sequence. S is the K×V state (row-major), updated in place.
template <class T>
void gated_linear_sequence(Decay kind, SeqView<const T> q, SeqView<const T> k, SeqView<const T> v,
                           SeqView<const T> g, std::int64_t len, int K, int V, const T& scale, T* S,
                           SeqView<T> o) {
  std::vector<T> d(K, from_double<T>(1.0)), qs(K);
  for (std::int64_t t = 0; t < len; ++t) {
    decay_factors(kind, g, t, K, d);
    const T* kt = k.row(t);
    const T* vt = v.row(t);
    for (int i = 0; i < K; ++i) qs[i] = scale * q.row(t)[i];
    T* ot = o.row(t);
    for (int j = 0; j < V; ++j) ot[j] = from_double<T>(0.0);
    for (int i = 0; i < K; ++i) {
      T* Si = S + static_cast<std::ptrdiff_t>(i) * V;
      for (int j = 0; j < V; ++j) {
        if (kind != Decay::none) scale_by(Si[j], d[i]);
        mul_add_to(Si[j], kt[i], vt[j]);
        mul_add_to(ot[j], qs[i], Si[j]);  // o_j = Σ_i q̂_i S_ij, i ascending
      }
    }
  }
}

// Whole-tensor driver: q, k [B,T,H,K], v [B,T,H,V], g per `kind`, h0 optional [B,H,K,V].
template <class T>
void gated_linear_forward(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                          const Tensor<T>* g, const Tensor<T>* h0, const T& scale, Tensor<T>& o,
                          Tensor<T>& ht) {
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  o = Tensor<T>({B, len, H, V}, from_double<T>(0.0));
  ht = h0 ? *h0 : Tensor<T>({B, H, K, V}, from_double<T>(0.0));
  const Tensor<T> none;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      gated_linear_sequence<T>(kind, seq(q, b, h), seq(k, b, h), seq(v, b, h),
                               g ? seq(*g, b, h) : SeqView<const T>{nullptr, 0, 0}, len, K, V, scale,
                               state_block(ht, b, h), seq(o, b, h));
}

}  // namespace ttr
