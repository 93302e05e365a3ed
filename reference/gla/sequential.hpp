// gla, sequential form (PDN §3.4; FLA naive_recurrent_gla, whose gate is named gk):
// S_t = Diag(e^{g_t}) S_{t-1} + k_t v_tᵀ, o_t = S_tᵀ(scale·q_t), g [B,T,H,K]
// decaying the K rows of the K×V state.
#pragma once

#include "reference/family/gated_linear.hpp"

namespace ttr {

template <class T>
void gla_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                    const Tensor<T>* h0, const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  gated_linear_forward<T>(Decay::per_key, q, k, v, &g, h0, scale, o, ht);
}

}  // namespace ttr
