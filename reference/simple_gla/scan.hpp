// simple_gla, scan form: prefix scan over the affine pairs (e^{g_t}·1, k_t v_tᵀ)
// (reference/family/gated_linear_scan.hpp: derivation and arithmetic policy).
#pragma once

#include "reference/family/gated_linear_scan.hpp"

namespace ttr {

template <class P>
void simple_gla_scan(const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k,
                     const Tensor<typename P::acc>& v, const Tensor<typename P::acc>& g,
                     const Tensor<typename P::acc>* h0, const typename P::acc& scale, Tensor<typename P::acc>& o,
                     Tensor<typename P::acc>& ht) {
  gated_linear_scan_forward<P>(Decay::scalar, q, k, v, &g, h0, scale, o, ht);
}

}  // namespace ttr
