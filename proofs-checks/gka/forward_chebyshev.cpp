// GKA forward entries about the Chebyshev iteration: Alg. 1 line by line and its
// convergence against the minimax bound (eq. (CH)); the weight schedule's lemmas and
// Remark 1 are forward_chebyshev_weights.cpp. Under test: reference/solvers/chebyshev.hpp
// and a literal transcription of Alg. 1 (forward_support.hpp); the independent side
// is the Chebyshev polynomial T_n = cos(n acos x) / cosh(n acosh x) applied through
// an explicit eigendecomposition Q diag(λ) Qᵀ.
#include <algorithm>

#include <boost/math/constants/constants.hpp>

#include "proofs-checks/gka/forward_support.hpp"
#include "reference/solvers/chebyshev.hpp"

namespace ttr::proofs {
namespace {

using namespace dense;
using namespace gkaf;
using Mat = dense::Mat<mp>;

// A = Q diag(λ) Qᵀ with λ_1 = μ, λ_n = L and the rest uniform in [μ, L].
struct Spd {
  Mat Q, A;
  Vec lam;
};
Spd random_spd(std::mt19937_64& rng, int n, const mp& mu, const mp& L) {
  Spd s;
  s.Q = random_orthogonal<mp>(rng, n);
  s.lam.resize(n);
  for (int j = 0; j < n; ++j) s.lam[j] = j == 0 ? mu : j == n - 1 ? L : mu + (L - mu) * mp(unif(rng, 0, 1));
  s.A = (s.Q * diagonal(s.lam)) * s.Q.transpose();
  return s;
}
// The degree-d Chebyshev iterate by definition: ξ = A^{-1}(I − p_d(A)) q, p_d the
// scaled Chebyshev residual polynomial, through the eigendecomposition.
Vec polynomial_iterate(const Spd& s, const Vec& q, const mp& L, const mp& mu, int d) {
  Vec f(s.lam.size());
  for (std::size_t j = 0; j < f.size(); ++j) f[j] = (1 - cheb_residual(d, s.lam[j], L, mu)) / s.lam[j];
  return s.Q * cwise_product(f, s.Q.transpose() * q);  // Q diag(f) Qᵀ q
}
auto dense_apply(const Mat& A) {
  return [&A](const Vec& x) { return A * x; };
}
Vec reference_chebyshev(const Mat& A, const Vec& q, const mp& L, const mp& mu, int r, const mp& omega0,
                        std::vector<mp>* omegas = nullptr) {
  const int n = A.rows();
  auto apply = [&](const mp* x, mp* y) {
    for (int i = 0; i < n; ++i) {
      y[i] = 0;
      for (int j = 0; j < n; ++j) y[i] += A(i, j) * x[j];
    }
  };
  const ChebyshevParams<mp> p{L, mu, r, omega0};
  auto res = chebyshev_forward(apply, q.data(), n, p);
  if (omegas) *omegas = res.omega;
  return res.xi;
}
double log_unif(std::mt19937_64& rng, double lo, double hi) { return std::exp(unif(rng, std::log(lo), std::log(hi))); }

struct Case {
  int n, r;
  mp mu, L;
  Spd s;
  Vec q;
  std::string where;
};
Case random_case(std::mt19937_64& rng, int p, int rmax) {
  Case c;
  c.n = 3 + static_cast<int>(rng() % 6);
  c.r = static_cast<int>(rng() % (rmax + 1));
  c.mu = mp(log_unif(rng, 1e-2, 1.0));
  c.L = c.mu * mp(log_unif(rng, 1.01, 1e4));
  c.s = random_spd(rng, c.n, c.mu, c.L);
  c.q = random_vector<mp>(rng, c.n);
  c.where = "point " + std::to_string(p) + " n=" + std::to_string(c.n) + " r=" + std::to_string(c.r) +
            " kappa=" + num(to_d(c.L / c.mu));
  return c;
}

// --- Alg. 1 line 5 / eq. (CH): ξ_r is the degree-(r+1) Chebyshev iterate ----------

Evidence alg1_output(const ProofOptions& opt, const std::string& id) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int points = opt.full ? 100 : 10;
  Worst lit, ref, off;
  for (int p = 0; p < points; ++p) {
    const Case c = random_case(rng, p, 20);
    const Vec want = polynomial_iterate(c.s, c.q, c.L, c.mu, c.r + 1);
    lit.see(rel_diff_2(alg1_as_printed(dense_apply(c.s.A), c.q, c.L, c.mu, c.r, mp(2)), want), c.where);
    ref.see(rel_diff_2(reference_chebyshev(c.s.A, c.q, c.L, c.mu, c.r, mp(2)), want), c.where);
    // Degree r instead of r+1 would be an off-by-one in the bound's exponent.
    if (c.r > 0) off.see(-rel_diff_2(polynomial_iterate(c.s, c.q, c.L, c.mu, c.r), want), c.where);
  }
  return holds_if(std::max(lit.value, ref.value), exact_tolerance(opt.bits),
                  "max rel. |xi_r - A^{-1}(I - T_{r+1}(sigma(A))/T_{r+1}(sigma_0)) q|",
                  lit.value >= ref.value ? lit.where : ref.where,
                  "Alg. 1 as printed (omega0 = 2) " + num(lit.value) + ", chebyshev_forward " + num(ref.value) +
                      "; degree r instead of r+1 differs by >= " + num(-off.value));
}

// --- Alg. 1 line 2: ω_0 = 0 as printed vs 2 ---------------------------------------

Evidence alg1_omega0(const ProofOptions& opt, const std::string& id) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int points = opt.full ? 100 : 10;
  Worst printed, corrected, agree;
  for (int p = 0; p < points; ++p) {
    Case c = random_case(rng, p, 20);
    if (c.r == 0) c.r = 1;  // ω_0 first acts at i = 1
    const Vec want = polynomial_iterate(c.s, c.q, c.L, c.mu, c.r + 1);
    const Vec zero = alg1_as_printed(dense_apply(c.s.A), c.q, c.L, c.mu, c.r, mp(0));
    printed.see(rel_diff_2(zero, want), c.where);
    corrected.see(rel_diff_2(alg1_as_printed(dense_apply(c.s.A), c.q, c.L, c.mu, c.r, mp(2)), want), c.where);
    agree.see(rel_diff_2(reference_chebyshev(c.s.A, c.q, c.L, c.mu, c.r, mp(0)), zero), c.where);
  }
  // What ω_0 = 0 does to the polynomial: κ = 51 (Remark 1), r = 10, worst |residual|
  // over a grid of 401 eigenvalues in [μ, L], against the minimax value 1/T_{r+1}(σ_0).
  const mp mu = 1, L = 51;
  const int r = 10, grid = 401;
  Vec lam(grid), ones(grid, mp(1));
  for (int j = 0; j < grid; ++j) lam[j] = mu + (L - mu) * j / (grid - 1);
  auto diag = [&](const Vec& x) {
    Vec y(grid);
    for (int j = 0; j < grid; ++j) y[j] = lam[j] * x[j];
    return y;
  };
  std::vector<mp> w0;
  const Vec x0 = alg1_as_printed(diag, ones, L, mu, r, mp(0), &w0), x2 = alg1_as_printed(diag, ones, L, mu, r, mp(2));
  mp worst0 = 0, worst2 = 0;
  for (int j = 0; j < grid; ++j) {
    worst0 = std::max<mp>(worst0, abs(1 - lam[j] * x0[j]));
    worst2 = std::max<mp>(worst2, abs(1 - lam[j] * x2[j]));
  }
  const mp bound = chebyshev_minimax_bound(L, mu, r + 1);
  Evidence e = printed_fails(printed.value, corrected.value, exact_tolerance(opt.bits),
                             "max rel. |xi_r(Alg. 1, omega0) - Chebyshev polynomial iterate|", printed.where,
                             "omega0 = 0 gives omega_1 = 1 (first step plain gradient descent) and omega_i "
                             "increasing (omega_10 = " + num(to_d(w0[10])) + "); kappa = 51, r = 10: max |1 - "
                             "lambda P(lambda)| on [mu, L] = " + num(to_d(worst0)) + " with omega0 = 0 vs " +
                                 num(to_d(worst2)) + " with omega0 = 2 = minimax " + num(to_d(bound)) +
                                 "; reference chebyshev_forward(omega0 = 0) agrees with the literal Alg. 1 to " +
                                 num(agree.value));
  e.reproduced = e.reproduced && agree.value <= exact_tolerance(opt.bits) && worst0 > 2 * bound;
  return e;
}

