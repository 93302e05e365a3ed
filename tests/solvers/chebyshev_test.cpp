// Chebyshev iteration (reference/solvers/chebyshev.hpp; GKA Alg. 1, Alg. 2,
// eqs. (54)-(64), Lemmas 2-3) on symmetric positive definite systems built here
// with a known eigen-decomposition: A = V diag(λ) Vᵀ, V a product of Householder
// reflectors (orthogonal to working precision), λ chosen in [μ, L] with both ends
// present. Expectations are independent of the code under test:
//  * the exact solution x = V diag(1/λ) Vᵀ q from the construction;
//  * the residual polynomial in closed form: ξ_r = P(A) q with
//        1 − λ P(λ) = T_d(σ(λ)) / T_d(σ_0),   σ(λ) = (L + μ − 2λ)/(L − μ),
//        σ_0 = (L + μ)/(L − μ),  d = r + 1
//    (ξ_{-1} = 0, ξ_0 = 2q/(L+μ) is already degree 1), T_d by its three-term
//    recurrence here, so every component of Vᵀ(q − Aξ_r) is known exactly and
//    max_{[μ,L]} |T_d(σ)/T_d(σ_0)| = 1/T_d(σ_0) = 2R^d/(1 + R^{2d}),
//    R = (√κ − 1)/(√κ + 1);
//  * the hand-derived r = 1 step for both starting weights ω_0 = 2 and ω_0 = 0;
//  * central finite differences of ξ_r at 512 bits for the reverse passes, and
//    GKA Lemma 2 (dq = P(A) dξ_r) through a second forward run.
//
// Tolerances. MPFR at 256 bits has unit roundoff u = 2^-256 ≈ 8.6e-78. A Chebyshev
// step is a contraction-plus-momentum recursion whose rounding errors are damped
// like the iteration error itself, so after r steps the accumulated error is about
// r·n·κ·u·‖q‖ ≤ 300·16·51·8.6e-78 ≈ 2e-72; 1e-60 leaves 10^11 of margin, while a
// defect (wrong weight, wrong step, wrong degree) changes results at the 1e-2 level.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/core/multiprecision.hpp"
#include "reference/solvers/chebyshev.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/spd.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using ttr::test::PrecisionGuard;
using M = ttr::mpfr_real;

using ttr::test::make_spd;
using ttr::test::norm;
using ttr::test::num;
using ttr::test::random_vec;
using ttr::test::Spd;

template <class T>
T dist(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return norm(d);
}

M cheb_T(int d, const M& x) {
  M a = num<M>(1), b = x;
  if (d == 0) return a;
  for (int k = 1; k < d; ++k) {
    M c = num<M>(2) * x * b - a;
    a = b;
    b = c;
  }
  return b;
}

// 1/T_d(σ_0) computed from R (independent of chebyshev_minimax_bound's code).
M minimax(const M& L, const M& mu, int d) {
  using std::pow;
  using std::sqrt;
  const M s = sqrt(L / mu);
  const M R = (s - 1) / (s + 1);
  const M Rd = pow(R, d);
  return 2 * Rd / (1 + Rd * Rd);
}

template <class T>
std::vector<T> residual(const Spd<T>& s, const std::vector<T>& q, const std::vector<T>& xi) {
  std::vector<T> Ax(s.n), r(s.n);
  s.apply(xi.data(), Ax.data());
  for (int i = 0; i < s.n; ++i) r[i] = q[i] - Ax[i];
  return r;
}

ttr::ChebyshevParams<M> params(const Spd<M>& s, int r, double omega0 = 2.0) {
  return {s.L, s.mu, r, num<M>(omega0)};
}

// ------------------------------------------------------------------ forward

