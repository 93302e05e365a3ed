#include "oracles/layers/precond_spec.hpp"

namespace ttr::layers {
using namespace spec_common;

std::vector<TensorSpec> precond_extra_inputs() {
  return {
      {"g_atk", {"B", "T", "H"}, true, Range::nonpositive(), Role::log_decay,
       "log decay of the preconditioner state A (FLA g_atk; the paper's α^P = e^{g_atk})"},
      {"beta_atk", {"B", "T", "H"}, true, Range::closed(0.0, 1.0), Role::gate,
       "write strength of A (FLA beta_atk; the paper's β^P)"},
      {"initial_A_state", {"B", "H", "K"}, false, Range::nonnegative(), Role::positive,
       "initial diagonal second moment A_0 (FLA initial_A_state, default 0)"},
      {"log_atk_scale", {"H"}, false, Range::any(), Role::value,
       "squash centre c per head (FLA log_atk_scale); default: the config key"},
  };
}

std::vector<ConfigKey> precond_config() {
  return {
      scale(),
      l2norm_qk(true),
      {"x", KeyType::number, "1.5", false, {1.0, 2.0, true, false}, {},
       "squash range: B_t in [1/x, x]; x <= 2 keeps the recurrence stable (PDN App. E)"},
      {"eps", KeyType::number, "1e-6", false, Range::positive(), {}, "inside log(A_t + eps) (FLA eps)"},
      {"log_atk_scale", KeyType::number, "-0.2", false, Range::any(), {},
       "squash centre c when the tensor log_atk_scale is absent (FLA default −0.2)"},
  };
}

std::vector<std::string> precond_notes() {
  return {
      "FLA's op of this name (fla/ops/precond_gated_delta_rule, precond_kda): read the residual with k, "
      "write along k̃ = B_t ⊙ k; the preconditioner state A is updated before it is used at token t",
      "PDN eq. (9) writes r = log A_t − μ with μ > 0; App. E.3 parameterises μ = e^{logAScale}; FLA uses "
      "r = log(A_t + eps) − c with c = log_atk_scale directly: we follow FLA",
      "use_qk_l2norm_in_kernel defaults to true, as in FLA's fused and chunk ops (its naive PGDN reference "
      "normalises with F.normalize instead, eps 1e-12 outside the sqrt)",
      "final_A_state is FLA's third return value (A) [B,H,K]",
      "PDN writes the V×K state; we store FLA's K×V transpose",
  };
}

}  // namespace ttr::layers
