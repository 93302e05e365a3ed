// The scalar linear-Gaussian model behind KLA-K (eqs. (7), (9)) and its two
// independent posteriors (kla_k.hpp): covariance-form Kalman filter, and the
// dense conditioning of the joint Gaussian. Nothing here uses precisions or
// information means, so the paper's information-form formulas are checked
// against computations that do not contain them.
#include <cmath>
#include <cstdio>

#include "proofs-checks/kla_k/kla_k.hpp"

namespace ttr::proofs::klak {

std::string name(Regime r) {
  switch (r) {
    case Regime::generic: return "generic";
    case Regime::no_process_noise: return "p=0";
    case Regime::tiny_decay: return "a=1e-24";
    case Regime::tiny_decay_no_noise: return "a=1e-24,p=0";
    case Regime::unit_decay: return "a=1";
  }
  return "?";
}

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
double log_uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::exp(uniform(rng, std::log(lo), std::log(hi)));
}

Dynamics draw_dynamics(std::mt19937_64& rng, Regime r) {
  const double a = uniform(rng, 0.3, 1.0), p = log_uniform(rng, 1e-3, 1.0);
  switch (r) {
    case Regime::generic: return {a, p};
    case Regime::no_process_noise: return {a, 0.0};
    case Regime::tiny_decay: return {1e-24, p};
    case Regime::tiny_decay_no_noise: return {1e-24, 0.0};
    case Regime::unit_decay: return {1.0, p};
  }
  return {a, p};
}

Token draw_token(std::mt19937_64& rng, const Dynamics& dyn) {
  Token t;
  t.a = dyn.a;
  t.p = dyn.p;
  t.k = uniform(rng, -1.5, 1.5);
  t.lv = log_uniform(rng, 0.2, 3.0);
  t.v = uniform(rng, -1.0, 1.0);
  return t;
}

std::vector<Token> draw_tokens(std::mt19937_64& rng, Regime r, int T, bool varying) {
  std::vector<Token> out;
  Dynamics dyn = draw_dynamics(rng, r);
  for (int t = 0; t < T; ++t) {
    if (varying && t > 0) dyn = draw_dynamics(rng, r);
    out.push_back(draw_token(rng, dyn));
  }
  return out;
}

Prior draw_prior(std::mt19937_64& rng) {
  Prior p;
  p.lambda = log_uniform(rng, 0.2, 5.0);
  p.mu = uniform(rng, -2.0, 2.0);
  return p;
}

Posterior covariance_filter(const Prior& prior, const std::vector<Token>& tokens) {
  Posterior out;
  mp mean = prior.mu, var = 1 / prior.lambda;
  out.mean.push_back(mean);
  out.var.push_back(var);
  for (const Token& tok : tokens) {
    covariance_step(tok, mean, var);
    out.mean.push_back(mean);
    out.var.push_back(var);
  }
  return out;
}

Posterior joint_gaussian_posterior(const Prior& prior, const std::vector<Token>& tokens) {
  const int T = static_cast<int>(tokens.size());
  // Prior moments of z_0 … z_T from the model alone: m_t = ā_t m_{t-1},
  // C_tt = ā_t² C_{t-1,t-1} + p̄_t, C_st = (ā_{s+1} ⋯ ā_t) C_ss for s ≤ t.
  std::vector<mp> m(T + 1);
  Mat<mp> cov(T + 1, T + 1);
  m[0] = prior.mu;
  cov(0, 0) = 1 / prior.lambda;
  for (int t = 1; t <= T; ++t) {
    const Token& tok = tokens[t - 1];
    m[t] = tok.a * m[t - 1];
    cov(t, t) = tok.a * tok.a * cov(t - 1, t - 1) + tok.p;
    for (int s = 0; s < t; ++s) cov(s, t) = tok.a * cov(s, t - 1);
    for (int s = 0; s < t; ++s) cov(t, s) = cov(s, t);
  }
  Posterior out;
  out.mean.push_back(m[0]);
  out.var.push_back(cov(0, 0));
  for (int t = 1; t <= T; ++t) {
    // Observations v_1 … v_t (index i ↔ token i + 1): Cov(v_i, v_j) = k_i k_j C_ij + δ_ij/Λv_i.
    Mat<mp> S(t, t);
    std::vector<mp> resid(t), c(t);
    for (int i = 0; i < t; ++i) {
      const Token& ti = tokens[i];
      for (int j = 0; j < t; ++j) S(i, j) = ti.k * tokens[j].k * cov(i + 1, j + 1);
      S(i, i) += 1 / ti.lv;
      resid[i] = ti.v - ti.k * m[i + 1];
      c[i] = ti.k * cov(i + 1, t);  // Cov(z_t, v_i)
    }
    const std::vector<mp> x = dense::cholesky_solve(S, resid), y = dense::cholesky_solve(S, c);
    mp mean = m[t], var = cov(t, t);
    for (int i = 0; i < t; ++i) {
      mean += c[i] * x[i];
      var -= c[i] * y[i];
    }
    out.mean.push_back(mean);
    out.var.push_back(var);
  }
  return out;
}

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

}  // namespace ttr::proofs::klak
