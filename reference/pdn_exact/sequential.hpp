// pdn_exact: DeltaNet preconditioned by the exact inverse key Gram, PDN eq. (5).
//
//   P_0 = I/λ,   k̃_t = P_{t-1} k_t / (1 + k_tᵀ P_{t-1} k_t)
//   S_t = S_{t-1} + k̃_t (v_t − S_{t-1}ᵀ k_t)ᵀ,       o_t = S_tᵀ (scale·q_t)
//   P_t = P_{t-1} − P_{t-1} k_t k_tᵀ P_{t-1} / (1 + k_tᵀ P_{t-1} k_t)   (Sherman–Morrison)
//
// so P_t = (Σ_{s≤t} k_s k_sᵀ + λI)⁻¹ and, from S_0 = 0, S_t = P_t Σ k_s v_sᵀ:
// ridge regression (PDN Thm 3.1, in FLA's K×V orientation; the paper writes
// S_t = C_t P_t with the V×K state). The weighted form is kalman_filter's.
#pragma once

#include "reference/family/sherman_morrison.hpp"

namespace ttr {

template <class T>
void pdn_exact_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>* h0,
                          const T& lambda, const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  sherman_morrison_forward<T>(q, k, v, nullptr, h0, lambda, scale, o, ht);
}

}  // namespace ttr
