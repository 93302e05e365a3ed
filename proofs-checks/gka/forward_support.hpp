// Helpers of the GKA forward entries (forward_*.cpp): the independent side of
// each comparison — dense Gaussian elimination, explicit matrices, Chebyshev
// polynomials from their trigonometric definition — written here, so none of
// it is the reference code under test (reference/gka, reference/solvers).
#pragma once

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "proofs-checks/support.hpp"
#include "reference/core/matrix.hpp"

namespace ttr::proofs {

std::vector<Entry> gka_forward_ridge_entries();      // eqs. (3), (KF), (4), (5), §4.2, docs/layers.md
std::vector<Entry> gka_forward_chebyshev_entries();  // eq. (CH), Alg. 1, Lemmas 3-4, Remark 1
std::vector<Entry> gka_forward_kalman_entries();     // §6.4 eqs. (17), (19)

namespace gkaf {

using Vec = std::vector<mp>;
using Mat = Matrix<mp>;

inline std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

// Data drawn as doubles, so every input is exactly representable in any precision
// (the same seed gives the same inputs at 128 or 512 bits).
inline double unif(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
inline Vec random_vec(std::mt19937_64& rng, int n, double lo = -1, double hi = 1) {
  Vec v(n);
  for (auto& x : v) x = mp(unif(rng, lo, hi));
  return v;
}

inline mp norm2(const Vec& v) {
  mp s = 0;
  for (const auto& x : v) s += x * x;
  return sqrt(s);
}
inline mp fro(const Mat& m) {
  mp s = 0;
  for (const auto& x : m.a) s += x * x;
  return sqrt(s);
}
// ‖a − b‖ / ‖b‖ (‖a − b‖ when b = 0).
inline double rel_diff(const Vec& a, const Vec& b) {
  mp d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (a[i] - b[i]) * (a[i] - b[i]);
    n += b[i] * b[i];
  }
  return to_d(n == 0 ? sqrt(d) : sqrt(d / n));
}
inline double rel_diff(const mp& a, const mp& b) { return to_d(b == 0 ? abs(a - b) : abs((a - b) / b)); }

inline Vec matvec(const Mat& A, const Vec& x) {
  Vec y(A.rows, mp(0));
  for (int i = 0; i < A.rows; ++i)
    for (int j = 0; j < A.cols; ++j) y[i] += A(i, j) * x[j];
  return y;
}
inline Mat identity(int n) {
  Mat I(n, n, mp(0));
  for (int i = 0; i < n; ++i) I(i, i) = 1;
  return I;
}

// Gaussian elimination with partial pivoting (the reference code uses Cholesky
// and an LU of its own; this one is written independently for the checks).
inline Vec solve_gepp(Mat A, Vec b) {
  const int n = A.rows;
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int i = c + 1; i < n; ++i)
      if (abs(A(i, c)) > abs(A(p, c))) p = i;
    if (p != c) {
      for (int j = 0; j < n; ++j) std::swap(A(c, j), A(p, j));
      std::swap(b[c], b[p]);
    }
    for (int i = c + 1; i < n; ++i) {
      const mp f = A(i, c) / A(c, c);
      for (int j = c; j < n; ++j) A(i, j) -= f * A(c, j);
      b[i] -= f * b[c];
    }
  }
  Vec x(n);
  for (int i = n - 1; i >= 0; --i) {
    mp s = b[i];
    for (int j = i + 1; j < n; ++j) s -= A(i, j) * x[j];
    x[i] = s / A(i, i);
  }
  return x;
}

// A random orthogonal matrix: a product of `count` Householder reflections
// (orthogonal to working precision), for SPD matrices with a prescribed spectrum.
inline Mat random_orthogonal(std::mt19937_64& rng, int n, int count = 3) {
  Mat Q = identity(n);
  for (int h = 0; h < count; ++h) {
    const Vec u = random_vec(rng, n);
    mp uu = 0;
    for (const auto& x : u) uu += x * x;
    // Q ← Q (I − 2uuᵀ/uᵀu)
    for (int i = 0; i < n; ++i) {
      mp s = 0;
      for (int j = 0; j < n; ++j) s += Q(i, j) * u[j];
      s = 2 * s / uu;
      for (int j = 0; j < n; ++j) Q(i, j) -= s * u[j];
    }
  }
  return Q;
}

// Q diag(d) Qᵀ x.
inline Vec spectral_apply(const Mat& Q, const Vec& d, const Vec& x) {
  const int n = Q.rows;
  Vec y(n, mp(0)), z(n, mp(0));
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) z[j] += Q(i, j) * x[i];
    z[j] *= d[j];
  }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) y[i] += Q(i, j) * z[j];
  return y;
}