// --- Alg. 1 line 1: L = μ (ρ = 0) -------------------------------------------------

Evidence alg1_input(const ProofOptions& opt, const std::string& id) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int points = opt.full ? 40 : 6;
  Worst err;
  for (int p = 0; p < points; ++p) {
    const int n = 2 + static_cast<int>(rng() % 6), r = static_cast<int>(rng() % 20);
    const mp mu = mp(log_unif(rng, 1e-3, 1e3));
    Mat A = Mat::identity(n);
    for (auto& x : A.values()) x *= mu;
    const Vec q = random_vector<mp>(rng, n);
    Vec want(n);
    for (int j = 0; j < n; ++j) want[j] = q[j] / mu;
    std::vector<mp> w;
    const std::string where = "point " + std::to_string(p) + " n=" + std::to_string(n) + " r=" + std::to_string(r) +
                              " L=mu=" + num(to_d(mu));
    err.see(rel_diff_2(alg1_as_printed(dense_apply(A), q, mu, mu, r, mp(2), &w), want), where);
    err.see(rel_diff_2(reference_chebyshev(A, q, mu, mu, r, mp(2)), want), where);
    for (std::size_t i = 1; i < w.size(); ++i) err.see(to_d(abs(w[i] - 1)), where + " omega");
  }
  return holds_if(err.value, exact_tolerance(opt.bits),
                  "L = mu: max of rel. |xi_r - q/mu| (literal and reference) and |omega_i - 1|, i >= 1", err.where);
}

