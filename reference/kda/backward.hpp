// kda (Kimi Delta Attention), backward of the sequential form: the adjoint
// recurrence of family/delta_backward.hpp with per-key d_t = e^{g_t} (g [B,T,H,K])
// and w_t = k_t: dg_{t,i} = Σ_j dS̄_t,ij S̄_t,ij. With g_{t,i} = g_t for every i
// this is gated_delta_rule's, and Σ_i dg_{t,i} is gated_delta_rule's dg_t.
#pragma once

#include "reference/family/delta_backward_core.hpp"

namespace ttr {

template <class T, class Core = SequentialDeltaCore>
void kda_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                  const Tensor<T>& beta, const Tensor<T>* h0, const T& scale, const Tensor<T>& do_,
                  const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dg, Tensor<T>& dbeta,
                  Tensor<T>& dh0, const Core& core = {}) {
  DeltaGrads<T> gr;
  core(Decay::per_key, q, k, k, v, beta, &g, h0, scale, do_, dht, gr);
  add_into(gr.dk, gr.dw);
  dq = std::move(gr.dq), dk = std::move(gr.dk), dv = std::move(gr.dv), dg = std::move(gr.dg);
  dbeta = std::move(gr.dbeta), dh0 = std::move(gr.dh0);
}

}  // namespace ttr