TEST(ChebyshevSolver, ConvergesToExactSolutionMpfr256) {
  PrecisionGuard g;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  // κ = 10: R = (√10−1)/(√10+1) ≈ 0.5195, so ‖x − ξ_r‖/‖x‖ ≤ κ·2R^{r+1} ≈ 1e-84 at
  // r = 300 (‖x − ξ‖ ≤ ‖A⁻¹‖‖res‖ ≤ bound·‖q‖/μ ≤ κ·bound·‖x‖); rounding adds
  // ≲ r·n·κ·u ≈ 3e-73. Hence 1e-60.
  for (int n : {8, 12, 16}) {
    const Spd<M> s = make_spd<M>(n, 1.0, 10.0, 100 + n);
    const auto q = random_vec<M>(n, 200 + n);
    const auto x = s.solve(q);
    ASSERT_LT(10 * minimax(s.L, s.mu, 301), M(1e-80));
    const auto res = ttr::chebyshev_forward(s.op(), q.data(), n, params(s, 300));
    EXPECT_LT(dist(res.xi, x) / norm(x), M(1e-60)) << "n = " << n;
  }
}

TEST(ChebyshevSolver, ConvergesToExactSolutionDouble) {
  PrecisionGuard g;
  ttr::precision_control<M>::set_bits(256);
  // κ = 51 (GKA's a = 0.02). After r = 200 steps the iteration error κ·2R^{201} ≈ 3e-23
  // is far below rounding; what remains is the attainable accuracy of a stationary
  // second-order iteration in float64, c·n·u·κ with u = 2^-53 ≈ 1.1e-16, n = 16 and
  // a small constant c (each residual Aξ − q is formed with error ≤ n·u·‖A‖‖ξ‖ and
  // maps to a solution error ≤ ‖A⁻¹‖ times that; rounding A itself to double costs
  // another κ·u). 1e-14·κ ≈ 90·u·κ is that allowance.
  for (int n : {8, 16}) {
    const Spd<M> sm = make_spd<M>(n, 1.0, 51.0, 300 + n);
    Spd<double> s;
    s.n = n;
    s.L = 51.0;
    s.mu = 1.0;
    for (const M& a : sm.A) s.A.push_back(ttr::to_double(a));
    const auto qm = random_vec<M>(n, 400 + n);
    const auto xm = sm.solve(qm);
    std::vector<double> q, x;
    for (const M& e : qm) q.push_back(ttr::to_double(e));
    for (const M& e : xm) x.push_back(ttr::to_double(e));
    const auto res = ttr::chebyshev_forward(s.op(), q.data(), n, ttr::ChebyshevParams<double>{51.0, 1.0, 200, 2.0});
    EXPECT_LT(dist(res.xi, x) / norm(x), 1e-14 * 51.0) << "n = " << n;
  }
}

// The residual of ξ_r is the degree-(r+1) Chebyshev residual polynomial applied to q:
// checked component by component in the eigenbasis, then against the minimax bound,
// which it nearly attains because μ and L are eigenvalues (T_d(±1) = ±1).
TEST(ChebyshevSolver, ResidualIsDegreeRPlusOneMinimaxPolynomial) {
  PrecisionGuard g;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const int n = 16;
  const Spd<M> s = make_spd<M>(n, 1.0, 51.0, 7);
  const M sigma0 = (s.L + s.mu) / (s.L - s.mu);
  // q1: random; q2 = V·1 (equal weight on every eigenvector, so the two end
  // eigenvectors carry 2/n of ‖q‖²: ‖res‖/(bound‖q‖) ≥ √(2/n) ≈ 0.35 for every r).
  const auto q1 = random_vec<M>(n, 8);
  const auto q2 = s.from_coords(std::vector<M>(n, num<M>(1)));
  double best_ratio = 0;
  for (const std::vector<M>* qp : {&q1, &q2}) {
    const std::vector<M>& q = *qp;
    const M qn = norm(q);
    const auto c = s.coords(q);
    for (int r = 0; r <= 40; ++r) {
      SCOPED_TRACE(r);
      const int d = r + 1;
      const auto res = ttr::chebyshev_forward(s.op(), q.data(), n, params(s, r));
      const auto rv = residual(s, q, res.xi);
      const auto rc = s.coords(rv);
      const M Td0 = cheb_T(d, sigma0);
      M worst = num<M>(0);
      for (int j = 0; j < n; ++j) {
        const M sigma = (s.L + s.mu - 2 * s.lam[j]) / (s.L - s.mu);
        const M expect = c[j] * cheb_T(d, sigma) / Td0;
        worst = std::max(worst, M(abs(rc[j] - expect)));
      }
      EXPECT_LT(worst / qn, M(1e-60)) << "residual is not T_{r+1}(σ(A))/T_{r+1}(σ_0) q";
      const M bound = minimax(s.L, s.mu, d);
      EXPECT_LT(abs(ttr::chebyshev_minimax_bound(s.L, s.mu, d) - bound) / bound, M(1e-60));
      const M rn = norm(rv);
      EXPECT_LE(rn, bound * qn * (1 + M(1e-60))) << "above the degree-(r+1) minimax bound";
      best_ratio = std::max(best_ratio, ttr::to_double(rn / (bound * qn)));
      if (qp == &q2) {
        EXPECT_GT(rn / (bound * qn), M(0.1)) << "bound not nearly attained: the degree is wrong";
      }
    }
  }
  EXPECT_GT(best_ratio, 0.1);
}

