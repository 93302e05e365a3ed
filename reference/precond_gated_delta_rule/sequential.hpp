// precond_gated_delta_rule (PGDN), sequential form: PDN eq. (9) with scalar decay,
// in FLA's form (naive_recurrent_precond_gated_delta_rule):
//   S̄ = e^{g_t} S_{t-1};  S_t = S̄ + k̃_t (β_t (v_t − S̄ᵀ k_t))ᵀ;  o_t = S_tᵀ(scale·q_t)
// reading the residual with k_t and writing along k̃_t = B_t ⊙ k_t (family/atk.hpp).
// precond_kda is the same with a.decay = Decay::per_key (PDN §3.4).
#pragma once

#include "reference/family/atk.hpp"
#include "reference/family/delta.hpp"
#include "reference/family/precond_delta.hpp"

namespace ttr {

template <class T>
void precond_delta_sequential(const PrecondDelta<T>& a, const PrecondDeltaOutputs<T>& out) {
  Tensor<T> k_tilde;
  atk_write_keys(a.k, a.g_atk, a.beta_atk, a.center, a.A0, a.log_x, a.eps, k_tilde, out.A_final);
  delta_forward<T>(a.decay, a.q, a.k, k_tilde, a.v, a.beta, &a.g, a.h0, a.scale, out.o, out.ht);
}

}  // namespace ttr
