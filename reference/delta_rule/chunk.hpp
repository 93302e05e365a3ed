// delta_rule, chunk form: the UT-transform chunkwise algorithm of
// reference/family/delta_chunk.hpp with no decay (PDN eq. (4)) (see there for the derivation and
// the arithmetic policy). Equals delta_rule_sequential exactly in exact arithmetic.
#pragma once

#include "reference/family/delta_chunk.hpp"

namespace ttr {

template <class P>
void delta_rule_chunk(const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k, const Tensor<typename P::acc>& v,
              const Tensor<typename P::acc>& beta, const Tensor<typename P::acc>* h0, const typename P::acc& scale, int chunk,
              Tensor<typename P::acc>& o, Tensor<typename P::acc>& ht) {
  delta_chunk_forward<P>(Decay::none, q, k, k, v, beta, nullptr, h0, scale, chunk, o, ht);
}

}  // namespace ttr