// Alg. 1 as printed sets ω_0 = 0; App. B.1 and Lemma 3 use ω_0 = 2.
// Hand derivation at r = 1, q in the span of the eigenvectors of μ and L (σ = ±1,
// where 1 − cλ = ±ρ with c = 2/(L+μ), ρ = (L−μ)/(L+μ)):
//   residual of ξ_0 = c q:  (1 − cλ) q = ±ρ q;
//   the residuals r_i = q − Aξ_i obey r_i = ω_i (I − cA) r_{i-1} − (ω_i − 1) r_{i-2}
//   (substitute ξ_i = ω_i ξ_{i-1} − ω_i c (Aξ_{i-1} − q) − (ω_i − 1) ξ_{i-2}), r_{-1} = q,
//   so on an eigenvector with 1 − cλ = ±ρ:  e_0 = ±ρ,  e_1 = ω_1 ρ² − (ω_1 − 1);
//     ω_0 = 2: ω_1 = 4/(4 − 2ρ²) = 2/(2−ρ²): e_1 = 1 − ω_1(1 − ρ²) = ρ²/(2−ρ²)
//              = 1/T_2(1/ρ), exactly the degree-2 minimax bound;
//     ω_0 = 0: ω_1 = 1: e_1 = ρ², larger by the factor 2 − ρ² (≈ 1.075 at κ = 51).
TEST(ChebyshevSolver, OmegaZeroTwoVersusZero) {
  PrecisionGuard g;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const int n = 12;
  const Spd<M> s = make_spd<M>(n, 1.0, 51.0, 21);
  const M rho = (s.L - s.mu) / (s.L + s.mu);
  std::vector<M> c(n, num<M>(0));
  c[0] = num<M>(0.6);
  c[n - 1] = num<M>(-0.8);
  const auto q = s.from_coords(c);  // ‖q‖ = 1
  const M qn = norm(q);
  {
    const auto two = ttr::chebyshev_forward(s.op(), q.data(), n, params(s, 1, 2.0));
    const auto zero = ttr::chebyshev_forward(s.op(), q.data(), n, params(s, 1, 0.0));
    const M r2 = norm(residual(s, q, two.xi)) / qn, r0 = norm(residual(s, q, zero.xi)) / qn;
    EXPECT_LT(abs(r2 - rho * rho / (2 - rho * rho)), M(1e-60));
    EXPECT_LT(abs(r0 - rho * rho), M(1e-60));
    EXPECT_LT(abs(r2 - minimax(s.L, s.mu, 2)), M(1e-60));
    EXPECT_GT(r0, minimax(s.L, s.mu, 2) * M(1.07)) << "ω_0 = 0 should miss the degree-2 bound by 2 − ρ²";
  }
  // Over r = 0..40 on a full-spectrum q: ω_0 = 2 always meets the degree-(r+1) bound;
  // ω_0 = 0 misses it for some r (r = 1 at least, by the derivation above).
  const auto qf = random_vec<M>(n, 22);
  auto qmix = q;
  for (int i = 0; i < n; ++i) qmix[i] += M(1e-3) * qf[i];
  int misses = 0;
  for (int r = 0; r <= 40; ++r) {
    const M bound = minimax(s.L, s.mu, r + 1) * norm(qmix) * (1 + M(1e-60));
    const auto two = ttr::chebyshev_forward(s.op(), qmix.data(), n, params(s, r, 2.0));
    const auto zero = ttr::chebyshev_forward(s.op(), qmix.data(), n, params(s, r, 0.0));
    EXPECT_LE(norm(residual(s, qmix, two.xi)), bound) << "ω_0 = 2, r = " << r;
    if (norm(residual(s, qmix, zero.xi)) > bound) ++misses;
  }
  EXPECT_GE(misses, 1);
  // ω_0 = 0 still converges: its weights tend to the same fixed point ω_1* (the map
  // ω ↦ 4/(4 − ρ²ω) is a contraction near it, Lemma 4), after which the error
  // contracts by R per step up to a factor linear in r (double root at σ = ±1):
  // r·R^r at r = 300, κ = 51 is ≈ 300·10^-36.7 ≈ 6e-35; 1e-30 allows 10^4 for the
  // transient of the first steps.
  const auto far = ttr::chebyshev_forward(s.op(), qf.data(), n, params(s, 300, 0.0));
  EXPECT_LT(norm(residual(s, qf, far.xi)) / norm(qf), M(1e-30));
  EXPECT_LT(dist(far.xi, s.solve(qf)) / norm(s.solve(qf)), M(1e-28));
}

