// Krylov / first-order solvers and dense solves (reference/solvers/iterative.hpp,
// dense.hpp) on SPD systems built here with a known eigen-decomposition
// A = V diag(λ) Vᵀ (V a product of Householder reflectors, λ in [μ, L] with both
// ends present), so the exact solution V diag(1/λ) Vᵀ q is known independently;
// and on small integer matrices solved exactly over the rationals (GMP mpq).
//
// Convergence claims checked, each from a textbook bound (not from recorded output):
//  * gradient descent with step 2/(L+μ): e_k = (I − 2A/(L+μ)) e_{k-1}, and the
//    eigenvalues of that matrix lie in [−ρ, ρ], ρ = (κ−1)/(κ+1): ‖e_k‖ ≤ ρ‖e_{k-1}‖,
//    with equality approached when e_0 has components at both ends of the spectrum;
//  * Nesterov's constant-momentum scheme (Nesterov 2004, scheme (2.2.19)/(2.2.22),
//    Thm 2.2.3 with γ_0 = μ): f(x_k) − f* ≤ (1 − 1/√κ)^k (f(x_0) − f* + μ/2 ‖x_0 − x*‖²),
//    f(x) = ½xᵀAx − qᵀx, f(x) − f* = ½ eᵀAe;
//  * conjugate gradient: ‖e_k‖_A ≤ 2R^k ‖e_0‖_A, R = (√κ−1)/(√κ+1), and finite
//    termination in at most n steps in exact arithmetic (n distinct eigenvalues).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference/core/multiprecision.hpp"
#include "reference/solvers/dense.hpp"
#include "reference/solvers/iterative.hpp"
#include "tests/support/rational.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/spd.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using ttr::test::PrecisionGuard;
using M = ttr::mpfr_real;
using Q = ttr::test::rational;

using ttr::test::make_spd;
using ttr::test::norm;
using ttr::test::num;
using ttr::test::random_vec;
using ttr::test::Spd;

