#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_delta_rule() {
  return {
      "delta_rule",
      "DeltaNet: the delta rule, online regression with one gradient step per token",
      "S_t = S_{t-1} + k_t (β_t (v_t − S_{t-1}ᵀ k_t))ᵀ;  o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(), beta(), h0()},
      {o(), ht()},
      {scale(), l2norm_qk(false)},
      {"PDN eq. (4)", "PDN §2.2"},
      {"PDN eq. (4) writes the V×K state S_t = S_{t-1} − β_t (S_{t-1} k_t − v_t) k_tᵀ; we store FLA's K×V "
       "transpose",
       "β is per head [B,T,H]; FLA's fused kernel also accepts a per-value β [B,T,H,V], not modelled",
       "keys are used as given; FLA normalises them only with use_qk_l2norm_in_kernel (also a key here)"},
      true,
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_delta_rule(const LayerSpec& s) {
  return domains::delta(s, {});
}

}  // namespace ttr::layers