// --- Alg. 1 line 2: ρ and ξ_{-1}, ξ_0 ---------------------------------------------

Evidence alg1_rho(const ProofOptions& opt, const std::string& id) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int points = opt.full ? 200 : 20, grid = 64;
  Worst rate, beat;
  for (int p = 0; p < points; ++p) {
    const mp mu = mp(log_unif(rng, 1e-3, 1.0)), L = mu * mp(log_unif(rng, 1.0001, 1e6));
    const mp rho = (L - mu) / (L + mu);
    auto gd_rate = [&](const mp& step) {  // max over [μ, L] of |1 − step·λ| on a grid with both ends
      mp m = 0;
      for (int j = 0; j < grid; ++j) m = std::max<mp>(m, abs(1 - step * (mu + (L - mu) * j / (grid - 1))));
      return m;
    };
    const std::string where = "point " + std::to_string(p) + " kappa=" + num(to_d(L / mu));
    rate.see(to_d(abs(gd_rate(2 / (L + mu)) - rho) / rho), where);
    for (int s = 0; s < 8; ++s) {  // no other stepsize contracts faster
      const mp step = mp(unif(rng, 0.0, 2.0)) * 2 / (L + mu);
      beat.see(to_d((rho - gd_rate(step)) / rho), where + " step*(L+mu)/2=" + num(to_d(step * (L + mu) / 2)));
    }
  }
  return holds_if(std::max(rate.value, beat.value), exact_tolerance(opt.bits),
                  "max of rel. |max_lambda |1 - 2 lambda/(L+mu)| - rho| and (rho - best rate of another step)/rho",
                  rate.value >= beat.value ? rate.where : beat.where,
                  "rate identity " + num(rate.value) + "; best other step beats rho by " + num(beat.value) +
                      " (<= 0: none does); 8 random steps per point");
}

