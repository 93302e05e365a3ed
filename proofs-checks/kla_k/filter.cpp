// KLA-K entries for one scalar slot of the filter: the OU discretisation
// (eq. (8)), the precision track (Thm 1, eqs. (16)-(18)), the information mean
// (Thm 2, eq. (19)), the moment-form mean (Cor. 2.2, eq. (20)) and its
// least-squares reading (eq. (21)).
//
// One-step identities are checked exactly over GMP rationals (every input is a
// double, hence a dyadic rational; the formulas only add, multiply, divide), so
// "holds" there means equality, tolerance 0, in every regime including
// ā = 1e-24 and p̄ = 0. Paths over T tokens are checked in MPFR at opt.bits
// against the batch posterior of the joint Gaussian (dense Cholesky), with
// tolerance exact_tolerance(bits): the dense solve has size ≤ 12 and the data
// keep its condition number below ~1e4 (λ0 ∈ [0.2, 5], Λv ∈ [0.2, 3],
// |k| ≤ 1.5, p̄ ≤ 1), far inside the 48 bits that tolerance leaves.
#include <gmp.h>

#include <boost/multiprecision/gmp.hpp>
#include <cmath>

#include "proofs-checks/kla_k/printed.hpp"

namespace ttr::proofs::klak {
namespace {

using Q = boost::multiprecision::mpq_rational;

Q exact(const mp& x) {  // x holds a double exactly (all draws do)
  Q q;
  mpq_set_d(q.backend().data(), to_d(x));
  return q;
}
TokenT<Q> exact(const Token& t) { return {exact(t.a), exact(t.p), exact(t.k), exact(t.lv), exact(t.v)}; }

double rel(const Q& x, const Q& y) {
  const Q d = abs(x - y);
  return (y == 0 ? d : Q(d / abs(y))).convert_to<double>();
}

// A random one-step situation: the state after t − 1 tokens (any precision,
// any mean) and token t, in regime r.
struct Step {
  TokenT<Q> tok;
  Q lam_prev, mu_prev;
  std::string witness;
};
Step draw_step(std::mt19937_64& rng, Regime r, int i) {
  const Token t = draw_token(rng, draw_dynamics(rng, r));
  const double lam = log_uniform(rng, 1e-3, 1e3), mu = uniform(rng, -2, 2);
  Step s{exact(t), exact(mp(lam)), exact(mp(mu)), {}};
  s.witness = "regime " + name(r) + ", point " + std::to_string(i) + ": a=" + fmt(to_d(t.a)) + " p=" +
              fmt(to_d(t.p)) + " k=" + fmt(to_d(t.k)) + " lv=" + fmt(to_d(t.lv)) + " v=" + fmt(to_d(t.v)) +
              " lambda_prev=" + fmt(lam) + " mu_prev=" + fmt(mu);
  return s;
}

int one_step_points(const ProofOptions& opt) { return opt.full ? 400 : 40; }  // per regime

// Runs `diff(step)` (a relative discrepancy, exactly 0 when the identity holds)
// at random steps of every regime.
template <class F>
Evidence exact_one_step(const ProofOptions& opt, const std::string& id, const std::string& measure, F diff) {
  auto rng = entry_rng(opt, id);
  Worst w;
  int n = 0, nonzero = 0;
  for (Regime r : kRegimes)
    for (int i = 0; i < one_step_points(opt); ++i, ++n) {
      const Step s = draw_step(rng, r, i);
      const double d = diff(s);
      nonzero += d != 0;
      w.see(d, s.witness);
    }
  return holds_if(w.value, 0.0, measure, w.witness,
                  std::to_string(n) + " random steps over 5 regimes (generic, p=0, a=1e-24, a=1e-24&p=0, a=1); " +
                      std::to_string(nonzero) + " not exactly equal");
}

// ------------------------------------------------------------------ eq. (8)

// exp(A) by scaling and squaring of the Taylor series, to ~2^-(bits+16).
Mat<mp> expm(Mat<mp> A, unsigned bits) {
  using dense::max_abs;
  int squarings = 0;
  while (max_abs(A.values()) > mp(0.25)) {
    for (mp& e : A.values()) e = e / 2;
    ++squarings;
  }
  const mp eps = pow(mp(2), -static_cast<int>(bits) - 16);
  Mat<mp> sum = Mat<mp>::identity(2), term = Mat<mp>::identity(2);
  for (int j = 1; j < 4096; ++j) {
    term = term * A;
    for (mp& e : term.values()) e = e / j;
    sum += term;
    if (max_abs(term.values()) <= eps * max_abs(sum.values())) break;
  }
  for (int s = 0; s < squarings; ++s) sum = sum * sum;
  return sum;
}

Evidence eq8(const ProofOptions& opt) {
  const std::string id = "kla_k.eq8.ou_exact_discretisation";
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  Worst w;
  int n = 0;
  const int per_case = opt.full ? 200 : 20;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < per_case; ++i, ++n) {
      // Cases: generic; p = 0 (p̄ = 0); aΔt = 24 ln 10 (ā = 1e-24); aΔt ~ 1e-8.
      mp a = log_uniform(rng, 0.01, 5.0), dt = log_uniform(rng, 1e-3, 3.0), p = uniform(rng, 0.1, 3.0);
      if (c == 1) p = 0;
      if (c == 2) dt = 24 * log(mp(10)) / a;
      if (c == 3) dt = mp(log_uniform(rng, 1e-9, 1e-7)) / a;
      // Printed eq. (8).
      const mp a_bar = exp(-a * dt), p_bar = p * p / (2 * a) * (1 - exp(-2 * a * dt));
      // Independent: the OU SDE dz = −a z dt + p dW discretised exactly by Van
      // Loan's block exponential exp(Δt [[a, p²], [0, −a]]) = [[·, G], [0, Φ]]:
      // transition Φ = e^{−aΔt}, noise Q_d = Φ·G = ∫_0^Δt e^{−2a s} p² ds.
      const Mat<mp> E = expm(Mat<mp>(2, 2, {a * dt, p * p * dt, mp(0), -a * dt}), opt.bits);
      const mp a_ref = E(1, 1), p_ref = E(1, 1) * E(0, 1);
      const double d = std::max(to_d(rel_err(a_bar, a_ref)), to_d(rel_err(p_bar, p_ref)));
      w.see(d, "case " + std::to_string(c) + " (0 generic, 1 p=0, 2 a_bar=1e-24, 3 a*dt~1e-8): a=" +
                   fmt(to_d(a)) + " dt=" + fmt(to_d(dt)) + " p=" + fmt(to_d(p)) + " a_bar=" + fmt(to_d(a_bar)));
    }
  return holds_if(w.value, exact_tolerance(opt.bits),
                  "max rel. err. of printed (a_bar, p_bar) vs Van Loan block exponential (Taylor, scaling and squaring)",
                  w.witness, std::to_string(n) + " points, 4 cases");
}

// ------------------------------------------------------------------ Thm 1, eqs. (16)-(18)

Evidence thm1(const ProofOptions& opt) {
  const std::string id = "kla_k.thm1.precision_path_vs_batch_posterior";
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int T = opt.full ? 12 : 6, reps = opt.full ? 20 : 3;
  Worst w;
  int n = 0;
  for (Regime r : kRegimes)
    for (int rep = 0; rep < reps; ++rep) {
      const std::vector<Token> tokens = draw_tokens(rng, r, T, true);
      const Prior prior = draw_prior(rng);
      const Posterior post = joint_gaussian_posterior(prior, tokens);
      mp lam = prior.lambda;
      for (int t = 1; t <= T; ++t, ++n) {
        lam = printed_eq16(tokens[t - 1], lam);  // λ_t = M_t(λ_{t-1})
        w.see(to_d(rel_err(lam, 1 / post.var[t])),
              "regime " + name(r) + ", sequence " + std::to_string(rep) + ", t=" + std::to_string(t));
      }
    }
  return holds_if(w.value, exact_tolerance(opt.bits),
                  "max rel. err. of lambda_t = M_t(lambda_{t-1}) vs 1/Var(z_t | v_1..t) of the joint Gaussian",
                  w.witness,
                  std::to_string(n) + " (sequence, t) pairs, T=" + std::to_string(T) +
                      ", time-varying dynamics, 5 regimes");
}

Evidence eq16(const ProofOptions& opt) {
  return exact_one_step(opt, "kla_k.eq16.mobius_step", "exact |eq.(16) - 1/Sigma_t (covariance-form KF)| relative",
                        [](const Step& s) {
                          Q mean = s.mu_prev, var = 1 / s.lam_prev;
                          covariance_step(s.tok, mean, var);
                          return rel(printed_eq16(s.tok, s.lam_prev), 1 / var);
                        });
}

Evidence eq17(const ProofOptions& opt) {
  // The matrix itself (not only its Möbius action, which fixes it up to scale):
  // M_t must be the product of the update matrix [[1, φ], [0, 1]] (λ ↦ λ + φ)
  // and the predict matrix [[1, 0], [p̄, ā²]] (λ ↦ λ/(p̄λ + ā²) = 1/(ā²Σ + p̄)),
  // entry for entry; and the predict matrix must act as the covariance predict.
  return exact_one_step(opt, "kla_k.eq17.predict_update_factorisation",
                        "exact max entry rel. diff. of eq.(17) M_t vs [[1,phi],[0,1]]*[[1,0],[p,a^2]], and of the "
                        "predict matrix's action vs 1/(a^2 Sigma + p)",
                        [](const Step& s) {
                          const TokenT<Q>& t = s.tok;
                          const Mat<Q> update(2, 2, {Q(1), t.phi(), Q(0), Q(1)});
                          const Mat<Q> predict(2, 2, {Q(1), Q(0), t.p, Q(t.a * t.a)});
                          const Mat<Q> M = printed_M(t), UP = update * predict;
                          double d = std::max({rel(M(0, 0), UP(0, 0)), rel(M(0, 1), UP(0, 1)), rel(M(1, 0), UP(1, 0)),
                                               rel(M(1, 1), UP(1, 1))});
                          const Q var_prior = t.a * t.a / s.lam_prev + t.p;
                          return std::max(d, rel(mobius(predict, s.lam_prev), Q(1 / var_prior)));
                        });
}

Evidence eq18(const ProofOptions& opt) {
  return exact_one_step(opt, "kla_k.eq18.gated_precision",
                        "exact |eq.(18) - 1/Sigma_t (covariance-form KF)| relative, and |rho_t lambda_{t-1} - "
                        "1/Sigma_t^prior| relative",
                        [](const Step& s) {
                          Q mean = s.mu_prev, var = 1 / s.lam_prev;
                          const Q var_prior = s.tok.a * s.tok.a * var + s.tok.p;
                          covariance_step(s.tok, mean, var);
                          // The history term ρ_t λ_{t-1} is the prior precision (read so in eq. (21)).
                          const Q rho_lam = s.lam_prev / (s.tok.a * s.tok.a + s.tok.p * s.lam_prev);
                          return std::max(rel(printed_eq18(s.tok, s.lam_prev), 1 / var), rel(rho_lam, 1 / var_prior));
                        });
}

// ------------------------------------------------------------------ Thm 2, eq. (19), Cor. 2.2, eq. (20)

// Paths in MPFR against the batch posterior: `which` = 0 Thm 2 (η), 1 Cor. 2.2 (μ).
Evidence mean_path(const ProofOptions& opt, const std::string& id, int which) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int T = opt.full ? 12 : 6, reps = opt.full ? 20 : 3;
  Worst w;
  int n = 0;
  for (Regime r : kRegimes)
    for (int rep = 0; rep < reps; ++rep) {
      const std::vector<Token> tokens = draw_tokens(rng, r, T, true);
      const Prior prior = draw_prior(rng);
      const Posterior post = joint_gaussian_posterior(prior, tokens);
      // Thm 2 takes the precision path as given: the batch one, so that only eq. (19) is under test.
      mp eta = prior.lambda * prior.mu, mu = prior.mu, lam_info = prior.lambda, eta_info = eta;
      for (int t = 1; t <= T; ++t, ++n) {
        const Token& tok = tokens[t - 1];
        const mp lam_prev = 1 / post.var[t - 1], lam = 1 / post.var[t];
        const std::string where = "regime " + name(r) + ", sequence " + std::to_string(rep) + ", t=" + std::to_string(t);
        if (which == 0) {
          eta = printed_eq19(tok, lam_prev, eta);
          w.see(to_d(rel_err(eta, post.mean[t] / post.var[t])), where);
        } else {
          // Cor. 2.2: μ_t by eq. (20), against the batch mean and against η_t/λ_t of
          // the information recursion (eqs. (18), (19)) it is stated for.
          mu = printed_eq20(tok, lam, mu);
          eta_info = printed_eq19(tok, lam_info, eta_info);
          lam_info = printed_eq18(tok, lam_info);
          w.see(std::max(to_d(rel_err(mu, post.mean[t])), to_d(rel_err(mu, eta_info / lam_info))), where);
        }
      }
    }
  const std::string measure =
      which == 0 ? "max rel. err. of eta_t by eq. (19) vs E[z_t|v_1..t]/Var[z_t|v_1..t] of the joint Gaussian"
                 : "max rel. err. of mu_t by eq. (20) vs E[z_t|v_1..t] (joint Gaussian) and vs eta_t/lambda_t of "
                   "eqs. (18)-(19)";
  return holds_if(w.value, exact_tolerance(opt.bits), measure, w.witness,
                  std::to_string(n) + " (sequence, t) pairs, T=" + std::to_string(T) +
                      ", time-varying dynamics, 5 regimes, prior mean != 0");
}

