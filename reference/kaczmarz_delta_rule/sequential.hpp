// kaczmarz_delta_rule (Kaczmarz linear attention), sequential form.
//
// KLA-Z eq. (3) (its LaTeX was lost in extraction; rebuilt from eqs. (1)-(2)):
// the write that makes the decayed state read v_t back along k_t is the
// projection S_t = S̄ + k_t (v_t − S̄ᵀk_t)ᵀ / ‖k_t‖² (eq. (2): minimum-Frobenius
// change subject to S_tᵀ k_t = v_t). Eq. (3) relaxes it with the learned gate η_t
// (our `beta`) and stabilises the key energy with eps:
//   β̃_t = η_t / (‖k_t‖² + eps),   S_t = S̄ + k_t (β̃_t (v_t − S̄ᵀ k_t))ᵀ.
// With η = 1 and eps = 0 this is the exact projection (KLA-Z Thm 1).
#pragma once

#include "reference/family/delta.hpp"

namespace ttr {

// β̃_t = η_t / (‖k_t‖² + eps) for every token of every head.
template <class T>
Tensor<T> kaczmarz_step(const Tensor<T>& k, const Tensor<T>& eta, const T& eps) {
  Tensor<T> out = eta;
  const int K = static_cast<int>(k.dim(3));
  for (std::int64_t r = 0; r < eta.numel(); ++r) {
    const T* kr = k.data.data() + r * K;
    out.data[r] = eta.data[r] / (dot(kr, kr, K) + eps);
  }
  return out;
}

template <class T>
void kaczmarz_delta_rule_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                    const Tensor<T>& g, const Tensor<T>& eta, const T& eps,
                                    const Tensor<T>* h0, const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  const Tensor<T> beta = kaczmarz_step(k, eta, eps);
  delta_forward<T>(Decay::scalar, q, k, k, v, beta, &g, h0, scale, o, ht);
}

}  // namespace ttr
