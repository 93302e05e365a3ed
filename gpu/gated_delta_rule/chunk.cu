// gated_delta_rule (GDN, FLA chunk_gated_delta_rule): the delta family's chunk
// kernels with a scalar log decay g_t per token and head (gpu/family/delta_chunk.cu).
#include "gpu/api.hpp"

namespace ttr::gpu {
void gated_delta_rule_chunk(DeltaArgs a) {
  a.decay = Decay::scalar;
  a.w = nullptr;
  a.kaczmarz = false;
  delta_chunk_forward(a);
}
}  // namespace ttr::gpu
