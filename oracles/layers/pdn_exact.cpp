#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_pdn_exact() {
  return {
      "pdn_exact",
      "DeltaNet preconditioned by the exact inverse key Gram: online ridge regression",
      "P_0 = I/λ;  k̃_t = P_{t-1}k_t / (1 + k_tᵀP_{t-1}k_t);  S_t = S_{t-1} + k̃_t (v_t − S_{t-1}ᵀ k_t)ᵀ;  "
      "P_t = P_{t-1} − P_{t-1}k_t k_tᵀP_{t-1} / (1 + k_tᵀP_{t-1}k_t);  o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(), h0()},
      {o(), ht()},
      {scale(), l2norm_qk(false),
       {"lambda", KeyType::number, std::nullopt, true, Range::positive(), {}, "ridge λ > 0, P_0 = I/λ", "1"}},
      {"PDN eq. (5)", "PDN Thm 3.1", "PDN Thm C.1"},
      {"with h0 = 0, S_t = (Σ k kᵀ + λI)⁻¹ Σ k vᵀ (PDN Thm 3.1, which writes the V×K state S_t = C_t P_t)",
       "no write gate β: the exact preconditioner fixes the step (PDN eq. (5))",
       "FLA has no op for it; the paper's PDN kernels reuse PGDN with decay 1 (PDN §4)"},
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_pdn_exact(const LayerSpec& s) { return domains::sherman_morrison(s); }

}  // namespace ttr::layers
