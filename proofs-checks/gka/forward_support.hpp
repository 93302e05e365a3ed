// Helpers of the GKA forward entries (forward_*.cpp): the independent side of
// each comparison — Chebyshev polynomials from their trigonometric definition
// and Alg. 1 transcribed line by line, with the dense linear algebra of
// support/dense.hpp — written here, so none of it is the reference code under
// test (reference/gka, reference/solvers). What only forward_ridge.cpp and
// forward_state.cpp share is in forward_ridge_support.hpp.
#pragma once

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "proofs-checks/support.hpp"
#include "proofs-checks/support/dense.hpp"
#include "reference/solvers/chebyshev.hpp"

namespace ttr::proofs {

std::vector<Entry> gka_forward_ridge_entries();      // eqs. (3), (KF)
std::vector<Entry> gka_forward_state_entries();      // eqs. (4), (CH) layer, (5), §4.2, docs/layers.md
std::vector<Entry> gka_forward_chebyshev_entries();  // eq. (CH), Alg. 1
std::vector<Entry> gka_forward_chebyshev_weight_entries();  // Lemmas 3-4, Remark 1
std::vector<Entry> gka_forward_kalman_entries();     // §6.4 eqs. (17), (19)

namespace gkaf {

using Vec = std::vector<mp>;

inline std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

// Data drawn as doubles, so every input is exactly representable in any precision
// (the same seed gives the same inputs at 128 or 512 bits).
inline double unif(std::mt19937_64& rng, double lo, double hi) { return dense::uniform<double>(rng, lo, hi); }

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

// The weights of Alg. 1's schedule from ρ, via the reference code under test
// (chebyshev_forward at n = 1, A = 1).
inline std::vector<mp> reference_weights(const mp& rho, int r) {
  const mp L = 1 + rho, mu = 1 - rho;  // (L − μ)/(L + μ) = ρ
  const mp one = 1;
  auto apply = [](const mp* x, mp* y) { y[0] = x[0]; };
  const ChebyshevParams<mp> p{L, mu, r, mp(2)};
  return chebyshev_forward(apply, &one, 1, p).omega;
}

// An entry of the GKA paper (make_entry with the paper filled in).
inline Entry gka_entry(std::string id, std::string ref, std::string statement, Method m, std::string how, Status st,
                       std::string correction, std::function<Evidence(const ProofOptions&, const std::string&)> fn) {
  return make_entry(Paper::GKA, std::move(id), std::move(ref), std::move(statement), m, std::move(how), st,
                    std::move(correction), std::move(fn));
}

}  // namespace gkaf
}  // namespace ttr::proofs
