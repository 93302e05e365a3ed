#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

LayerSpec spec_kalman_filter() {
  return {
      "kalman_filter",
      "exact Kalman-filter form of weighted ridge regression (GKA eq. (KF))",
      "Φ_0 = I/λ;  S_t = S_{t-1} + Φ_{t-1}k_t (v_t − S_{t-1}ᵀ k_t)ᵀ / (1/η_t + k_tᵀΦ_{t-1}k_t);  Φ_t by Woodbury;  "
      "o_t = S_tᵀ (scale·q_t)",
      {q(), k(), v(),
       {"eta", {"B", "T", "H"}, false, Range::positive(), Role::positive, "observation weights η_t > 0 (default 1)"},
       h0()},
      {o(), ht()},
      {scale(), l2norm_qk(false),
       {"lambda", KeyType::number, std::nullopt, true, Range::positive(), {}, "ridge λ > 0, Φ_0 = I/λ", "1"}},
      {"GKA eq. (KF)", "GKA eq. (3)", "GKA §6"},
      {"equals weighted ridge regression S_t = (Σ η k kᵀ + λI)⁻¹ Σ η k vᵀ from S_0 = 0 (GKA eq. (3)); GKA writes "
       "the V×K state, we keep FLA's K×V",
       "with η = 1 it is pdn_exact (PDN eq. (5)); with γ = 1, fixed λ and β = η it equals gka with solver=exact"},
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_kalman_filter(const LayerSpec& s) { return domains::sherman_morrison(s); }

}  // namespace ttr::layers