Evidence alg1_xi_init(const ProofOptions& opt, const std::string& id) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int points = opt.full ? 60 : 6;
  Worst err;
  for (int p = 0; p < points; ++p) {
    const Case c = random_case(rng, p, 0);
    const int n = c.n;
    // ∇ of eq. (21) f(ξ) = ½ξᵀAξ − ξᵀq at ξ_{-1} = 0 by central differences with step
    // 1: exact for a quadratic, so only rounding remains.
    auto f = [&](const Vec& x) {
      const Vec Ax = c.s.A * x;
      mp v = 0;
      for (int j = 0; j < n; ++j) v += x[j] * Ax[j] / 2 - x[j] * c.q[j];
      return v;
    };
    Vec xi0(n), printed(n);
    for (int j = 0; j < n; ++j) {
      Vec e(n, mp(0));
      e[j] = 1;
      const mp fp = f(e);
      e[j] = -1;
      const mp grad = (fp - f(e)) / 2;
      xi0[j] = 0 - 2 / (c.L + c.mu) * grad;     // gradient step from ξ_{-1} = 0
      printed[j] = 2 * c.q[j] / (c.L + c.mu);    // ξ_0 as printed
    }
    err.see(rel_diff_2(printed, xi0), c.where + " (gradient step)");
    err.see(rel_diff_2(printed, polynomial_iterate(c.s, c.q, c.L, c.mu, 1)), c.where + " (degree-1 polynomial)");
  }
  return holds_if(err.value, exact_tolerance(opt.bits),
                  "rel. |2q/(L+mu) - (gradient step from 0)| and |2q/(L+mu) - degree-1 Chebyshev iterate|", err.where);
}

// --- Alg. 1 line 4: weight schedule, grad descent, momentum ------------------------

Evidence alg1_weights(const ProofOptions& opt, const std::string& id) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int points = opt.full ? 200 : 20, r = 40;
  Worst err;
  for (int p = 0; p < points; ++p) {
    const double kappa = log_unif(rng, 1.0001, 1e8);
    const mp rho = (mp(kappa) - 1) / (mp(kappa) + 1), s0 = 1 / rho;  // σ(0) = (L+μ)/(L−μ)
    const std::vector<mp> w = reference_weights(rho, r);
    std::vector<mp> wl;
    alg1_as_printed([](const Vec& x) { return x; }, Vec{mp(1)}, 1 + rho, 1 - rho, r, mp(2), &wl);
    for (int i = 0; i <= r; ++i) {
      // From T_{i+1} = 2σT_i − T_{i-1}: ω_i = 2σ_0 T_i(σ_0)/T_{i+1}(σ_0).
      const mp want = 2 * s0 * cheb_T(i, s0) / cheb_T(i + 1, s0);
      const std::string where = "kappa=" + num(kappa) + " i=" + std::to_string(i);
      err.see(to_d(rel_err(w[i], want)), where);
      err.see(to_d(rel_err(wl[i], want)), where + " (literal)");
    }
  }
  return holds_if(err.value, exact_tolerance(opt.bits), "max rel. |omega_i - 2 sigma0 T_i(sigma0)/T_{i+1}(sigma0)|",
                  err.where, std::to_string(points) + " values of kappa in [1.0001, 1e8], i = 0..40");
}

