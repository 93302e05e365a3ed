// precond_gated_delta_rule on the CUDA kernels of the delta family (gpu/family/): PGDN (PDN eqs. (6), (9)): residual read along k, write along k̃ = B_t ⊙ k_t from the device preconditioner.
// Declared in oracles/layers/layers.def (TTR_KERNEL lines).
#include "gpu/family/delta_binding.hpp"

namespace ttr::kernels {
namespace {
constexpr device::DeltaBinding kBinding{device::DeltaBinding::Decay::scalar, false, true};
}  // namespace

TensorMap<double> precond_gated_delta_rule__cuda__chunk__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                                     const KernelOptions& opt) {
  return device::run_delta(kBinding, Form::chunk, in, cfg, dtype, opt);
}

TensorMap<double> precond_gated_delta_rule__cuda__sequential__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                                          const KernelOptions& opt) {
  return device::run_delta(kBinding, Form::sequential, in, cfg, dtype, opt);
}

}  // namespace ttr::kernels
