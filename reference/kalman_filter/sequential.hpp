// kalman_filter: the exact Kalman-filter form of weighted ridge regression,
// GKA eq. (KF) and §6: with Φ_{t-1} the inverse Hessian of eq. (3),
//   S_t = S_{t-1} + Φ_{t-1}k_t (v_t − S_{t-1}ᵀ k_t)ᵀ / (1/η_t + k_tᵀ Φ_{t-1} k_t),
//   Φ_t by Woodbury (a rank-one Sherman–Morrison update), Φ_0 = I/λ.
// GKA writes S as V×K (S k ≈ v); we keep FLA's K×V (Sᵀ k ≈ v).
#pragma once

#include "reference/family/sherman_morrison.hpp"

namespace ttr {

template <class T>
void kalman_filter_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>* eta,
                              const Tensor<T>* h0, const T& lambda, const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  sherman_morrison_forward<T>(q, k, v, eta, h0, lambda, scale, o, ht);
}

}  // namespace ttr
