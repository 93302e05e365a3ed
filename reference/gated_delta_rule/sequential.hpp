// gated_delta_rule (Gated DeltaNet), sequential form, decay first as FLA's
// naive_recurrent_gated_delta_rule: S̄ = e^{g_t} S_{t-1};
// S_t = S̄ + k_t (β_t (v_t − S̄ᵀ k_t))ᵀ; o_t = S_tᵀ(scale·q_t). GKA §6.4 eq. (19)
// reads the same update as a Kalman filter with Σ = I.
#pragma once

#include "reference/family/delta.hpp"

namespace ttr {

template <class T>
void gated_delta_rule_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                 const Tensor<T>& g, const Tensor<T>& beta, const Tensor<T>* h0,
                                 const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  delta_forward<T>(Decay::scalar, q, k, k, v, beta, &g, h0, scale, o, ht);
}

}  // namespace ttr
