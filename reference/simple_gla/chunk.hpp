// simple_gla, chunk form: PDN §2.1 chunkwise linear attention with a scalar decay per token (Mamba-2 form, PDN §3.4)
// (reference/family/gated_linear_chunk.hpp: derivation and arithmetic policy).
#pragma once

#include "reference/family/gated_linear_chunk.hpp"

namespace ttr {

template <class P>
void simple_gla_chunk(const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k, const Tensor<typename P::acc>& v,
              const Tensor<typename P::acc>& g, const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk, Tensor<typename P::acc>& o,
              Tensor<typename P::acc>& ht) {
  gated_linear_chunk_forward<P>(Decay::scalar, q, k, v, &g, h0, scale, chunk, o, ht);
}

}  // namespace ttr
