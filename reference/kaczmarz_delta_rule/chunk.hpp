// kaczmarz_delta_rule, chunk form: KLA-Z App. B.4 — the Kaczmarz coefficient
// β̃_t = η_t/(‖k_t‖² + eps) (sequential.hpp) is substituted for β before the
// UT-transform chunk form of the gated delta rule runs (delta_chunk.hpp), so the
// chunkwise algorithm is GDN's unchanged. Under the 16-bit policies β̃ is computed
// in fp32 from the 16-bit key and then stored in 16 bits like any β tensor.
#pragma once

#include "reference/family/delta_chunk.hpp"
#include "reference/kaczmarz_delta_rule/sequential.hpp"

namespace ttr {

template <class P>
void kaczmarz_delta_rule_chunk(const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k,
                               const Tensor<typename P::acc>& v, const Tensor<typename P::acc>& g,
                               const Tensor<typename P::acc>& eta, const typename P::acc& eps,
                               const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk,
                               Tensor<typename P::acc>& o, Tensor<typename P::acc>& ht) {
  const Tensor<typename P::acc> beta = kaczmarz_step(k, eta, eps);
  delta_chunk_forward<P>(Decay::scalar, q, k, k, v, beta, &g, h0, scale, chunk, o, ht);
}

}  // namespace ttr
