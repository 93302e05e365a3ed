// kda on the CUDA kernels of the delta family (gpu/family/): KDA (GKA §6.4): a log decay per key channel, g [B,T,H,K].
#include "gpu/family/delta_binding.hpp"

TTR_DELTA_BINDING(kda, device::DeltaBinding::Decay::per_key, /*kaczmarz=*/false, /*precond=*/false)
TTR_DELTA_BACKWARD_BINDING(kda, device::DeltaBinding::Decay::per_key, /*kaczmarz=*/false, /*precond=*/false)
