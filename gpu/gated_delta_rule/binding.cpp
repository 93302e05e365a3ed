// gated_delta_rule on the CUDA kernels of the delta family (gpu/family/): GDN (GKA §6.4): a scalar log decay g_t per token and head.
#include "gpu/family/delta_binding.hpp"

TTR_DELTA_BINDING(gated_delta_rule, device::DeltaBinding::Decay::scalar, /*kaczmarz=*/false, /*precond=*/false)
TTR_DELTA_BACKWARD_BINDING(gated_delta_rule, device::DeltaBinding::Decay::scalar, /*kaczmarz=*/false, /*precond=*/false)
