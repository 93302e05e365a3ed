// precond_gated_delta_rule: binds FLA's argument names (g, beta, g_atk, beta_atk,
// initial_A_state, log_atk_scale, x, eps) to reference/precond_gated_delta_rule/
// (spec in precond_gated_delta_rule.cpp): the preconditioned delta rule with a
// scalar decay per token and head.
#pragma once

#include "oracles/layers/delta_tf32_intra_form.hpp"
#include "oracles/layers/precond_common.hpp"

namespace ttr::layers {

// chunk_tf32_intra: FLA's chunk_precond_gated_delta_rule backward, whose score pairs
// chunk_bwd_kernel_dqkwg forms as two TF32 products, one a side of dg's identity
// (scalar_products_backward_tf32 in reference/family/delta_chunk_backward.hpp).
struct precond_gated_delta_rule : precond_delta_adapter<Decay::scalar>,
                                  delta_tf32_intra_form<precond_gated_delta_rule> {};

}  // namespace ttr::layers
