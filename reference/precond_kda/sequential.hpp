// precond_kda (PKDA), sequential form: PDN eq. (9) with the per-key decay of KDA
// (PDN §3.4: S_{t-1} → Diag(e^{g_t}) S_{t-1}); FLA naive_recurrent_precond_kda.
// Preconditioner and delta core are shared with PGDN.
#pragma once

#include "reference/precond_gated_delta_rule/sequential.hpp"

namespace ttr {

template <class T>
void precond_kda_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                            const Tensor<T>& beta, const Tensor<T>& g_atk, const Tensor<T>& beta_atk,
                            const std::vector<T>& center, const Tensor<T>* h0, const Tensor<T>* A0,
                            const T& log_x, const T& eps, const T& scale, Tensor<T>& o, Tensor<T>& ht,
                            Tensor<T>& A_final) {
  precond_delta_sequential(Decay::per_key, q, k, v, g, beta, g_atk, beta_atk, center, h0, A0, log_x, eps,
                           scale, o, ht, A_final);
}

}  // namespace ttr
