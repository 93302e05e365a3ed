// delta_rule (DeltaNet, PDN eq. (4)): the delta family's chunk kernels with no decay.
#include "gpu/api.hpp"

namespace ttr::gpu {
void delta_rule_chunk(DeltaArgs a) {
  a.decay = Decay::none;
  a.g = nullptr;
  a.w = nullptr;
  a.kaczmarz = false;
  delta_chunk_forward(a);
}
}  // namespace ttr::gpu
