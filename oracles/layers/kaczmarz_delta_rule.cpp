#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_kaczmarz_delta_rule() {
  return {
      "kaczmarz_delta_rule",
      "Kaczmarz linear attention: Gated DeltaNet with the step normalised by the key energy",
      "β̃_t = β_t / (‖k_t‖² + eps);  S̄ = e^{g_t} S_{t-1};  S_t = S̄ + k_t (β̃_t (v_t − S̄ᵀ k_t))ᵀ;  "
      "o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(), g_scalar(),
       beta(Range::closed(0.0, 2.0), "relaxation η_t of the Kaczmarz projection (contractive for η in [0, 2])"),
       h0()},
      {o(), ht()},
      {scale(), l2norm_qk(false),
       {"eps", KeyType::number, "1e-6", false, Range::nonnegative(), {}, "key-energy stabiliser of KLA-Z eq. (3)"}},
      {"KLA-Z eq. (3)", "KLA-Z eq. (2)", "KLA-Z Thm 1"},
      {"KLA-Z's formulas were lost in text extraction; eq. (3) is rebuilt from eqs. (1)-(2): the minimum-norm "
       "state change with S_tᵀ k_t = v_t is the step 1/‖k_t‖², relaxed by η_t and stabilised by eps",
       "β is η, allowed in [0, 2] (a relaxed projection); with η = 1 and eps = 0, S_tᵀ k_t = v_t exactly",
       "eps = 0 with a zero key divides by zero: keep eps > 0 unless every key is nonzero",
       "the K×V state is the orientation of KLA-Z's tokenwise listing (err = v − S̄ᵀk); its chunkwise appendix "
       "writes the transpose"},
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_kaczmarz_delta_rule(const LayerSpec& s) {
  return domains::delta(s, {.key_energy_step = true});
}

}  // namespace ttr::layers
