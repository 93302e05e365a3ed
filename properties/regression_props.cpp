// Monotonicity and bounds of the regression layers: GKA, KLA-K, pdn_exact, and
// the Chebyshev weights of GKA Alg. 1.
//
// GKA eq. (CH): H_t = γ_t H_{t-1} + β_t k_t k_tᵀ with H_{t-1} ⪰ 0. For PSD A, B,
//   ‖A + B‖_F² = ‖A‖_F² + ‖B‖_F² + 2 tr(AB) ≥ max(‖A‖_F², ‖B‖_F²) (tr(AB) ≥ 0), and
//   ‖A + B‖_F ≤ ‖A‖_F + ‖B‖_F, with ‖k kᵀ‖_F = ‖k‖²:
//     max(γ_t‖H_{t-1}‖_F, β_t‖k_t‖²) ≤ ‖H_t‖_F ≤ γ_t‖H_{t-1}‖_F + β_t‖k_t‖².
//   GKA eq. (4): λ_t = a‖H_t‖_F and spec(H_t + λ_t I) ⊂ [λ_t, ‖H_t‖_F + λ_t], so
//   κ_t ≤ (a + 1)/a (fixed λ: κ_t ≤ (‖H_t‖_F + λ)/λ).
// GKA Alg. 1 weights ω_i = 4/(4 − ρ²ω_{i-1}), ρ = (L − μ)/(L + μ) ∈ [0, 1): the map
//   f(ω) = 4/(4 − ρ²ω) is increasing on [0, 2] with f([0, 2]) ⊂ [1, 2], so the
//   sequence is monotone (non-increasing from ω_0 = 2, GKA Lemma 3; non-decreasing
//   from the printed ω_0 = 0) and ω_i ∈ [1, 2] for i ≥ 1. Rounding to nearest is
//   monotone, so the computed f is non-decreasing too and both hold exactly.
// KLA-K eq. (18): Λ_t = Λ_{t-1}/(ā² + p̄Λ_{t-1}) + φ_t, φ_t = k_n² λv_d ≥ 0.
//   p̄ = 0, ā ≤ 1: Λ_t = Λ_{t-1}/ā² + φ_t ≥ Λ_{t-1}: the precision never decreases
//   (exactly in floating point as well while Λ is finite: ā² ≤ 1 after rounding,
//   and every operation is monotone), and for a fixed query o_var_t = scale² Σ q²/Λ_t never increases.
//   p̄ > 0: Λ_{t-1}/(ā² + p̄Λ_{t-1}) < 1/p̄, so Λ_t < 1/p̄ + φ_t (bounded precision).
// pdn_exact (PDN Thm 3.1): S_t = argmin_S J_t(S), J_t(S) = Σ_{s≤t} ‖v_s − Sᵀk_s‖² + λ‖S‖_F².
//   J_t(S) ≥ J_{t-1}(S) for every S, so J_t* ≥ J_{t-1}*; and S_{t-1} is feasible for
//   J_t, so J_t* ≤ J_{t-1}* + ‖v_t − S_{t-1}ᵀk_t‖².
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/gen/layer_inputs.hpp"
#include "properties/support/run.hpp"
#include "reference/solvers/chebyshev.hpp"

