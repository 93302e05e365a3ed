// delta_rule on the CUDA kernels of the delta family (gpu/family/): the delta rule (PDN eq. (4)): no decay.
#include "gpu/family/delta_binding.hpp"

TTR_DELTA_BINDING(delta_rule, device::DeltaBinding::Decay::none, /*kaczmarz=*/false, /*precond=*/false)
TTR_DELTA_BACKWARD_BINDING(delta_rule, device::DeltaBinding::Decay::none, /*kaczmarz=*/false, /*precond=*/false)
