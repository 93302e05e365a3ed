#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_kda() {
  return {
      "kda",
      "Kimi Delta Attention: Gated DeltaNet with a decay per key channel",
      "S̄ = Diag(e^{g_t}) S_{t-1};  S_t = S̄ + k_t (β_t (v_t − S̄ᵀ k_t))ᵀ;  o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(), g_per_key(), beta(), h0()},
      {o(), ht()},
      {scale(), l2norm_qk(false)},
      {"GKA §6.4", "PDN §3.4"},
      {"FLA naive_recurrent_kda: S * exp(g)[..., None] decays the K rows of the K×V state",
       "FLA's KDA layer keeps its state as [V,K] (state_v_first=True); h0/ht here are [B,H,K,V]",
       "the in-kernel gate transforms (A_log, dt_bias, lower_bound) are not modelled: pass the final g",
       "PDN writes the V×K state, decayed along its K columns; we store FLA's K×V transpose"},
      true,
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_kda(const LayerSpec& s) {
  return domains::delta(s, {});
}

}  // namespace ttr::layers
