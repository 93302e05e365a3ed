// precond_gated_delta_rule, chunk form: PDN eq. (6) and App. D/F — the chunkwise
// preconditioner (atk_chunk.hpp) produces the write keys k̃ = B ⊙ k, then the
// UT-transform chunk form runs with distinct read (k) and write (k̃) keys, the
// asymmetric K K̃ᵀ of delta_chunk.hpp. precond_kda differs only in the decay.
#pragma once

#include <vector>

#include "reference/family/atk_chunk.hpp"
#include "reference/family/delta_chunk.hpp"

namespace ttr {

template <class P>
void precond_delta_chunk(Decay decay, const Tensor<typename P::acc>& q, const Tensor<typename P::acc>& k,
                         const Tensor<typename P::acc>& v, const Tensor<typename P::acc>& g,
                         const Tensor<typename P::acc>& beta, const Tensor<typename P::acc>& g_atk,
                         const Tensor<typename P::acc>& beta_atk, const std::vector<typename P::acc>& center,
                         const Tensor<typename P::acc>* h0, const Tensor<typename P::acc>* A0,
                         const typename P::acc& log_x, const typename P::acc& eps, const typename P::acc& scale,
                         int chunk, Tensor<typename P::acc>& o, Tensor<typename P::acc>& ht,
                         Tensor<typename P::acc>& A_final) {
  Tensor<typename P::acc> k_tilde;
  atk_write_keys_chunk<P>(k, g_atk, beta_atk, center, A0, log_x, eps, chunk, k_tilde, A_final);
  // mutant pgdn-unpreconditioned-write: the kernel passes k as the write key (the
  // plain GDN/KDA call, the preconditioner computed but never applied):
  // final_A_state is still right, o and ht are written along the wrong direction.
  const Tensor<typename P::acc>& w = mutated(Mutant::pgdn_unpreconditioned_write) ? k : k_tilde;
  delta_chunk_forward<P>(decay, q, k, w, v, beta, &g, h0, scale, chunk, o, ht);
}

}  // namespace ttr
