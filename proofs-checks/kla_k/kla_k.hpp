// KLA-K (Kalman Linear Attention, docs/papers.md) proof checks:
// the scalar (per-slot) linear-Gaussian model of KLA-K eqs. (7)/(9),
//   z_t = ā_t z_{t-1} + w_t,  w_t ~ N(0, p̄_t),     v_t = k_t z_t + ν_t,  ν_t ~ N(0, 1/Λv_t),
// and two computations of its filtering posterior that share nothing with the
// paper's information-form formulas: the textbook covariance-form Kalman filter
// (gain K_t, variance Σ_t) and the batch posterior of the joint Gaussian of
// (z_0 … z_T, v_1 … v_T) by a dense Cholesky solve (support/dense.hpp). The
// entries implement the printed formulas themselves (filter.cpp, scans.cpp,
// layer.cpp) and compare.
// Heavy (MPFR): included only by this folder's entry translation units.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "proofs-checks/support.hpp"
#include "proofs-checks/support/dense.hpp"

namespace ttr::proofs::klak {

using dense::Mat;
using dense::rel_err;  // |x − y|/|y| (|x − y| when y = 0)

std::vector<Entry> filter_entries();  // eq. (8), Thm 1, eqs. (16)-(18), Thm 2, eq. (19), Cor. 2.2, eqs. (20)-(21)
std::vector<Entry> scan_entries();    // Cor. 1.1, Cor. 2.1
std::vector<Entry> layer_entries();   // eqs. (22)-(23), Table 3, Thm 3, App. E.4

// One token as seen by one state slot: dynamics and evidence (any exact or
// multiprecision scalar S: mpfr, or GMP rationals for exact one-step checks).
template <class S>
struct TokenT {
  S a, p;   // ā_t ∈ (0, 1], p̄_t ≥ 0
  S k, lv;  // observation operator k_t, value precision Λv_t > 0
  S v;      // observation v_t
  S phi() const { return S(k * k * lv); }  // φ_t = k_t² Λv_t (Thm 1)
};
using Token = TokenT<mp>;

// One covariance-form Kalman step from (μ_{t-1}, Σ_{t-1}): predict Σ⁻ = ā²Σ + p̄,
// μ⁻ = āμ; gain K = Σ⁻k/(k²Σ⁻ + 1/Λv); μ = μ⁻ + K(v − kμ⁻), Σ = (1 − Kk)Σ⁻.
template <class S>
void covariance_step(const TokenT<S>& tok, S& mean, S& var) {
  const S var_prior = tok.a * tok.a * var + tok.p;
  const S mean_prior = tok.a * mean;
  const S innovation_var = tok.k * tok.k * var_prior + 1 / tok.lv;
  const S gain = var_prior * tok.k / innovation_var;
  mean = mean_prior + gain * (tok.v - tok.k * mean_prior);
  var = (1 - gain * tok.k) * var_prior;
}

// The regimes the brief asks for: ā down to 1e-24 and p̄ = 0, alone and together.
enum class Regime { generic, no_process_noise, tiny_decay, tiny_decay_no_noise, unit_decay };
inline constexpr Regime kRegimes[] = {Regime::generic, Regime::no_process_noise, Regime::tiny_decay,
                                      Regime::tiny_decay_no_noise, Regime::unit_decay};
std::string name(Regime r);

double uniform(std::mt19937_64& rng, double lo, double hi);
double log_uniform(std::mt19937_64& rng, double lo, double hi);

// (ā, p̄) of one slot in regime r; k, Λv, v drawn fresh per token.
struct Dynamics {
  double a, p;
};
Dynamics draw_dynamics(std::mt19937_64& rng, Regime r);
Token draw_token(std::mt19937_64& rng, const Dynamics& dyn);
// T tokens; time-varying dynamics (a fresh draw per token) when `varying`.
std::vector<Token> draw_tokens(std::mt19937_64& rng, Regime r, int T, bool varying);

// Prior N(μ_0, 1/λ_0) of z_0.
struct Prior {
  mp lambda, mu;
};
Prior draw_prior(std::mt19937_64& rng);

// Posterior means and variances of z_t given v_1..v_t, t = 0 … T (t = 0: the prior).
struct Posterior {
  std::vector<mp> mean, var;
};

// covariance_step over the tokens from the prior.
Posterior covariance_filter(const Prior& prior, const std::vector<Token>& tokens);

// Batch: E[z_t | v_1..v_t] and Var[z_t | v_1..v_t] from the joint Gaussian (dense Cholesky).
Posterior joint_gaussian_posterior(const Prior& prior, const std::vector<Token>& tokens);

// The largest value seen and the witness that showed it.
struct Worst {
  double value = 0;
  std::string witness;
  void see(double v, const std::string& w) {
    if (!(v <= value) || witness.empty()) {  // NaN counts as worse than anything
      value = v;
      witness = w;
    }
  }
};

std::string fmt(double x);

}  // namespace ttr::proofs::klak
