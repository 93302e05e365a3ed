// gated_delta_rule, chunk form: the UT-transform chunkwise algorithm of
// reference/family/delta_chunk.hpp with a scalar decay per token (GDN) (see there for the derivation and
// the arithmetic policy). Equals gated_delta_rule_sequential exactly in exact arithmetic.
#pragma once

#include "reference/family/delta_chunk.hpp"

namespace ttr {

template <class P>
void gated_delta_rule_chunk(const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k, const Tensor<typename P::acc>& v,
              const Tensor<typename P::acc>& g, const Tensor<typename P::acc>& beta, const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk,
              Tensor<typename P::acc>& o, Tensor<typename P::acc>& ht) {
  delta_chunk_forward<P>(Decay::scalar, q, k, k, v, beta, &g, h0, scale, chunk, o, ht);
}

}  // namespace ttr