// The step size c and momentum m of step i, solved from the polynomial definition:
// p_{i+1}(λ) = (1 − cλ) p_i(λ) + m (p_i(λ) − p_{i-1}(λ)) at λ = μ and λ = L (p_k at
// the ends is 1/T_k(σ_0) and (−1)^k/T_k(σ_0): the 2×2 system is never singular);
// a third point checks that such a three-term form exists at all.
struct StepCoeffs {
  mp c, m;
  double third;  // rel. residual of the form at a random interior λ
};
StepCoeffs solve_step(int i, const mp& L, const mp& mu, const mp& lam3) {
  auto p = [&](int k, const mp& lam) { return cheb_residual(k, lam, L, mu); };
  // rows: [−λ p_i, p_i − p_{i-1}] [c; m] = p_{i+1} − p_i
  const mp a11 = -mu * p(i, mu), a12 = p(i, mu) - p(i - 1, mu), b1 = p(i + 1, mu) - p(i, mu);
  const mp a21 = -L * p(i, L), a22 = p(i, L) - p(i - 1, L), b2 = p(i + 1, L) - p(i, L);
  const mp det = a11 * a22 - a12 * a21;
  StepCoeffs s;
  s.c = (b1 * a22 - a12 * b2) / det;
  s.m = (a11 * b2 - b1 * a21) / det;
  const mp lhs = p(i + 1, lam3), rhs = (1 - s.c * lam3) * p(i, lam3) + s.m * (p(i, lam3) - p(i - 1, lam3));
  s.third = to_d(rel_err(rhs, lhs));
  return s;
}

Evidence alg1_step(const ProofOptions& opt, const std::string& id, bool momentum) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int points = opt.full ? 100 : 5, r = 30;
  Worst err, third;
  for (int p = 0; p < points; ++p) {
    const mp mu = mp(log_unif(rng, 1e-2, 1.0)), L = mu * mp(log_unif(rng, 1.01, 1e4));
    std::vector<mp> w;
    alg1_as_printed([](const Vec& x) { return x; }, Vec{mp(1)}, L, mu, r, mp(2), &w);
    for (int i = 1; i <= r; ++i) {
      const mp lam3 = mu + (L - mu) * mp(unif(rng, 0.05, 0.95));
      const StepCoeffs s = solve_step(i, L, mu, lam3);
      const std::string where = "point " + std::to_string(p) + " kappa=" + num(to_d(L / mu)) + " i=" + std::to_string(i);
      if (momentum) err.see(to_d(rel_err(mp(w[i] - 1), s.m)), where);   // printed momentum weight ω_i − 1
      else err.see(to_d(rel_err(mp(2 * w[i] / (L + mu)), s.c)), where);  // printed stepsize 2ω_i/(L+μ)
      third.see(s.third, where);
    }
  }
  return holds_if(std::max(err.value, third.value), exact_tolerance(opt.bits),
                  momentum ? "max rel. |(omega_i - 1) - momentum coefficient of the polynomial recurrence|"
                           : "max rel. |2 omega_i/(L+mu) - step coefficient of the polynomial recurrence|",
                  err.value >= third.value ? err.where : third.where,
                  "coefficient " + num(err.value) + "; three-term form at a third point " + num(third.value) +
                      "; omega_i from the schedule started at omega0 = 2");
}

// --- eq. (CH): convergence against the minimax bound (adversarial) -----------------