template <class T>
std::vector<T> minus(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

// The same system in float64: A, q and the exact solution rounded from MPFR.
struct DoubleSystem {
  Spd<double> s;
  std::vector<double> q, x;
};
DoubleSystem double_system(int n, double mu, double L, std::uint64_t seed) {
  const Spd<M> sm = make_spd<M>(n, mu, L, seed);
  const auto qm = sm.from_coords(std::vector<M>(n, num<M>(1)));
  const auto xm = sm.solve(qm);
  DoubleSystem d;
  d.s.n = n;
  d.s.L = L;
  d.s.mu = mu;
  for (const M& a : sm.A) d.s.A.push_back(ttr::to_double(a));
  for (const M& e : qm) d.q.push_back(ttr::to_double(e));
  for (const M& e : xm) d.x.push_back(ttr::to_double(e));
  return d;
}

// ------------------------------------------------------------------ gradient descent

TEST(IterativeSolvers, GradientDescentContractsByKappaFactor) {
  PrecisionGuard g;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const int n = 12;
  const Spd<M> s = make_spd<M>(n, 1.0, 51.0, 11);
  const M rho = (s.L - s.mu) / (s.L + s.mu);
  // q = V·1: the error e_0 = −x has components at both ends, where |1 − 2λ/(L+μ)| = ρ.
  const auto q = s.from_coords(std::vector<M>(n, num<M>(1)));
  const auto x = s.solve(q);
  M prev = norm(x);  // e_0 = 0 − x
  M last_ratio = num<M>(0);
  for (int k = 1; k <= 80; ++k) {
    const M e = norm(minus(ttr::gradient_descent(s.op(), q.data(), n, s.L, s.mu, k), x));
    // Rounding at 256 bits adds ≲ k·n·u·‖x‖ ≈ 1e-74‖x‖, far below the 1e-60 allowance.
    EXPECT_LE(e, rho * prev * (1 + M(1e-60))) << "k = " << k;
    last_ratio = e / prev;
    prev = e;
  }
  // Tightness: the end components contract by exactly ρ, interior ones by less, so
  // the per-step ratio tends to ρ (interior eigenvalues here are ≥ 5% inside).
  EXPECT_GT(last_ratio, M(0.9) * rho);
}

TEST(IterativeSolvers, GradientDescentDoubleReachesTolerance) {
  PrecisionGuard g;
  ttr::precision_control<M>::set_bits(256);
  // ‖e_k‖ ≤ ρ^k ‖x‖ with ρ = 50/52: ρ^k ≤ 1e-13 needs k ≥ 13·ln10/ln(52/50) ≈ 764; use 800.
  // Rounding floor in float64: ≈ n·u·κ ≈ 1e-13 at worst; require 1e-12.
  const DoubleSystem d = double_system(16, 1.0, 51.0, 12);
  const auto x = ttr::gradient_descent(d.s.op(), d.q.data(), 16, 51.0, 1.0, 800);
  EXPECT_LT(norm(minus(x, d.x)) / norm(d.x), 1e-12);
}

// ------------------------------------------------------------------ Nesterov

TEST(IterativeSolvers, NesterovObeysTheorem223Bound) {
  PrecisionGuard g;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  using std::pow;
  using std::sqrt;
  const int n = 12;
  const Spd<M> s = make_spd<M>(n, 1.0, 51.0, 13);
  const auto q = random_vec<M>(n, 14);
  const auto x = s.solve(q);
  const M kappa = s.L / s.mu;
  const M f0 = s.a_norm2(x) / 2 + s.mu / 2 * norm(x) * norm(x);  // f(0) − f* + μ/2‖0 − x*‖²
  for (int k = 0; k <= 120; ++k) {
    const auto xk = ttr::nesterov_agd(s.op(), q.data(), n, s.L, s.mu, k);
    const M gap = s.a_norm2(minus(xk, x)) / 2;
    EXPECT_LE(gap, pow(1 - 1 / sqrt(kappa), k) * f0 * (1 + M(1e-60))) << "k = " << k;
  }
}

TEST(IterativeSolvers, NesterovDoubleReachesTolerance) {
  PrecisionGuard g;
  ttr::precision_control<M>::set_bits(256);
  // From Thm 2.2.3: ‖e_k‖² ≤ (2/μ)(f_k − f*) ≤ (κ+1)(1 − 1/√κ)^k ‖e_0‖². For 1e-12
  // relative at κ = 51: k ≥ ln(1e-24/52)/ln(1 − 1/√51) ≈ 392.5; use 400.
  const DoubleSystem d = double_system(16, 1.0, 51.0, 15);
  const auto x = ttr::nesterov_agd(d.s.op(), d.q.data(), 16, 51.0, 1.0, 400);
  EXPECT_LT(norm(minus(x, d.x)) / norm(d.x), 1e-12);
}

// ------------------------------------------------------------------ conjugate gradient

TEST(IterativeSolvers, ConjugateGradientDoubleReachesTolerance) {
  PrecisionGuard g;
  ttr::precision_control<M>::set_bits(256);
  // ‖e‖² ≤ ‖e‖_A²/λmin and ‖e_0‖_A² ≤ λmax‖e_0‖², so ‖e_k‖/‖e_0‖ ≤ 2√κ R^k; 2√51·R^k ≤ 1e-12 with
  // R = (√51−1)/(√51+1) ≈ 0.7543 needs k ≥ 108. Finite-precision CG follows the
  // Chebyshev bound of a slightly perturbed spectrum (Greenbaum 1989), and CG stops
  // by itself at an exactly zero residual.
  for (int n : {8, 16}) {
    const DoubleSystem d = double_system(n, 1.0, 51.0, 16 + n);
    const auto x = ttr::conjugate_gradient(d.s.op(), d.q.data(), n, 108);
    EXPECT_LT(norm(minus(x, d.x)) / norm(d.x), 1e-12) << "n = " << n;
  }
}

TEST(IterativeSolvers, ConjugateGradientTerminatesInNStepsMpfr) {
  PrecisionGuard g;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  // n distinct eigenvalues: the Krylov space of dimension n contains the solution, so
  // exact CG is exact after n steps. Rounding at 256 bits (u ≈ 8.6e-78) perturbs this
  // by ≲ n·κ·u per step, amplified by loss of orthogonality by at most a modest
  // power of κ at these sizes: 1e-60 leaves ≥ 10^13.
  for (int n : {8, 12, 16}) {
    const Spd<M> s = make_spd<M>(n, 1.0, 51.0, 17 + n);
    const auto q = random_vec<M>(n, 18 + n);
    const auto x = s.solve(q);
    EXPECT_LT(norm(minus(ttr::conjugate_gradient(s.op(), q.data(), n, n), x)) / norm(x), M(1e-60)) << n;
    // ... and the claim is not vacuous: after n − 2 steps the error p(A)e_0 (p of degree
    // n − 2, p(0) = 1) cannot vanish at n distinct eigenvalues with nonzero components;
    // its minimum is a fixed property of the data, far above rounding (≳ 1e-6 here).
    EXPECT_GT(norm(minus(ttr::conjugate_gradient(s.op(), q.data(), n, n - 2), x)) / norm(x), M(1e-40)) << n;
  }
}

// ------------------------------------------------------------------ exact rational solves

using QMat = std::vector<std::vector<Q>>;

// Gauss–Jordan over the rationals (A nonsingular): the independent exact solution.
std::vector<Q> exact_solve(QMat A, std::vector<Q> b) {
  const std::size_t n = A.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    while (A[p][c] == 0) ++p;
    std::swap(A[p], A[c]);
    std::swap(b[p], b[c]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == c || A[r][c] == 0) continue;
      const Q f = A[r][c] / A[c][c];
      for (std::size_t j = 0; j < n; ++j) A[r][j] -= f * A[c][j];
      b[r] -= f * b[c];
    }
  }
  for (std::size_t i = 0; i < n; ++i) b[i] /= A[i][i];
  return b;
}

