// precond_gated_delta_rule (PGDN, PDN eq. (6) and (9)): GDN's chunk kernels with
// the residual read along k and the write along k̃ = B_t ⊙ k_t, so the UT matrix
// is the asymmetric tril(Diag(β) [K K̃ᵀ ⊙ Γ], −1). The diagonal preconditioner
// that produces k̃ (an elementwise prefix recurrence) is computed by the caller.
#include "gpu/api.hpp"

namespace ttr::gpu {
void precond_gated_delta_rule_chunk(DeltaArgs a, const void* k_tilde) {
  a.decay = Decay::scalar;
  a.w = k_tilde;
  a.kaczmarz = false;
  delta_chunk_forward(a);
}
}  // namespace ttr::gpu
