// simple_gla, sequential form (Mamba-2 form, PDN §3.4; FLA naive_recurrent_simple_gla):
// S_t = e^{g_t} S_{t-1} + k_t v_tᵀ, o_t = S_tᵀ(scale·q_t), g [B,T,H].
#pragma once

#include "reference/family/gated_linear.hpp"

namespace ttr {

template <class T>
void simple_gla_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                           const Tensor<T>* h0, const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  gated_linear_forward<T>(Decay::scalar, q, k, v, &g, h0, scale, o, ht);
}

}  // namespace ttr
