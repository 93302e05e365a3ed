// precond_gated_delta_rule: binds FLA's argument names (g, beta, g_atk, beta_atk,
// initial_A_state, log_atk_scale, x, eps) to reference/precond_gated_delta_rule/
// (spec in precond_gated_delta_rule.cpp): the preconditioned delta rule with a
// scalar decay per token and head.
#pragma once

#include "oracles/layers/precond_common.hpp"

namespace ttr::layers {

struct precond_gated_delta_rule : precond_delta_adapter<Decay::scalar> {};

}  // namespace ttr::layers
