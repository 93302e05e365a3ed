// kaczmarz_delta_rule (KLA-Z eq. (3), App. B.4): GDN's chunk kernels after the
// coefficient substitution β_t → β_t/(‖k_t‖² + eps), done inside the UT stage.
#include "gpu/api.hpp"

namespace ttr::gpu {
void kaczmarz_delta_rule_chunk(DeltaArgs a, float eps) {
  a.decay = Decay::scalar;
  a.w = nullptr;
  a.kaczmarz = true;
  a.kaczmarz_eps = eps;
  delta_chunk_forward(a);
}
}  // namespace ttr::gpu
