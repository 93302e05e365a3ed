// kda (Kimi Delta Attention): the delta family's chunk kernels with a per-key
// (diagonal) log decay g [B,T,H,K]; A and the score matrix are formed pair by pair.
#include "gpu/api.hpp"

namespace ttr::gpu {
void kda_chunk(DeltaArgs a) {
  a.decay = Decay::per_key;
  a.w = nullptr;
  a.kaczmarz = false;
  delta_chunk_forward(a);
}
}  // namespace ttr::gpu
