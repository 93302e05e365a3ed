// kda (Kimi Delta Attention), sequential form: gated_delta_rule with a per-key
// decay S̄ = Diag(e^{g_t}) S_{t-1}, g [B,T,H,K] (GKA §6.4; FLA naive_recurrent_kda,
// which decays S * exp(g)[..., None], i.e. the K rows).
#pragma once

#include "reference/family/delta.hpp"

namespace ttr {

template <class T>
void kda_sequential(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& g,
                    const Tensor<T>& beta, const Tensor<T>* h0, const T& scale, Tensor<T>& o, Tensor<T>& ht) {
  delta_forward<T>(Decay::per_key, q, k, k, v, beta, &g, h0, scale, o, ht);
}

}  // namespace ttr
