// linear_attn, sequential form: S_t = S_{t-1} + k_t v_tᵀ, o_t = S_tᵀ(scale·q_t)
// (PDN §2.1; FLA naive_recurrent_linear_attn with normalize=False).
#pragma once

#include "reference/family/gated_linear.hpp"

namespace ttr {

template <class T>
void linear_attn_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>* h0,
                            const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  gated_linear_forward<T>(Decay::none, q, k, v, nullptr, h0, scale, o, ht);
}

}  // namespace ttr
