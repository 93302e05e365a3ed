// Spec pieces shared by precond_gated_delta_rule and precond_kda.
#pragma once

#include <string>
#include <vector>

#include "oracles/spec.hpp"

namespace ttr::layers {
std::vector<TensorSpec> precond_extra_inputs();
std::vector<ConfigKey> precond_config();
std::vector<std::string> precond_notes();
}  // namespace ttr::layers