Evidence eq19(const ProofOptions& opt) {
  return exact_one_step(opt, "kla_k.eq19.affine_step", "exact |eq.(19) - mu_t/Sigma_t (covariance-form KF)| relative",
                        [](const Step& s) {
                          Q mean = s.mu_prev, var = 1 / s.lam_prev;
                          covariance_step(s.tok, mean, var);
                          return rel(printed_eq19(s.tok, s.lam_prev, Q(s.lam_prev * s.mu_prev)), Q(mean / var));
                        });
}

Evidence eq20(const ProofOptions& opt) {
  return exact_one_step(opt, "kla_k.eq20.gated_mean_step",
                        "exact |eq.(20) - mu_t (covariance-form KF, gain K_t)| relative", [](const Step& s) {
                          Q mean = s.mu_prev, var = 1 / s.lam_prev;
                          covariance_step(s.tok, mean, var);
                          return rel(printed_eq20(s.tok, Q(1 / var), s.mu_prev), mean);
                        });
}

// ------------------------------------------------------------------ eq. (21)

Evidence eq21(const ProofOptions& opt) {
  const std::string id = "kla_k.eq21.argmin";
  auto rng = entry_rng(opt, id);
  Worst w;
  int n = 0, worse = 0, tried = 0;
  for (Regime r : kRegimes)
    for (int i = 0; i < one_step_points(opt); ++i, ++n) {
      const Step s = draw_step(rng, r, i);
      const TokenT<Q>& t = s.tok;
      const auto L = [&](const Q& mu) { return printed_eq21_objective(t, s.lam_prev, s.mu_prev, mu); };
      // The claimed minimiser: eq. (20) with λ_t from eq. (18).
      const Q mu_t = printed_eq20(t, printed_eq18(t, s.lam_prev), s.mu_prev);
      // The true minimiser of the printed objective, from the objective alone:
      // L is a quadratic in μ, so the vertex of the parabola through three of its
      // values is exact (over Q) for any spacing h.
      const Q x0 = t.a * s.mu_prev, h = 1;
      const Q lp = L(x0 + h), lm = L(x0 - h), l0 = L(x0);
      const Q vertex = x0 - h * (lp - lm) / (2 * (lp - 2 * l0 + lm));
      // And the posterior mean it should equal (covariance-form KF).
      Q mean = s.mu_prev, var = 1 / s.lam_prev;
      covariance_step(t, mean, var);
      w.see(std::max(rel(mu_t, vertex), rel(mu_t, mean)), s.witness);
      // Perturbation search: no μ_t + δ may do better, at scales 1e-12 … 1e3.
      const Q best = L(mu_t);
      for (int j = -12; j <= 3; ++j, ++tried) {
        Q delta;
        mpq_set_d(delta.backend().data(), uniform(rng, -1, 1) * std::pow(10.0, j));
        if (L(mu_t + delta) < best) ++worse;
      }
    }
  Evidence e = holds_if(w.value, 0.0,
                        "exact |mu_t (eq. 20) - argmin L_t (parabola vertex of the printed eq. (21))| and |mu_t - "
                        "KF posterior mean|, relative, over GMP rationals",
                        w.witness,
                        std::to_string(n) + " steps over 5 regimes; " + std::to_string(tried) +
                            " perturbations mu_t + delta (|delta| 1e-12..1e3): " + std::to_string(worse) +
                            " lowered L_t");
  e.reproduced = e.reproduced && worse == 0;
  return e;
}

}  // namespace

