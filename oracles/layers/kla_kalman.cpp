#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {

LayerSpec spec_kla_kalman() {
  const auto slot = [](const char* n, bool req, Range r, Role role, const char* doc) {
    return TensorSpec{n, {"B", "H", "N", "D"}, req, r, role, doc};
  };
  return {
      "kla_kalman",
      "Kalman linear attention: a scalar Kalman filter per state slot, Möbius precision and affine mean",
      "φ = k_n² λv_d;  Λ_t = ((1 + p̄φ)Λ_{t-1} + ā²φ)/(p̄Λ_{t-1} + ā²);  η_t = ā/(ā² + p̄Λ_{t-1}) η_{t-1} + k_n λv_d v_d;  "
      "o_{t,d} = scale Σ_n q_n η/Λ;  o_var_{t,d} = scale² Σ_n q_n²/Λ",
      {{"q", {"B", "T", "H", "N"}, true, Range::any(), Role::query, "queries"},
       {"k", {"B", "T", "H", "N"}, true, Range::any(), Role::key, "keys"},
       {"v", {"B", "T", "H", "D"}, true, Range::any(), Role::value, "values"},
       {"lambda_v", {"B", "T", "H", "D"}, true, Range::positive(), Role::precision, "observation precision λv > 0"},
       {"a_bar", {"H", "N", "D"}, true, {0.0, 1.0, true, false}, Role::transition, "state transition ā in (0, 1]"},
       {"p_bar", {"H", "N", "D"}, true, Range::nonnegative(), Role::noise, "process noise p̄ >= 0"},
       slot("lambda_init", false, Range::positive(), Role::positive, "initial precision Λ_0 (default lambda0)"),
       slot("eta_init", false, Range::any(), Role::state, "initial information mean η_0 = Λ_0 μ_0 (default 0)")},
      {{"o", {"B", "T", "H", "D"}, true, Range::any(), Role::value, "posterior-mean readout scale Σ_n q_n μ_{n,d}"},
       {"o_var", {"B", "T", "H", "D"}, true, Range::any(), Role::value, "posterior-variance readout scale² Σ_n q_n²/Λ"},
       slot("lambda_T", true, Range::any(), Role::positive, "final precision Λ_T"),
       slot("eta_T", true, Range::any(), Role::state, "final information mean η_T")},
      {{"lambda0", KeyType::number, "1", false, Range::positive(), {}, "prior precision when lambda_init is absent"},
       {"scale", KeyType::number, "1", false, Range::any(), {}, "readout scale (default 1, not K^-1/2)"}},
      {"KLA-K Thm 1", "KLA-K Thm 2", "KLA-K eqs. (16)-(19)", "KLA-K Cor. 2.2 eq. (20)", "KLA-K eqs. (22)-(23)",
       "KLA-K Alg. 1"},
      {"precision and information mean are carried per slot (n, d); the KLA-K readout is the posterior mean "
       "μ = η/Λ and its variance 1/Λ, contracted with q over n",
       "with p̄ = 0 the precision grows like ā^{-2t}: no exponent range is assumed (MPFR carries it; the "
       "sequential form in float tiers overflows to inf and returns NaN, which the gate reports)",
       "forms chunk and scan carry every quantity of both scans (Möbius entries, Λ, the affine pairs, η) as "
       "mantissa and integer exponent, so no intermediate overflows fp32/bf16 (docs/kla-scaled.md); chunk_unscaled and "
       "scan_unscaled are the paper's representation (Λ, η as plain numbers), kept for comparison",
       "scale defaults to 1, unlike the other layers"},
  };
}

// The inputs its forms are guaranteed finite on (docs/domains.md).
LayerDomain domain_kla_kalman(const LayerSpec& s) { return domains::kla_kalman(s); }

}  // namespace ttr::layers
