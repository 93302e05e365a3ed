// gla, backward (the sequential adjoint family/gated_linear_backward.hpp by default;
// the chunk and scan backward forms through `core`, family/gated_linear_backward_core.hpp; with
// per-key d_t = e^{g_t}, g [B,T,H,K] decaying the K rows):
// dg_{t,i} = Σ_j dS_t,ij e^{g_{t,i}} S_{t-1,ij}.
#pragma once

#include "reference/family/gated_linear_backward_core.hpp"

namespace ttr {

template <class T, class Core = SequentialGatedLinearCore>
void gla_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                  const Tensor<T>* h0, const T& scale, const Tensor<T>& do_, const Tensor<T>* dht, Tensor<T>& dq,
                  Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dg, Tensor<T>& dh0, const Core& core = {}) {
  core(Decay::per_key, q, k, v, &g, h0, scale, do_, dht, dq, dk, dv, dg, dh0);
}

}  // namespace ttr
