// delta_rule (DeltaNet), sequential form, PDN eq. (4) in FLA's K×V convention:
// S_t = S_{t-1} + k_t (β_t (v_t − S_{t-1}ᵀ k_t))ᵀ, o_t = S_tᵀ(scale·q_t).
#pragma once

#include "reference/family/delta.hpp"

namespace ttr {

template <class T>
void delta_rule_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& beta,
                           const Tensor<T>* h0, const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  delta_forward<T>(Decay::none, q, k, k, v, beta, nullptr, h0, scale, o, ht);
}

}  // namespace ttr
