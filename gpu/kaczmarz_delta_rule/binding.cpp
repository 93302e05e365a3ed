// kaczmarz_delta_rule on the CUDA kernels of the delta family (gpu/family/): Kaczmarz (KLA-Z eq. (3)): β_t → β_t/(‖k_t‖² + eps),
// done inside the UT stage.
#include "gpu/family/delta_binding.hpp"

TTR_DELTA_BINDING(kaczmarz_delta_rule, device::DeltaBinding::Decay::scalar, /*kaczmarz=*/true, /*precond=*/false)
TTR_DELTA_BACKWARD_BINDING(kaczmarz_delta_rule, device::DeltaBinding::Decay::scalar, /*kaczmarz=*/true, /*precond=*/false)