// ------------------------------------------------------------------ reverse passes

struct Backward {
  std::vector<M> dq, dA;
};

Backward stored(const Spd<M>& s, const std::vector<M>& q, int r, const std::vector<M>& dxi) {
  const auto p = params(s, r);
  const auto f = ttr::chebyshev_forward(s.op(), q.data(), s.n, p, /*store=*/true);
  Backward b{std::vector<M>(s.n), std::vector<M>(static_cast<std::size_t>(s.n) * s.n, num<M>(0))};
  ttr::chebyshev_backward_stored(s.op(), s.n, p, f, dxi.data(), b.dq.data(), b.dA.data());
  return b;
}

Backward reversed(const Spd<M>& s, const std::vector<M>& q, int r, const std::vector<M>& dxi) {
  const auto p = params(s, r);
  const auto f = ttr::chebyshev_forward(s.op(), q.data(), s.n, p);
  Backward b{std::vector<M>(s.n), std::vector<M>(static_cast<std::size_t>(s.n) * s.n, num<M>(0))};
  ttr::chebyshev_backward_reversed(s.op(), q.data(), s.n, p, f.xi.data(), f.xi_prev.data(), f.omega.back(),
                                   dxi.data(), b.dq.data(), b.dA.data());
  return b;
}

// Alg. 2 recovers ξ_{i-2} from ξ_i, ξ_{i-1} (dividing by b_i = 1 − ω_i) and ω_{i-1}
// from ω_i: the reverse of a contracting recursion, so rounding errors grow by about
// 1/R per step (GKA Remark 2) and the weights by about 1/R_ω (Lemma 4): at r = 40,
// κ = 51 that is ≲ 0.7543^-40 · 0.7253^-40 ≈ 3e10; times u·r·n ≈ 4e-75 gives ≈ 1e-64 < 1e-60.
TEST(ChebyshevBackward, ReversedEqualsStored) {
  PrecisionGuard g;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  for (int n : {8, 12}) {
    const Spd<M> s = make_spd<M>(n, 1.0, 51.0, 31 + n);
    const auto q = random_vec<M>(n, 32 + n);
    const auto dxi = random_vec<M>(n, 33 + n);
    for (int r : {1, 2, 5, 17, 40}) {
      SCOPED_TRACE(testing::Message() << "n = " << n << ", r = " << r);
      const Backward a = stored(s, q, r, dxi), b = reversed(s, q, r, dxi);
      EXPECT_LT(dist(a.dq, b.dq) / norm(a.dq), M(1e-60));
      EXPECT_LT(dist(a.dA, b.dA) / norm(a.dA), M(1e-60));
    }
  }
}

