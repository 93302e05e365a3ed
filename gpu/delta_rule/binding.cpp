// delta_rule on the CUDA kernels of the delta family (gpu/family/): the delta rule (PDN eq. (4)): no decay.
// Declared in oracles/layers/layers.def (TTR_KERNEL lines).
#include "gpu/family/delta_binding.hpp"

namespace ttr::kernels {
namespace {
constexpr device::DeltaBinding kBinding{device::DeltaBinding::Decay::none, false, false};
}  // namespace

TensorMap<double> delta_rule__cuda__chunk__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                       const KernelOptions& opt) {
  return device::run_delta(kBinding, Form::chunk, in, cfg, dtype, opt);
}

TensorMap<double> delta_rule__cuda__sequential__forward(const TensorMap<double>& in, const Config& cfg, Tier dtype,
                                                            const KernelOptions& opt) {
  return device::run_delta(kBinding, Form::sequential, in, cfg, dtype, opt);
}

}  // namespace ttr::kernels
