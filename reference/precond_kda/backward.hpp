// precond_kda (PKDA), backward of the sequential form: PGDN's backward
// (precond_gated_delta_rule/backward.hpp) with KDA's per-key decay, g [B,T,H,K]
// (PDN App. D: "the PKDA backward pass is analogously adapted").
#pragma once

#include "reference/precond_gated_delta_rule/backward.hpp"

namespace ttr {

template <class T>
void precond_kda_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                          const Tensor<T>& beta, const Tensor<T>& g_atk, const Tensor<T>& beta_atk,
                          const std::vector<T>& center, const Tensor<T>* h0, const Tensor<T>* A0, const T& log_x,
                          const T& eps, const T& scale, const Tensor<T>& do_, const Tensor<T>* dht,
                          const Tensor<T>* dAt, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv, Tensor<T>& dg,
                          Tensor<T>& dbeta, Tensor<T>& dg_atk, Tensor<T>& dbeta_atk, Tensor<T>& dh0, Tensor<T>& dA0,
                          Tensor<T>& dlog_atk_scale) {
  precond_delta_backward(Decay::per_key, q, k, v, g, beta, g_atk, beta_atk, center, h0, A0, log_x, eps, scale, do_,
                         dht, dAt, dq, dk, dv, dg, dbeta, dg_atk, dbeta_atk, dh0, dA0, dlog_atk_scale);
}

}  // namespace ttr