QMat gram(const QMat& L) {  // L Lᵀ
  const std::size_t n = L.size();
  QMat A(n, std::vector<Q>(n, Q(0)));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t k = 0; k < n; ++k) A[i][j] += L[i][k] * L[j][k];
  return A;
}

template <class T>
std::vector<T> flat(const QMat& A) {
  std::vector<T> out;
  for (const auto& row : A)
    for (const Q& e : row) {
      if constexpr (std::is_same_v<T, Q>) out.push_back(e);
      else out.push_back(ttr::to_double(e));
    }
  return out;
}

// A = L Lᵀ with an integer lower-triangular L of positive diagonal: every Cholesky
// pivot d_j = A_jj − Σ L_jk² equals L_jj², a perfect square, so cholesky_solve runs
// exactly over the rationals (tests/support/rational.hpp's sqrt is exact there and
// throws otherwise) and must return the exact solution.
const QMat kL = {{Q(2), Q(0), Q(0), Q(0), Q(0)},
                 {Q(1), Q(3), Q(0), Q(0), Q(0)},
                 {Q(-1), Q(2), Q(1), Q(0), Q(0)},
                 {Q(3), Q(-2), Q(1), Q(2), Q(0)},
                 {Q(0), Q(1), Q(-3), Q(1), Q(1)}};
const std::vector<Q> kb = {Q(1), Q(-2), Q(3), Q(1, 2), Q(-5, 4)};

TEST(DenseSolvers, CholeskyAndLuExactOverRationals) {
  const QMat A = gram(kL);
  const std::vector<Q> x = exact_solve(A, kb);
  const int n = static_cast<int>(A.size());
  std::vector<Q> xc(n), xl(n);
  ASSERT_TRUE(ttr::cholesky_solve(flat<Q>(A), n, kb.data(), xc.data()));
  ASSERT_TRUE(ttr::lu_solve(flat<Q>(A), n, kb.data(), xl.data()));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(xc[i], x[i]) << "cholesky, i = " << i;
    EXPECT_EQ(xl[i], x[i]) << "lu, i = " << i;
  }
  // LU with pivoting on a nonsymmetric matrix whose (0,0) entry is 0 (a pivot is needed).
  const QMat B = {{Q(0), Q(2), Q(1), Q(-1)}, {Q(3), Q(1), Q(0), Q(2)}, {Q(1), Q(-1), Q(4), Q(1)},
                  {Q(2), Q(0), Q(1), Q(5, 2)}};
  const std::vector<Q> bb = {Q(1), Q(0), Q(-3, 2), Q(2)};
  const std::vector<Q> y = exact_solve(B, bb);
  std::vector<Q> yl(4);
  ASSERT_TRUE(ttr::lu_solve(flat<Q>(B), 4, bb.data(), yl.data()));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(yl[i], y[i]) << "lu nonsymmetric, i = " << i;
  // Cholesky refuses a matrix that is not positive definite.
  std::vector<Q> xs(2);
  EXPECT_FALSE(ttr::cholesky_solve(std::vector<Q>{Q(1), Q(2), Q(2), Q(1)}, 2, kb.data(), xs.data()));
}