Evidence ch_minimax(const ProofOptions& opt, const std::string& id) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int trials = opt.full ? 200 : 12, steps = opt.full ? 60 : 15, n = 5;
  int evals = 0;
  Worst viol, ident;
  double tightest = 0;
  for (int tr = 0; tr < trials; ++tr) {
    const int r = static_cast<int>(rng() % 17);
    const mp mu = 1, L = mp(log_unif(rng, 1.01, 1e4));
    const mp bound = chebyshev_minimax_bound(L, mu, r + 1);
    const std::string where = "trial " + std::to_string(tr) + " r=" + std::to_string(r) + " kappa=" + num(to_d(L));
    ident.see(to_d(rel_err(bound, mp(1 / cheb_T(r + 1, (L + mu) / (L - mu))))), where);
    Vec lam(n), x(n);  // spectrum and exact solution components x* (basis-invariant: A diagonal)
    for (int j = 0; j < n; ++j) {
      if (tr % 2 == 0) {  // half the trials start at the equioscillation points of T_{r+1}
        const mp sig = cos(mp(j % (r + 2)) * boost::math::constants::pi<mp>() / (r + 1));
        lam[j] = ((L + mu) - sig * (L - mu)) / 2;
      } else {
        lam[j] = mu + (L - mu) * mp(unif(rng, 0, 1));
      }
      x[j] = mp(unif(rng, -1, 1));
    }
    auto ratio_minus_bound = [&](const Vec& l, const Vec& xs) {
      ++evals;
      Vec q(n);
      for (int j = 0; j < n; ++j) q[j] = l[j] * xs[j];
      auto apply = [&](const mp* a, mp* y) {
        for (int j = 0; j < n; ++j) y[j] = l[j] * a[j];
      };
      const ChebyshevParams<mp> p{L, mu, r, mp(2)};
      const Vec xi = chebyshev_forward(apply, q.data(), n, p).xi;
      Vec e(n);
      for (int j = 0; j < n; ++j) e[j] = xs[j] - xi[j];
      tightest = std::max(tightest, to_d(norm(e) / norm(xs) / bound));
      return to_d((norm(e) - bound * norm(xs)) / norm(xs));  // ≤ 0 when the bound holds
    };
    double cur = ratio_minus_bound(lam, x);
    viol.see(cur, where);
    for (int st = 0; st < steps; ++st) {  // local search: move one eigenvalue or one weight
      Vec l2 = lam, x2 = x;
      const int j = static_cast<int>(rng() % n);
      const double size = std::ldexp(1.0, -static_cast<int>(rng() % 20));
      if (rng() % 2) l2[j] = std::min<mp>(L, std::max<mp>(mu, l2[j] + (L - mu) * mp(size * unif(rng, -1, 1))));
      else x2[j] += mp(size * unif(rng, -1, 1));
      const double v = ratio_minus_bound(l2, x2);
      viol.see(v, where + " step " + std::to_string(st));
      if (v > cur) cur = v, lam = std::move(l2), x = std::move(x2);
    }
  }
  return holds_if(std::max(viol.value, ident.value), exact_tolerance(opt.bits),
                  "max (|x* - xi_r| - bound |x*|)/|x*| over the search; and rel. |bound - 1/T_{r+1}(sigma0)|",
                  viol.value >= ident.value ? viol.where : ident.where,
                  std::to_string(evals) + " evaluations; max |x* - xi_r|/(bound |x*|) reached " + num(tightest) +
                      " (1 = attained); bound identity " + num(ident.value));
}

}  // namespace