std::vector<Entry> filter_entries() {
  const std::string exact_q = "exact equality over GMP rationals (inputs are doubles), ";
  std::vector<Entry> v;
  v.push_back({"kla_k.eq8.ou_exact_discretisation", Paper::KLA_K, "eq. (8)",
               "exact discretisation of the OU prior dz = -a z dt + p dW: a_bar = exp(-a dt), p_bar = p^2/(2a) (1 - "
               "exp(-2 a dt))",
               Method::exact_identity,
               "MPFR opt.bits; printed closed forms vs Van Loan's block exponential exp(dt [[a, p^2], [0, -a]]) by "
               "Taylor series with scaling and squaring (transition = lower-right entry, noise = product with "
               "upper-right); 20 points x 4 cases (generic, p=0, a dt = 24 ln 10 i.e. a_bar = 1e-24, a dt ~ 1e-8)",
               Status::holds, "", false, eq8});
  v.push_back({"kla_k.thm1.precision_path_vs_batch_posterior", Paper::KLA_K, "Thm 1",
               "the posterior precision of the diagonal linear-Gaussian model (eqs. (7), (9)) follows the Möbius map "
               "lambda_t = M_t(lambda_{t-1}) of eqs. (16)-(17)",
               Method::exact_identity,
               "MPFR opt.bits; lambda_t iterated by eqs. (16)-(17) vs 1/Var(z_t | v_1..t) from dense Cholesky "
               "conditioning of the joint Gaussian of (z_0..z_T, v_1..v_T); T=6, 3 sequences x 5 regimes "
               "(generic, p=0, a=1e-24, a=1e-24&p=0, a=1), time-varying a_t, p_t",
               Status::holds, "", false, thm1});
  v.push_back({"kla_k.eq16.mobius_step", Paper::KLA_K, "eq. (16)",
               "lambda_t = (alpha_t lambda_{t-1} + beta_t)/(gamma_t lambda_{t-1} + delta_t)", Method::exact_identity,
               exact_q + "one step from random lambda_{t-1} in [1e-3, 1e3] vs the covariance-form Kalman step "
                         "(Sigma = 1/lambda); 40 points x 5 regimes",
               Status::holds, "", false, eq16});
  v.push_back({"kla_k.eq17.predict_update_factorisation", Paper::KLA_K, "eq. (17)",
               "M_t = [[1 + p_bar phi, a_bar^2 phi], [p_bar, a_bar^2]], phi = k^2 Lambda^v", Method::exact_identity,
               exact_q + "M_t entrywise vs update [[1, phi], [0, 1]] times predict [[1, 0], [p_bar, a_bar^2]], and "
                         "the predict matrix's Möbius action vs 1/(a_bar^2 Sigma + p_bar); 40 points x 5 regimes",
               Status::holds, "", false, eq17});
  v.push_back({"kla_k.eq18.gated_precision", Paper::KLA_K, "eq. (18)",
               "lambda_t = (a_bar^2 + p_bar lambda_{t-1})^{-1} lambda_{t-1} + phi_t; rho_t lambda_{t-1} is the prior "
               "precision",
               Method::exact_identity,
               exact_q + "vs the covariance-form Kalman step's 1/Sigma_t, and rho_t lambda_{t-1} vs "
                         "1/Sigma_t^prior; 40 points x 5 regimes",
               Status::holds, "", false, eq18});
  v.push_back({"kla_k.thm2.information_mean_path", Paper::KLA_K, "Thm 2",
               "given the precision path, eta_t = lambda_t mu_t evolves affinely: eta_t = f_t eta_{t-1} + k_t "
               "Lambda^v_t v_t, f_t = a_bar/(a_bar^2 + p_bar lambda_{t-1})",
               Method::exact_identity,
               "MPFR opt.bits; eta_t iterated by eq. (19) with the batch precision path vs E[z_t|v]/Var[z_t|v] of "
               "the joint Gaussian (dense Cholesky); T=6, 3 sequences x 5 regimes, mu_0 != 0",
               Status::holds, "", false, [](const ProofOptions& o) {
                 return mean_path(o, "kla_k.thm2.information_mean_path", 0);
               }});
  v.push_back({"kla_k.eq19.affine_step", Paper::KLA_K, "eq. (19)",
               "eta_t = (a_bar^2 + p_bar lambda_{t-1})^{-1} a_bar eta_{t-1} + k_t Lambda^v_t v_t",
               Method::exact_identity,
               exact_q + "one step vs mu_t/Sigma_t of the covariance-form Kalman step, random (lambda_{t-1}, "
                         "mu_{t-1}); 40 points x 5 regimes",
               Status::holds, "", false, eq19});
  v.push_back({"kla_k.cor2_2.moment_mean_path", Paper::KLA_K, "Cor. 2.2",
               "mu_t = eta_t/lambda_t satisfies the gated recurrence (20)", Method::exact_identity,
               "MPFR opt.bits; mu_t iterated by eq. (20) vs the batch posterior mean (joint Gaussian, dense "
               "Cholesky) and vs eta_t/lambda_t of eqs. (18)-(19); T=6, 3 sequences x 5 regimes",
               Status::holds, "", false, [](const ProofOptions& o) {
                 return mean_path(o, "kla_k.cor2_2.moment_mean_path", 1);
               }});
  v.push_back({"kla_k.eq20.gated_mean_step", Paper::KLA_K, "eq. (20)",
               "mu_t = a_bar (1 - k_t^2 Lambda^v_t/lambda_t) mu_{t-1} + k_t Lambda^v_t v_t/lambda_t",
               Method::exact_identity,
               exact_q + "one step vs the covariance-form Kalman mean mu_{t-1}^prior + K_t (v_t - k_t "
                         "mu^prior); 40 points x 5 regimes",
               Status::holds, "", false, eq20});
  v.push_back({"kla_k.eq21.argmin", Paper::KLA_K, "eq. (21)",
               "mu_t of eq. (20) = argmin_mu Lambda^v_t (v_t - k_t mu)^2 + rho_t lambda_{t-1} (mu - a_bar "
               "mu_{t-1})^2",
               Method::inequality_search,
               exact_q + "argmin of the printed objective as the exact vertex of the parabola through L(x0), "
                         "L(x0 +- 1), compared with eq. (20) and the KF mean; then 16 perturbations per point "
                         "(|delta| = 1e-12..1e3) must not lower L; 40 points x 5 regimes",
               Status::holds, "", false, eq21});
  return v;
}

}  // namespace ttr::proofs::klak