// GKA Lemma 2: ξ_r = P(A) q with P independent of q and A symmetric, so
// dq = P(A)ᵀ dξ_r = P(A) dξ_r = Chebyshev forward run with q := dξ_r.
TEST(ChebyshevBackward, Lemma2DqIsForwardRunOnDxi) {
  PrecisionGuard g;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const int n = 10;
  const Spd<M> s = make_spd<M>(n, 0.5, 20.0, 41);
  const auto q = random_vec<M>(n, 42);
  const auto dxi = random_vec<M>(n, 43);
  for (int r : {0, 1, 3, 25, 40}) {
    SCOPED_TRACE(r);
    const auto expect = ttr::chebyshev_forward(s.op(), dxi.data(), n, params(s, r)).xi;
    const Backward a = stored(s, q, r, dxi);
    EXPECT_LT(dist(a.dq, expect) / norm(expect), M(1e-60));
    if (r >= 1) {
      const Backward b = reversed(s, q, r, dxi);
      EXPECT_LT(dist(b.dq, expect) / norm(expect), M(1e-60));
    }
  }
}

// Central differences of f = dξᵀ ξ_r(q, A) at 512 bits with h = 1e-40 (L, μ held
// fixed). In q, f is linear: the quotient is exact up to rounding u_512·|f|/h ≈ 1e-114.
// In A_ab (perturbed alone, the gradient of a general matrix argument), f is a
// polynomial of degree r+1: truncation error h²/6·|f'''| ≈ 1e-80·|f'''|, with |f'''|
// of order (r·‖c‖)^3 ≲ 1e6 here. The backward passes run at 256 bits on the same
// system built at 256 bits (differing from the 512-bit one by ~u_256 relative, which
// moves the gradient by ≲ κ·r·u_256). So 1e-60 relative to the gradient's norm.
TEST(ChebyshevBackward, MatchesFiniteDifferences) {
  PrecisionGuard g;
  const int n = 8, r = 40;
  const std::uint64_t sys_seed = 51, q_seed = 52, d_seed = 53;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const Spd<M> s256 = make_spd<M>(n, 1.0, 30.0, sys_seed);
  const auto q256 = random_vec<M>(n, q_seed), d256 = random_vec<M>(n, d_seed);
  const Backward a = stored(s256, q256, r, d256), b = reversed(s256, q256, r, d256);

  ASSERT_GE(ttr::precision_control<M>::set_bits(512), 512u);
  Spd<M> s = make_spd<M>(n, 1.0, 30.0, sys_seed);
  const auto q = random_vec<M>(n, q_seed), d = random_vec<M>(n, d_seed);
  const M h = M(1e-40);
  auto f = [&](const Spd<M>& sys, const std::vector<M>& qq) {
    const auto xi = ttr::chebyshev_forward(sys.op(), qq.data(), n, params(sys, r)).xi;
    M v = num<M>(0);
    for (int i = 0; i < n; ++i) v += d[i] * xi[i];
    return v;
  };
  std::vector<M> fd_q(n), fd_A(static_cast<std::size_t>(n) * n);
  for (int j = 0; j < n; ++j) {
    auto qp = q, qm = q;
    qp[j] += h;
    qm[j] -= h;
    fd_q[j] = (f(s, qp) - f(s, qm)) / (2 * h);
  }
  for (std::size_t e = 0; e < fd_A.size(); ++e) {
    const M keep = s.A[e];
    s.A[e] = keep + h;
    const M fp = f(s, q);
    s.A[e] = keep - h;
    const M fm = f(s, q);
    s.A[e] = keep;
    fd_A[e] = (fp - fm) / (2 * h);
  }
  for (const Backward* bw : {&a, &b}) {
    const char* which = bw == &a ? "stored" : "reversed";
    std::vector<M> dq(bw->dq.begin(), bw->dq.end()), dA(bw->dA.begin(), bw->dA.end());
    EXPECT_LT(dist(dq, fd_q) / norm(fd_q), M(1e-60)) << which << " dq";
    EXPECT_LT(dist(dA, fd_A) / norm(fd_A), M(1e-60)) << which << " dA";
  }
}

}  // namespace
