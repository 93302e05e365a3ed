// precond_gated_delta_rule on the CUDA kernels of the delta family (gpu/family/): PGDN (PDN eqs. (6), (9)): residual read along k, write
// along k̃ = B_t ⊙ k_t from the device preconditioner.
#include "gpu/family/delta_binding.hpp"

TTR_DELTA_BINDING(precond_gated_delta_rule, device::DeltaBinding::Decay::scalar, /*kaczmarz=*/false, /*precond=*/true)
TTR_DELTA_BACKWARD_BINDING(precond_gated_delta_rule, device::DeltaBinding::Decay::scalar, /*kaczmarz=*/false,
                           /*precond=*/true)