std::vector<Entry> gka_forward_chebyshev_entries() {
  const Method X = Method::exact_identity, I = Method::inequality_search;
  const std::string spd =
      "MPFR opt.bits; 10 (full: 100) random SPD A = Q diag(lambda) Q^T (Householder Q, n in [3,8], mu in [1e-2,1], "
      "kappa in [1.01,1e4], lambda_1 = mu, lambda_n = L), r in [0,20]";
  return {
      gka_entry("gka.ch.minimax_bound", "eq. (CH)",
           "r steps of CH (Alg. 1) reduce the error by at most the Chebyshev minimax factor: "
           "|x* - xi_r| <= 1/T_{r+1}((L+mu)/(L-mu)) |x*| = chebyshev_minimax_bound(L, mu, r+1) |x*|",
           I,
           "adversarial search, MPFR opt.bits: 12 (full: 200) trials, n = 5 eigenvalues in [1, kappa], kappa in "
           "[1.01,1e4], r in [0,16], half started at the equioscillation points of T_{r+1}, + 15 (full: 60) "
           "local-search steps moving one eigenvalue or one weight to raise the error; reference chebyshev_forward",
           Status::holds, "", ch_minimax),
      gka_entry("gka.alg1.line1_input", "Alg. 1",
           "Input: eigenvalue bounds L >= mu > 0 (L = mu allowed: rho = 0, omega_i = 1, xi_r = q/mu)", X,
           "MPFR opt.bits; 6 (full: 40) cases A = mu I, n in [2,7], r in [0,19], mu in [1e-3,1e3]; literal Alg. 1 "
           "and reference chebyshev_forward",
           Status::holds, "", alg1_input),
      gka_entry("gka.alg1.line2_rho", "Alg. 1",
           "Initialize: rho = (L-mu)/(L+mu), the contraction of gradient descent with the optimal stepsize 2/(L+mu) "
           "(App. B.1)",
           I,
           "MPFR opt.bits; 20 (full: 200) intervals, kappa in [1.0001,1e6]: max over a 64-point grid incl. both ends "
           "of |1 - 2 lambda/(L+mu)| = rho, and 8 random other stepsizes per interval never contract faster",
           Status::holds, "", alg1_rho),
      gka_entry("gka.alg1.line2_omega0", "Alg. 1", "Initialize: omega_0 = 0", X,
           spd + "; Alg. 1 transcribed literally with omega_0 = 0 vs 2, against the degree-(r+1) Chebyshev iterate "
                 "A^{-1}(I - T_{r+1}(sigma(A))/T_{r+1}(sigma_0))q through the eigendecomposition (T by cos/cosh)",
           Status::fails_as_printed,
           "omega_0 = 2 (as App. B.1 and Lemma 3 state): omega_i = 2 sigma_0 T_i(sigma_0)/T_{i+1}(sigma_0) at i = 0",
           alg1_omega0),
      gka_entry("gka.alg1.line2_xi_init", "Alg. 1",
           "Initialize: xi_{-1} = 0, xi_0 = 2q/(L+mu), a gradient step on (21) from xi_{-1} with stepsize 2/(L+mu)",
           X,
           "MPFR opt.bits; 6 (full: 60) SPD systems as in line2_omega0: gradient of (21) by central differences "
           "(step 1, exact for a quadratic), and xi_0 vs the degree-1 Chebyshev iterate",
           Status::holds, "", alg1_xi_init),
      gka_entry("gka.alg1.line4_weight_schedule", "Alg. 1", "omega_i = 4/(4 - rho^2 omega_{i-1}) (weight schedule)", X,
           "MPFR opt.bits; 20 (full: 200) kappa in [1.0001,1e8], i = 0..40: reference and literal weights vs "
           "2 sigma_0 T_i(sigma_0)/T_{i+1}(sigma_0) (the Chebyshev three-term recurrence), T by cosh",
           Status::holds, "", alg1_weights),
      gka_entry("gka.alg1.line4_grad_descent", "Alg. 1",
           "xi_i = xi_{i-1} - 2 omega_i/(L+mu) (H xi_{i-1} - q) (grad descent)", X,
           "MPFR opt.bits; 5 (full: 100) intervals kappa in [1.01,1e4], i = 1..30: the step coefficient c of "
           "p_{i+1}(l) = (1 - c l) p_i(l) + m (p_i(l) - p_{i-1}(l)) solved from the Chebyshev residual polynomials "
           "(cos/cosh) at l = mu, L, checked at a third point, vs 2 omega_i/(L+mu)",
           Status::holds, "", [](const ProofOptions& o, const std::string& id) { return alg1_step(o, id, false); }),
      gka_entry("gka.alg1.line4_momentum", "Alg. 1", "xi_i = xi_i + (omega_i - 1)(xi_{i-1} - xi_{i-2}) (momentum)", X,
           "as gka.alg1.line4_grad_descent, for the momentum coefficient m vs omega_i - 1", Status::holds, "",
           [](const ProofOptions& o, const std::string& id) { return alg1_step(o, id, true); }),
      gka_entry("gka.alg1.line5_output", "Alg. 1",
           "Output: xi_r, the Chebyshev iterate of polynomial degree r+1 (x* - xi_r = T_{r+1}(sigma(A))/T_{r+1}("
           "sigma_0) x*)",
           X, spd + "; literal Alg. 1 (omega_0 = 2) and reference chebyshev_forward vs the eigendecomposition",
           Status::holds, "", alg1_output),
  };
}

}  // namespace ttr::proofs
