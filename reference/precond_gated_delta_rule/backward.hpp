// precond_gated_delta_rule (PGDN), backward of the sequential form: PDN App. D,
// Fig. 9 (b) run token by token.
//   1. k̃ = B ⊙ k from the preconditioner's forward (family/atk.hpp);
//   2. the delta core's adjoint with read key k and write key k̃
//      (family/delta_backward.hpp): dq, dv, dg, dbeta, dh0, the read-key part dk
//      and the write-key gradient dk̃;
//   3. the preconditioner's adjoint (family/atk_backward.hpp) from dk̃ and the
//      optional cotangent dAt of final_A_state: dk_atk, dg_atk, dbeta_atk, dA0
//      (FLA's initial_A_state) and dlog_atk_scale [H] (the centre c per head;
//      meaningful when log_atk_scale is a tensor input);
//   4. dk = dk (read) + dk_atk.
#pragma once

#include <utility>

#include "reference/family/atk_backward.hpp"
#include "reference/family/delta_backward.hpp"

namespace ttr {

// decay: Decay::scalar (PGDN, g [B,T,H]) or Decay::per_key (PKDA, g [B,T,H,K]).
template <class T>
void precond_delta_backward(Decay decay, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                            const Tensor<T>& g, const Tensor<T>& beta, const Tensor<T>& g_atk,
                            const Tensor<T>& beta_atk, const std::vector<T>& center, const Tensor<T>* h0,
                            const Tensor<T>* A0, const T& log_x, const T& eps, const T& scale, const Tensor<T>& do_,
                            const Tensor<T>* dht, const Tensor<T>* dAt, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv,
                            Tensor<T>& dg, Tensor<T>& dbeta, Tensor<T>& dg_atk, Tensor<T>& dbeta_atk,
                            Tensor<T>& dh0, Tensor<T>& dA0, Tensor<T>& dlog_atk_scale) {
  Tensor<T> k_tilde, A_final, dk_atk;
  atk_write_keys(k, g_atk, beta_atk, center, A0, log_x, eps, k_tilde, A_final);
  DeltaGrads<T> gr;
  delta_backward<T>(decay, q, k, k_tilde, v, beta, &g, h0, scale, do_, dht, gr);
  atk_write_keys_backward(k, g_atk, beta_atk, center, A0, log_x, eps, gr.dw, dAt, dk_atk, dg_atk, dbeta_atk, dA0,
                          dlog_atk_scale);
  add_into(gr.dk, dk_atk);
  dq = std::move(gr.dq), dk = std::move(gr.dk), dv = std::move(gr.dv), dg = std::move(gr.dg);
  dbeta = std::move(gr.dbeta), dh0 = std::move(gr.dh0);
}

template <class T>
void precond_gated_delta_rule_backward(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                       const Tensor<T>& g, const Tensor<T>& beta, const Tensor<T>& g_atk,
                                       const Tensor<T>& beta_atk, const std::vector<T>& center,
                                       const Tensor<T>* h0, const Tensor<T>* A0, const T& log_x, const T& eps,
                                       const T& scale, const Tensor<T>& do_, const Tensor<T>* dht,
                                       const Tensor<T>* dAt, Tensor<T>& dq, Tensor<T>& dk, Tensor<T>& dv,
                                       Tensor<T>& dg, Tensor<T>& dbeta, Tensor<T>& dg_atk, Tensor<T>& dbeta_atk,
                                       Tensor<T>& dh0, Tensor<T>& dA0, Tensor<T>& dlog_atk_scale) {
  precond_delta_backward(Decay::scalar, q, k, v, g, beta, g_atk, beta_atk, center, h0, A0, log_x, eps, scale, do_,
                         dht, dAt, dq, dk, dv, dg, dbeta, dg_atk, dbeta_atk, dh0, dA0, dlog_atk_scale);
}

}  // namespace ttr
