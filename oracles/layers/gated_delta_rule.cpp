#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_gated_delta_rule() {
  return {
      "gated_delta_rule",
      "Gated DeltaNet: the delta rule on a state decayed by e^{g_t}",
      "S̄ = e^{g_t} S_{t-1};  S_t = S̄ + k_t (β_t (v_t − S̄ᵀ k_t))ᵀ;  o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(), g_scalar(), beta(), h0()},
      {o(), ht()},
      {scale(), l2norm_qk(false)},
      {"GKA §6.4 eq. (19)", "PDN §3.4"},
      {"decay first, then the residual is read from the decayed state (FLA "
       "naive_recurrent_gated_delta_rule); GKA eq. (19) writes the same update as a Kalman filter",
       "FLA's in-kernel gate transform (use_gate_in_kernel: g = −e^{A_log} softplus(g + dt_bias)) and "
       "β sigmoid are not modelled: pass the final g and β",
       "PDN writes the V×K state (read out as S_t k); we store FLA's K×V transpose, whose columns are GKA §6.4's "
       "per-value-channel states s_t"},
      true,
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_gated_delta_rule(const LayerSpec& s) {
  return domains::delta(s, {});
}

}  // namespace ttr::layers
