// precond_kda: binds FLA's argument names (g, beta, g_atk, beta_atk,
// initial_A_state, log_atk_scale, x, eps) to reference/precond_gated_delta_rule/
// (spec in precond_kda.cpp): the preconditioned delta rule with KDA's per-key
// decay (PDN §3.4).
#pragma once

#include "oracles/layers/precond_common.hpp"

namespace ttr::layers {

struct precond_kda : precond_delta_adapter<Decay::per_key> {};

}  // namespace ttr::layers
