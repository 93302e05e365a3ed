// precond_gated_delta_rule, chunk form: PDN eq. (6) and App. D/F — the chunkwise
// preconditioner (atk_chunk.hpp) produces the write keys k̃ = B ⊙ k, then the
// UT-transform chunk form runs with distinct read (k) and write (k̃) keys, the
// asymmetric K K̃ᵀ of delta_chunk.hpp. precond_kda differs only in the decay.
#pragma once

#include <vector>

#include "reference/family/atk_chunk.hpp"
#include "reference/family/delta_chunk.hpp"
#include "reference/family/precond_delta.hpp"

namespace ttr {

template <class P>
void precond_delta_chunk(const PrecondDelta<typename P::acc>& a, int chunk,
                         const PrecondDeltaOutputs<typename P::acc>& out) {
  Tensor<typename P::acc> k_tilde;
  atk_write_keys_chunk<P>(a.k, a.g_atk, a.beta_atk, a.center, a.A0, a.log_x, a.eps, chunk, k_tilde, out.A_final);
  // mutant pgdn-unpreconditioned-write: the kernel passes k as the write key (the
  // plain GDN/KDA call, the preconditioner computed but never applied):
  // final_A_state is still right, o and ht are written along the wrong direction.
  const Tensor<typename P::acc>& w = mutated(Mutant::pgdn_unpreconditioned_write) ? a.k : k_tilde;
  delta_chunk_forward<P>(a.decay, a.q, a.k, w, a.v, a.beta, &a.g, a.h0, a.scale, chunk, out.o, out.ht);
}

}  // namespace ttr