// T_n(x) from its trigonometric/hyperbolic definition (no three-term recurrence):
// cos(n acos x) on [−1, 1], cosh(n acosh x) for x ≥ 1, (−1)^n T_n(−x) for x ≤ −1.
inline mp cheb_T(int n, const mp& x) {
  if (n == 0) return mp(1);
  if (x >= 1) return cosh(n * acosh(x));
  if (x <= -1) return (n % 2 ? -1 : 1) * cosh(n * acosh(-x));
  return cos(n * acos(x));
}

// The residual polynomial of the Chebyshev method of degree d on [μ, L]:
// p_d(λ) = T_d(σ(λ)) / T_d(σ(0)),  σ(λ) = (L + μ − 2λ)/(L − μ)  (L > μ).
inline mp cheb_residual(int d, const mp& lam, const mp& L, const mp& mu) {
  return cheb_T(d, (L + mu - 2 * lam) / (L - mu)) / cheb_T(d, (L + mu) / (L - mu));
}

// Algorithm 1 exactly as printed, line by line, with the initial weight as a
// parameter (printed: ω_0 = 0; text and Lemma 3: ω_0 = 2). `apply` computes H x.
// Returns ξ_r; `omegas` receives ω_0..ω_r.
template <class Apply>
Vec alg1_as_printed(Apply&& apply, const Vec& q, const mp& L, const mp& mu, int r, const mp& omega0,
                    std::vector<mp>* omegas = nullptr) {
  const int n = static_cast<int>(q.size());
  const mp rho = (L - mu) / (L + mu);                       // line 2
  mp omega = omega0;                                         // line 2
  Vec xi_m2(n, mp(0)), xi_m1(n);                             // ξ_{-1} = 0
  for (int j = 0; j < n; ++j) xi_m1[j] = 2 * q[j] / (L + mu);  // ξ_0 = 2q/(L+μ)
  if (omegas) omegas->assign(1, omega);
  for (int i = 1; i <= r; ++i) {                             // line 3
    omega = 4 / (4 - rho * rho * omega);                     // weight schedule
    if (omegas) omegas->push_back(omega);
    const Vec Hx = apply(xi_m1);
    Vec xi(n);
    for (int j = 0; j < n; ++j) xi[j] = xi_m1[j] - 2 * omega / (L + mu) * (Hx[j] - q[j]);  // grad descent
    for (int j = 0; j < n; ++j) xi[j] = xi[j] + (omega - 1) * (xi_m1[j] - xi_m2[j]);       // momentum
    xi_m2 = std::move(xi_m1);
    xi_m1 = std::move(xi);
  }
  return xi_m1;  // line 5: ξ_r
}

// Extreme eigenvalues of a symmetric matrix by cyclic Jacobi rotations, run to
// working precision (independent of the Eigen solver the reference uses in double).
inline std::pair<mp, mp> jacobi_extreme_eigenvalues(Mat A) {
  const int n = A.rows;
  const mp scale = fro(A);
  const mp eps = ldexp(mp(1), -static_cast<int>(mpfr_get_prec(scale.backend().data())));
  for (int sweep = 0; sweep < 60; ++sweep) {
    mp off = 0;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) off += A(i, j) * A(i, j);
    if (sqrt(off) <= eps * scale) break;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        if (A(p, q) == 0) continue;
        const mp theta = (A(q, q) - A(p, p)) / (2 * A(p, q));
        const mp t = (theta >= 0 ? 1 : -1) / (abs(theta) + sqrt(theta * theta + 1));
        const mp c = 1 / sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // A ← Jᵀ A J
          const mp akp = A(k, p), akq = A(k, q);
          A(k, p) = c * akp - s * akq;
          A(k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {
          const mp apk = A(p, k), aqk = A(q, k);
          A(p, k) = c * apk - s * aqk;
          A(q, k) = s * apk + c * aqk;
        }
      }
  }
  mp lo = A(0, 0), hi = A(0, 0);
  for (int i = 1; i < n; ++i) {
    if (A(i, i) < lo) lo = A(i, i);
    if (A(i, i) > hi) hi = A(i, i);
  }
  return {lo, hi};
}

// Keeps the largest value seen and a description of where.
struct Worst {
  double value = -INFINITY;
  std::string where;
  void see(double v, const std::string& w) {
    if (!(v <= value)) {  // NaN wins: it must show up
      value = v;
      where = w;
    }
  }
};

}  // namespace gkaf
}  // namespace ttr::proofs
