// precond_gated_delta_rule (PGDN), sequential form: PDN eq. (9) with scalar decay,
// in FLA's form (naive_recurrent_precond_gated_delta_rule):
//   S̄ = e^{g_t} S_{t-1};  S_t = S̄ + k̃_t (β_t (v_t − S̄ᵀ k_t))ᵀ;  o_t = S_tᵀ(scale·q_t)
// reading the residual with k_t and writing along k̃_t = B_t ⊙ k_t (family/atk.hpp).
#pragma once

#include "reference/family/atk.hpp"
#include "reference/family/delta.hpp"

namespace ttr {

// decay: Decay::scalar (PGDN, g [B,T,H]) or Decay::per_key (PKDA, g [B,T,H,K]).
template <class T>
void precond_delta_sequential(Decay decay, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                              const Tensor<T>& g, const Tensor<T>& beta, const Tensor<T>& g_atk,
                              const Tensor<T>& beta_atk, const std::vector<T>& center, const Tensor<T>* h0,
                              const Tensor<T>* A0, const T& log_x, const T& eps, const T& scale,
                              Tensor<T>& o, Tensor<T>& ht, Tensor<T>& A_final) {
  Tensor<T> k_tilde;
  atk_write_keys(k, g_atk, beta_atk, center, A0, log_x, eps, k_tilde, A_final);
  delta_forward<T>(decay, q, k, k_tilde, v, beta, &g, h0, scale, o, ht);
}

template <class T>
void precond_gated_delta_rule_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                         const Tensor<T>& g, const Tensor<T>& beta, const Tensor<T>& g_atk,
                                         const Tensor<T>& beta_atk, const std::vector<T>& center,
                                         const Tensor<T>* h0, const Tensor<T>* A0, const T& log_x,
                                         const T& eps, const T& scale, Tensor<T>& o, Tensor<T>& ht,
                                         Tensor<T>& A_final) {
  precond_delta_sequential(Decay::scalar, q, k, v, g, beta, g_atk, beta_atk, center, h0, A0, log_x, eps,
                           scale, o, ht, A_final);
}

}  // namespace ttr