namespace ttr::prop {
namespace {

constexpr double kSlack = 1e-12;

RC_GTEST_PROP(Gka, FrobeniusNormOfHSandwiched, ()) {
  const auto c = *gen::layer_case("gka");
  const auto r = run(c, kMpfr128);
  const auto& fro = r.values.at("fro");
  const Tensor<double>* beta = c.in.count("beta") ? &c.in.at("beta") : nullptr;
  for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
    for (std::int64_t h = 0; h < c.dims.at("H"); ++h) {
      double prev = c.in.count("hkk0") ? block_fro(c.in.at("hkk0"), b, h) : 0.0;
      for (std::int64_t t = 0; t < c.dims.at("T"); ++t) {
        const double gamma = std::exp(at3(c.in.at("g"), b, t, h)), bt = beta ? at3(*beta, b, t, h) : 1.0;
        const double kk = std::pow(row_norm(c.in.at("k"), b, t, h), 2), f = at3(fro, b, t, h);
        RC_ASSERT(f <= (gamma * prev + bt * kk) * (1 + kSlack));
        RC_ASSERT(f >= std::max(gamma * prev, bt * kk) * (1 - kSlack));
        prev = f;
      }
    }
}

RC_GTEST_PROP(Gka, RidgeAndConditionNumberBound, ()) {
  const auto c = *gen::layer_case("gka");
  const Config cfg = Config::make(find_layer("gka").spec, c.sets);
  const auto r = run(c, kFp64);
  const bool fixed = cfg.has("lambda");
  const double a = cfg.number("a");
  for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
    for (std::int64_t h = 0; h < c.dims.at("H"); ++h)
      for (std::int64_t t = 0; t < c.dims.at("T"); ++t) {
        const double f = at3(r.values.at("fro"), b, t, h), lam = at3(r.values.at("lambda"), b, t, h);
        const double kappa = at3(r.values.at("kappa"), b, t, h);
        const double want_lam = fixed ? cfg.number("lambda") : a * f;
        RC_ASSERT(std::fabs(lam - want_lam) <= 2 * kU * want_lam);
        if (lam == 0) continue;  // H_t = 0 under adaptive λ: κ is reported as 1
        const double bound = (f + lam) / lam;
        // κ comes from float64 eigenvalues: relative error ≲ K u κ (reference/solvers/spectrum.hpp).
        RC_ASSERT(kappa <= bound * (1 + 64 * kU * bound) * (1 + kSlack));
        if (!fixed) RC_ASSERT(bound <= (a + 1) / a * (1 + 4 * kU));
        // The exact solver is Cholesky: backward stable, so the relative residual
        // is ≤ c·K·u·κ; c·K = 64 covers K ≤ 4 with room.
        if (cfg.text("solver") == "exact") {
          const double q = row_norm(c.in.at("q"), b, t, h), res = at3(r.values.at("resid"), b, t, h);
          if (q > 0) RC_ASSERT(res <= 64 * kU * bound);
        }
      }
}

RC_GTEST_PROP(Gka, ChebyshevWeightsMonotoneAndInOneTwo, ()) {
  const double mu = *gen::log_uniform(-24, 24);
  const double kappa = *gen::one_of<double>({{1, rc::gen::just(1.0)}, {5, gen::log_uniform(0, 64)}});
  const double omega0 = *gen::one_of<double>(
      {{3, rc::gen::just(2.0)}, {2, rc::gen::just(0.0)}, {5, rc::gen::map(gen::uniform_int(0, 256), [](int i) { return i / 128.0; })}});
  const int iters = *gen::uniform_int(1, 199);
  RC_TAG(omega0 == 2.0 ? "omega0 = 2" : omega0 == 0.0 ? "omega0 = 0" : "omega0 in between");
  ChebyshevParams<double> p{mu * kappa, mu, iters, omega0};
  const double one = 1.0;
  const auto res = chebyshev_forward([](const double* x, double* y) { y[0] = x[0]; }, &one, 1, p);
  const auto& w = res.omega;
  RC_ASSERT(static_cast<int>(w.size()) == iters + 1);
  const bool up = w[1] >= w[0];
  for (int i = 1; i <= iters; ++i) {
    RC_ASSERT(w[i] >= 1.0 && w[i] <= 2.0);
    RC_ASSERT((up ? w[i] >= w[i - 1] : w[i] <= w[i - 1]));
  }
  if (omega0 == 2.0) RC_ASSERT(!up || w[1] == 2.0);  // Lemma 3: non-increasing from 2
}

gen::LayerCase kla_case(bool zero_noise) {
  gen::InputOptions opt;
  opt.optional_inputs = *gen::choose<bool>({{1, false}, {1, true}});
  auto c = *gen::layer_case("kla_kalman", opt);
  if (zero_noise)
    for (double& p : c.in.at("p_bar").data) p = 0;
  return c;
}

RC_GTEST_PROP(KlaKalman, PrecisionNeverDecreasesWithoutNoise, ()) {
  auto c = kla_case(true);
  // One query for every token: then o_var_t = scale² Σ_n q_n²/Λ_t is monotone too.
  const std::int64_t T = c.dims.at("T"), N = c.dims.at("N");
  auto& q = c.in.at("q");
  for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
    for (std::int64_t t = 1; t < T; ++t)
      for (std::int64_t h = 0; h < c.dims.at("H"); ++h)
        for (std::int64_t n = 0; n < N; ++n)
          q.data[((b * T + t) * c.dims.at("H") + h) * N + n] = q.data[((b * T + 0) * c.dims.at("H") + h) * N + n];
  const Arith a = *gen::choose_uniform<Arith>({kFp64, kMpfr128});
  RC_TAG(arith_name(a));
  std::vector<double> lam_prev;
  if (c.in.count("lambda_init")) lam_prev = c.in.at("lambda_init").data;
  else lam_prev.assign(static_cast<std::size_t>(c.dims.at("B") * c.dims.at("H") * N * c.dims.at("D")), 1.0);
  // fp64 only up to overflow: once Λ = inf, p̄Λ = 0·inf = NaN in ā² + p̄Λ and the
  // fp64 tier returns NaN (documented in the kla_kalman spec notes; MPFR has no
  // such limit). Slots are compared while the previous Λ is finite; o_var only
  // when no Λ overflowed.
  bool overflowed = false;
  for (std::int64_t len = 1; len <= T; ++len) {
    const auto r = run(prefix(c, len), a);
    const auto& lam = r.values.at("lambda_T").data;
    for (std::size_t e = 0; e < lam.size(); ++e) {
      if (a.tier == Tier::fp64 && !std::isfinite(lam_prev[e])) continue;
      RC_ASSERT(lam[e] >= lam_prev[e]);
      overflowed |= !std::isfinite(lam[e]);
    }
    lam_prev = lam;
    if (len == T && !(overflowed && a.tier == Tier::fp64)) {
      const auto& ov = r.values.at("o_var");  // [B, T, H, D]
      for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
        for (std::int64_t t = 1; t < T; ++t)
          for (std::int64_t h = 0; h < c.dims.at("H"); ++h)
            for (std::int64_t d = 0; d < c.dims.at("D"); ++d)
              RC_ASSERT(row(ov, b, t, h)[d] <= row(ov, b, t - 1, h)[d]);
    }
  }
  RC_CLASSIFY(overflowed, "Λ beyond double range");
}

RC_GTEST_PROP(KlaKalman, PrecisionBoundedWithNoise, ()) {
  auto c = kla_case(false);
  for (double& p : c.in.at("p_bar").data)
    if (p == 0) p = *gen::log_uniform(-24, 8);
  const auto r = run(c, kMpfr128);
  const std::int64_t T = c.dims.at("T"), H = c.dims.at("H"), N = c.dims.at("N"), D = c.dims.at("D");
  for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t d = 0; d < D; ++d) {
          const std::size_t slot = static_cast<std::size_t>((h * N + n) * D + d);
          const double phi = std::pow(row(c.in.at("k"), b, T - 1, h)[n], 2) * row(c.in.at("lambda_v"), b, T - 1, h)[d];
          const double lam = r.values.at("lambda_T").data[static_cast<std::size_t>(((b * H + h) * N + n) * D + d)];
          RC_ASSERT(lam <= (1 / c.in.at("p_bar").data[slot] + phi) * (1 + kSlack));
        }
}

// J_t(S) = Σ_{s<len} ‖v_s − Sᵀk_s‖² + λ‖S‖_F² for block (b, h) of S [B,H,K,V].
double ridge_objective(const gen::LayerCase& c, const Tensor<double>& S, std::int64_t len, double lambda,
                       std::int64_t b, std::int64_t h, double* magnitude) {
  const std::int64_t K = c.dims.at("K"), V = c.dims.at("V");
  const double* s = S.data.data() + (b * S.dim(1) + h) * K * V;
  double J = 0, m = 0;
  for (std::int64_t t = 0; t < len; ++t) {
    const double *k = row(c.in.at("k"), b, t, h), *v = row(c.in.at("v"), b, t, h);
    for (std::int64_t j = 0; j < V; ++j) {
      double pred = 0, pm = 0;
      for (std::int64_t i = 0; i < K; ++i) pred += s[i * V + j] * k[i], pm += std::fabs(s[i * V + j] * k[i]);
      J += (v[j] - pred) * (v[j] - pred);
      m += (std::fabs(v[j]) + pm) * (std::fabs(v[j]) + pm);
    }
  }
  for (std::int64_t e = 0; e < K * V; ++e) J += lambda * s[e] * s[e], m += lambda * s[e] * s[e];
  *magnitude = m;
  return J;
}

RC_GTEST_PROP(PdnExact, RidgeObjectiveValueNonDecreasing, ()) {
  gen::InputOptions opt;
  opt.optional_inputs = false;  // h0 = 0: S_t is the ridge solution (PDN Thm 3.1)
  opt.max_T = 12;
  const auto c = *gen::layer_case("pdn_exact", opt);
  const double lambda = Config::make(find_layer("pdn_exact").spec, c.sets).number("lambda");
  Tensor<double> S_prev({c.dims.at("B"), c.dims.at("H"), c.dims.at("K"), c.dims.at("V")}, 0.0);
  for (std::int64_t len = 1; len <= c.dims.at("T"); ++len) {
    const auto S = run(prefix(c, len), kMpfr128).values.at("ht");
    for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
      for (std::int64_t h = 0; h < c.dims.at("H"); ++h) {
        double m_prev, m_now, m_feas;
        const double J_prev = ridge_objective(c, S_prev, len - 1, lambda, b, h, &m_prev);
        const double J_now = ridge_objective(c, S, len, lambda, b, h, &m_now);
        const double J_feas = ridge_objective(c, S_prev, len, lambda, b, h, &m_feas);  // S_{t-1} in J_t
        // Evaluating J in double: relative error ≤ (K + 3)·len·u of the magnitude m
        // (sums of squares of |v| + Σ|s k|); rounding S_t to double raises J_t by
        // δᵀ(G + λI)δ ≥ 0 only (S_t is the minimiser), which the slack also covers.
        const double tol = 1e-12 * (m_prev + m_now + m_feas);
        RC_ASSERT(J_now >= J_prev - tol);
        RC_ASSERT(J_now <= J_feas + tol);
      }
    S_prev = S;
  }
}

}  // namespace
}  // namespace ttr::prop
