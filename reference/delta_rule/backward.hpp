// delta_rule (DeltaNet), backward of the sequential form: the adjoint recurrence
// of family/delta_backward.hpp with d_t = 1 and w_t = k_t, so dk_t adds the
// read-back term S_{t-1} du_t and the write term dS_t δ_t.
#pragma once

#include "reference/family/delta_backward_core.hpp"

namespace ttr {

template <class T, class Core = SequentialDeltaCore>
void delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& beta,
                         const Tensor<T>* h0, const T& scale, const Tensor<T>& do_, const Tensor<T>* dht,
                         Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dbeta, Tensor<T>& dh0, const Core& core = {}) {
  DeltaGrads<T> gr;
  core(Decay::none, q, k, k, v, beta, nullptr, h0, scale, do_, dht, gr);
  add_into(gr.dk, gr.dw);
  dq = std::move(gr.dq), dk = std::move(gr.dk), dv = std::move(gr.dv), dbeta = std::move(gr.dbeta);
  dh0 = std::move(gr.dh0);
}

}  // namespace ttr
