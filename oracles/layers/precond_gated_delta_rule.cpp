#include "oracles/domain.hpp"
#include "oracles/layers/precond_spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_precond_gated_delta_rule() {
  std::vector<TensorSpec> in = {q(), k(), v(), g_scalar(), beta()};
  for (auto& t : precond_extra_inputs()) in.push_back(t);
  in.push_back(h0());
  return {
      "precond_gated_delta_rule",
      "Preconditioned Gated DeltaNet (PGDN): GDN writing along a diagonally preconditioned key",
      "A_t = e^{g_atk,t} A_{t-1} + β_atk,t k_t⊙k_t;  r = log(A_t+eps) − c;  B_t = x^{−r/(1+|r|)};  "
      "k̃_t = B_t⊙k_t;  S̄ = e^{g_t} S_{t-1};  S_t = S̄ + k̃_t (β_t (v_t − S̄ᵀ k_t))ᵀ;  o_t = S_tᵀ (scale·q_t)",
      in,
      {o(), ht(), {"final_A_state", {"B", "H", "K"}, true, Range::any(), Role::positive, "final A_T"}},
      precond_config(),
      {"PDN eq. (9)", "PDN App. D", "PDN App. F"},
      precond_notes(),
      true,
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_precond_gated_delta_rule(const LayerSpec& s) { return domains::delta(s, {.preconditioned = true}); }

}  // namespace ttr::layers
