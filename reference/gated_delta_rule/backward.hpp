// gated_delta_rule (Gated DeltaNet), backward of the sequential form: the adjoint
// recurrence of family/delta_backward.hpp with d_t = e^{g_t} and w_t = k_t
// (PDN App. D, Fig. 9 (a) computes the same gradients chunkwise).
// dg_t = Σ_ij dS̄_t,ij S̄_t,ij with S̄_t = e^{g_t} S_{t-1}.
#pragma once

#include "reference/family/delta_backward_core.hpp"

namespace ttr {

template <class T, class Core = SequentialDeltaCore>
void gated_delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                               const Tensor<T>& beta, const Tensor<T>* h0, const T& scale, const Tensor<T>& do_,
                               const Tensor<T>* dht, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dg,
                               Tensor<T>& dbeta, Tensor<T>& dh0, const Core& core = {}) {
  DeltaGrads<T> gr;
  core(Decay::scalar, q, k, k, v, beta, &g, h0, scale, do_, dht, gr);
  add_into(gr.dk, gr.dw);
  dq = std::move(gr.dq), dk = std::move(gr.dk), dv = std::move(gr.dv), dg = std::move(gr.dg);
  dbeta = std::move(gr.dbeta), dh0 = std::move(gr.dh0);
}

}  // namespace ttr