TEST(DenseSolvers, CholeskyAndLuDoubleWithinErrorBound) {
  // Higham, Thms 10.4 and 9.4 with Lemma 9.6: the computed solution solves (A+ΔA)x̂ = b
  // with ‖ΔA‖_∞ ≤ γ_{3n+1}·c_n‖A‖_∞, c_n = 1 + 2(n²−n)·2^{n−1} covering the worst
  // partial-pivoting growth (Cholesky's |Lᵀ||L| term is smaller), so
  // ‖x̂ − x‖_∞/‖x‖_∞ ≤ 2·γ_{3n+1}·c_n·κ_∞(A) to first order (factor 2 for the rest).
  // κ_∞(A) = ‖A‖_∞‖A⁻¹‖_∞ is computed exactly over the rationals.
  const QMat A = gram(kL);
  const int n = static_cast<int>(A.size());
  QMat Ainv(n, std::vector<Q>(n));
  for (int j = 0; j < n; ++j) {
    std::vector<Q> e(n, Q(0));
    e[j] = Q(1);
    const auto col = exact_solve(A, e);
    for (int i = 0; i < n; ++i) Ainv[i][j] = col[i];
  }
  auto inf_norm = [](const QMat& X) {
    Q best(0);
    for (const auto& row : X) {
      Q s(0);
      for (const Q& e : row) s += abs(e);
      if (s > best) best = s;
    }
    return ttr::to_double(best);
  };
  const double kappa = inf_norm(A) * inf_norm(Ainv);
  const double u = std::numeric_limits<double>::epsilon() / 2;
  const double gamma = (3 * n + 1) * u / (1 - (3 * n + 1) * u);
  const double cn = 1 + 2.0 * (n * n - n) * std::ldexp(1.0, n - 1);
  const double bound = 2 * gamma * cn * kappa;
  const std::vector<Q> x = exact_solve(A, kb);
  std::vector<double> b;
  for (const Q& e : kb) b.push_back(ttr::to_double(e));
  for (int which = 0; which < 2; ++which) {
    std::vector<double> xh(n);
    ASSERT_TRUE(which == 0 ? ttr::cholesky_solve(flat<double>(A), n, b.data(), xh.data())
                           : ttr::lu_solve(flat<double>(A), n, b.data(), xh.data()));
    Q err(0), xn(0);
    for (int i = 0; i < n; ++i) {
      Q xi;
      mpq_set_d(xi.backend().data(), xh[i]);
      err = std::max(err, Q(abs(xi - x[i])));
      xn = std::max(xn, Q(abs(x[i])));
    }
    EXPECT_LE(ttr::to_double(Q(err / xn)), bound) << (which == 0 ? "cholesky" : "lu");
  }
}

// CG over the rationals (exact arithmetic, any SPD A): the residuals are mutually
// orthogonal, so after at most n steps the residual is exactly zero and the iterate
// is exactly A⁻¹b.
TEST(IterativeSolvers, ConjugateGradientExactOverRationals) {
  const QMat A = gram(kL);
  const int n = static_cast<int>(A.size());
  const std::vector<Q> Af = flat<Q>(A);
  auto apply = [&](const Q* x, Q* y) {
    for (int i = 0; i < n; ++i) {
      Q s(0);
      for (int j = 0; j < n; ++j) s += Af[static_cast<std::size_t>(i) * n + j] * x[j];
      y[i] = s;
    }
  };
  const std::vector<Q> x = exact_solve(A, kb);
  const auto xc = ttr::conjugate_gradient(apply, kb.data(), n, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(xc[i], x[i]) << i;
  // More iterations than needed: the early stop at a zero residual keeps it exact.
  const auto xm = ttr::conjugate_gradient(apply, kb.data(), n, 3 * n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(xm[i], x[i]) << i;
}

}  // namespace
