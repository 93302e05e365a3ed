// linear_attn, backward (the sequential adjoint family/gated_linear_backward.hpp by default;
// the chunk and scan backward forms through `core`, family/gated_linear_backward_core.hpp;
// with d_t = 1): dq_t = scale·S_t do_t, dk_t = dS_t v_t, dv_t = dS_tᵀ k_t with
// dS_t = Σ_{s≥t} scale·q_s do_sᵀ + dht, and dh0 = dS_1.
#pragma once

#include "reference/family/gated_linear_backward_core.hpp"

namespace ttr {

template <class T, class Core = SequentialGatedLinearCore>
void linear_attn_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>* h0,
                          const T& scale, const Tensor<T>& do_, const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk,
                          Tensor<T>& dv, Tensor<T>& dh0, const Core& core = {}) {
  Tensor<T> dg;
  core(Decay::none, q, k, v, static_cast<const Tensor<T>*>(nullptr), h0, scale, do_, dht, dq, dk, dv, dg, dh0);
}

}  // namespace ttr
