#include "oracles/layers/gka.hpp"
#include "oracles/domain.hpp"
#include "oracles/spec.hpp"

namespace ttr::layers {
using namespace spec_common;

GkaOptions gka_options(const Config& cfg) {
  GkaOptions o;
  const std::string& s = cfg.text("solver");
  o.solver = s == "exact" ? GkaSolver::exact : s == "chebyshev" ? GkaSolver::chebyshev : GkaSolver::cg;
  o.a = cfg.number("a");
  o.fixed_lambda = cfg.has("lambda");
  if (o.fixed_lambda) o.lambda = cfg.number("lambda");
  o.iters = static_cast<int>(cfg.number("iters"));
  o.omega0 = cfg.number("omega0");
  return o;
}

LayerSpec spec_gka() {
  const auto diag = [](const char* n, const char* doc) {
    // Diagnostics of the solve: compared forward, but the backward direction
    // takes no cotangent for them (GKA's gradients flow through o, ht and hkk).
    return TensorSpec{n,    {"B", "T", "H"}, true, Range::any(), Role::value, doc, false, true, false,
                      "a diagnostic of the solve: the backward direction takes cotangents of o, ht and hkk only"};
  };
  return {
      "gka",
      "Gated KalmaNet: fading-memory ridge regression solved at every token",
      "H_t = γ_t H_{t-1} + β_t k_t k_tᵀ;  S_t = γ_t S_{t-1} + β_t k_t v_tᵀ;  λ_t = a‖H_t‖_F;  "
      "(H_t + λ_t I) x_t = scale·q_t;  q̃_t = scale·q_t + α_t (x_t − scale·q_t);  o_t = S_tᵀ q̃_t",
      {q(), k(), v(), g_scalar("log γ_t, the forgetting gate of H and S"),
       {"beta", {"B", "T", "H"}, false, Range::closed(0.0, 1.0), Role::gate, "write gate β_t (default 1)"},
       {"alpha", {"B", "T", "H"}, false, Range::closed(0.0, 1.0), Role::gate,
        "α-connection (default absent: q̃ = x)"},
       h0(),
       {"hkk0", {"B", "H", "K", "K"}, false, Range::any(), Role::psd_matrix,
        "initial H_0 (default 0; symmetric positive semidefinite)", true}},
      {{"o", {"B", "T", "H", "V"}, true, Range::any(), Role::value, "outputs o_t = S_tᵀ q̃_t"}, ht(),
       {"hkk", {"B", "H", "K", "K"}, true, Range::any(), Role::state, "final H_T"},
       diag("lambda", "λ_t"), diag("fro", "‖H_t‖_F"),
       {"kappa", {"B", "T", "H"}, true, Range::any(), Role::value,
        "condition number of H_t + λ_t I, from float64 eigenvalues of the tier's H_t (1 where H_t = 0); "
        "a diagnostic: relative error ~K·2^-53·κ, not enclosed by --certified",
        false, false},
       {"resid", {"B", "T", "H"}, true, Range::any(), Role::value,
        "‖(H_t + λ_t I) x_t − scale·q_t‖ / ‖scale·q_t‖ in the working arithmetic: describes the solver and the "
        "arithmetic (≈ 2^-p for solver=exact), so it is neither enclosed by --certified nor compared across precisions",
        false, false}},
      {scale(), l2norm_qk(false),
       {"a", KeyType::number, "0.02", false, Range::positive(), {}, "adaptive ridge strength: λ_t = a‖H_t‖_F (eq. (4))"},
       {"solver", KeyType::choice, "exact", false, Range::any(), {"exact", "chebyshev", "cg"},
        "exact (Cholesky in the working precision), chebyshev (Alg. 1), cg (from 0)"},
       {"iters", KeyType::integer, "30", false, Range::closed(0, 100000), {}, "iterations r of chebyshev or cg"},
       {"omega0", KeyType::number, "2", false, Range::closed(0.0, 2.0), {},
        "starting weight ω_0 of Alg. 1's schedule ω_i = 4/(4 − ρ²ω_{i-1})"},
       {"lambda", KeyType::number, std::nullopt, false, Range::positive(), {},
        "fixed λ > 0 instead of the adaptive a‖H_t‖_F"},
       {"chebyshev_backward", KeyType::choice, "unrolled", false, Range::any(), {"unrolled", "alg2"},
        "sequential backward, solver=chebyshev only (the forward ignores it; the chunk backward always runs Alg. "
        "2): unrolled (reverse pass over the stored iterates) or alg2 (GKA Alg. 2 as derived: dq by Lemma 2, the "
        "rest by reversing the iteration, nothing stored); the same gradient, two independent routes"}},
      {"GKA eq. (3)", "GKA eq. (4)", "GKA eq. (CH)", "GKA Alg. 1", "GKA Fig. 2", "GKA App. F.3"},
      {"GKA writes U_t = Σ v kᵀ (V×K) and y = U x; we keep FLA's K×V S_t = U_tᵀ and o_t = S_tᵀ q̃_t",
       "Alg. 1 as printed initialises ω_0 = 0; its text (App. B.1), Lemma 3 and hybrid-model-factory use ω_0 = 2: "
       "our default (omega0 = 0 reproduces the printed line)",
       "hybrid-model-factory's gka_chebyshev_gla multiplies k and v by (β + 1e-6), so H and S receive (β+1e-6)²: "
       "to reproduce it pass beta = (β_hmf + 1e-6)²; it also L2-normalises q and k (x/(‖x‖+1e-6)) outside the op",
       "hybrid-model-factory solves with the unscaled q and applies scale = K^-1/2 in the readout, and mixes "
       "q̃ = q + α(x − q) with the unscaled q: equal to ours in exact arithmetic since λ_t does not depend on q",
       "hybrid-model-factory has only the Chebyshev solver, no fixed λ, and returns inf/NaN where H_t = 0; we "
       "take x_t = 0 there (next note)",
       "where H_t = 0 under the adaptive λ (nothing written yet, so λ_t = 0 and the system reads 0·x = scale·q_t), "
       "x_t = 0 and kappa = 1: then S_t = 0 and o_t = 0 when h0 = 0, but a nonzero h0 survives decayed in S_t and "
       "the α-connection reads it, o_t = (1 − α_t) S_tᵀ (scale·q_t)",
       "solver=chebyshev starts Alg. 1 from ξ_{-1} = 0 and ξ_0 = 2 (scale·q_t)/(L + μ) with L = ‖H_t‖_F + λ_t, "
       "μ = λ_t (under a fixed λ too); solver=cg starts from x = 0; both run `iters` steps, CG fewer only when its "
       "residual is exactly 0",
       "L = ‖H_t‖_F + λ_t and μ = λ_t bound the spectrum of H_t + λ_t I (eq. (4)), so κ_t <= (a+1)/a"},
  };
}

// The inputs its forms are guaranteed finite on (docs/domains/gka.md).
LayerDomain domain_gka(const LayerSpec& s) { return domains::gka(s); }

}  // namespace ttr::layers
