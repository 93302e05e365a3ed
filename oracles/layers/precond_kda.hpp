// precond_kda: binds FLA's argument names (g, beta, g_atk, beta_atk,
// initial_A_state, log_atk_scale, x, eps) to reference/precond_gated_delta_rule/
// (spec in precond_kda.cpp): the preconditioned delta rule with KDA's per-key
// decay (PDN §3.4).
#pragma once

#include "oracles/layers/delta_tf32_intra_form.hpp"
#include "oracles/layers/precond_common.hpp"

namespace ttr::layers {

// chunk_tf32_intra: FLA's chunk_precond_kda backward, whose intra-chunk products have
// chunk_kda's structure (fla/ops/precond_kda/chunk_intra.py; delta_tf32_intra_form.hpp).
struct precond_kda : precond_delta_adapter<Decay::per_key>, delta_tf32_intra_form<precond_kda> {};

}  // namespace ttr::layers
