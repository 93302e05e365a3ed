// Chebyshev iteration for A ξ = q with A symmetric, spectrum in [μ, L], L ≥ μ > 0:
// GKA Alg. 1 forward, and two reverse-mode passes (GKA App. C.1):
//   - chebyshev_backward_stored: the chain rule over stored iterates ξ_{-1..r};
//   - chebyshev_backward_reversed: GKA Alg. 2, which recovers ξ_{i-2} from ξ_i and
//     ξ_{i-1} (eq. (59)) and ω_{i-1} from ω_i (eq. (57)) instead of storing them.
//
// Written from the derivation, eq. (54)-(55): for i >= 1
//   ξ_i = A_i ξ_{i-1} + b_i ξ_{i-2} + c_i q,  A_i = ω_i I − c_i A,  b_i = −(ω_i − 1),
//   c_i = 2ω_i/(L+μ);  ξ_0 = c_0 q with c_0 = 2/(L+μ);  ξ_{-1} = 0.
// Two places where the printed Alg. 2 differs from this derivation are recorded in
// the proof-check catalogue: eq. (59)/(60) print "+ c_i q" where solving (54) for
// ξ_{i-2} gives "− c_i q"; and eq. (62) at i = 1 yields ν_0 = ω_0 (= 2), so eq. (63)
// would weight dξ_0 by 2ω_0/(L+μ) instead of c_0 = 2/(L+μ). We implement the
// derivation.
#pragma once

#include <vector>

#include "reference/core/scalar.hpp"

namespace ttr {

template <class T>
struct ChebyshevParams {
  T L, mu;     // spectrum bounds of A
  int iters;   // r
  T omega0;    // starting weight of the recursion ω_i = 4/(4 − ρ²ω_{i-1}); GKA uses 2
};

template <class T>
struct ChebyshevResult {
  std::vector<T> xi, xi_prev;          // ξ_r and ξ_{r-1}
  std::vector<T> omega;                // ω_0 .. ω_r
  std::vector<std::vector<T>> stored;  // ξ_{-1} .. ξ_r when requested (index i+1)
  std::vector<std::vector<T>> applied;  // A ξ_{i-1} for i = 1..r when requested (index i-1)
};

// `apply(x, y)` computes y = A x for vectors of length n.
template <class T, class Apply>
ChebyshevResult<T> chebyshev_forward(Apply&& apply, const T* q, int n, const ChebyshevParams<T>& p,
                                     bool store = false) {
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0),
          four = from_double<T>(4.0);
  const T rho = (p.L - p.mu) / (p.L + p.mu);
  const T rho2 = rho * rho;
  const T c0 = two / (p.L + p.mu);
  ChebyshevResult<T> r;
  r.xi_prev.assign(n, zero);                                     // ξ_{-1}
  r.xi.resize(n);
  for (int j = 0; j < n; ++j) r.xi[j] = c0 * q[j];              // ξ_0
  r.omega.push_back(p.omega0);
  if (store) r.stored = {r.xi_prev, r.xi};
  std::vector<T> Ax(n), next(n);
  for (int i = 1; i <= p.iters; ++i) {
    const T w = four / (four - rho2 * r.omega.back());            // weight schedule
    r.omega.push_back(w);
    const T ci = two * w / (p.L + p.mu);
    apply(r.xi.data(), Ax.data());
    if (store) r.applied.push_back(Ax);
    for (int j = 0; j < n; ++j)
      next[j] = r.xi[j] - ci * (Ax[j] - q[j]) + (w - one) * (r.xi[j] - r.xi_prev[j]);  // grad step + momentum
    std::swap(r.xi_prev, r.xi);
    std::swap(r.xi, next);
    if (store) r.stored.push_back(r.xi);
  }
  return r;
}

// dq = Σ_{i=0}^r c_i dξ_i and dA = −Σ_{i=1}^r c_i dξ_i ξ_{i-1}ᵀ (row-major n×n,
// accumulated into dA when non-null), with dξ_{i-1} = A_iᵀ dξ_i + b_{i+1} dξ_{i+1}
// (eq. (56)); A is symmetric so A_iᵀ = A_i.
template <class T, class Apply>
void chebyshev_backward_stored(Apply&& apply, int n, const ChebyshevParams<T>& p, const ChebyshevResult<T>& fwd,
                               const T* dxi_r, T* dq, T* dA) {
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0);
  const int r = p.iters;
  auto c = [&](int i) { return i == 0 ? two / (p.L + p.mu) : two * fwd.omega[i] / (p.L + p.mu); };
  std::vector<T> d(dxi_r, dxi_r + n), d_next(n, zero), Ad(n), d_prev(n);
  for (int j = 0; j < n; ++j) dq[j] = zero;
  for (int i = r; i >= 0; --i) {
    const T ci = c(i);
    for (int j = 0; j < n; ++j) dq[j] += ci * d[j];
    if (i == 0) break;
    const std::vector<T>& xim1 = fwd.stored[i];  // ξ_{i-1}
    if (dA)
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) dA[static_cast<std::size_t>(a) * n + b] -= ci * d[a] * xim1[b];
    // dξ_{i-1} = ω_i dξ_i − c_i A dξ_i − (ω_{i+1} − 1) dξ_{i+1}
    apply(d.data(), Ad.data());
    const T b_next = i < r ? -(fwd.omega[i + 1] - one) : zero;
    for (int j = 0; j < n; ++j) d_prev[j] = fwd.omega[i] * d[j] - ci * Ad[j] + b_next * d_next[j];
    d_next = d;
    d = d_prev;
  }
}

// GKA Alg. 2 from the derivation: only ξ_r, ξ_{r-1} and ω_r are kept from the
// forward pass. Requires r >= 1 and ρ > 0 (else ω_i = 1, b_i = 0 and the
// iteration is plain gradient descent, which cannot be reversed: GKA Remark 2).
template <class T, class Apply>
void chebyshev_backward_reversed(Apply&& apply, const T* q, int n, const ChebyshevParams<T>& p, const T* xi_r,
                                 const T* xi_rm1, const T& omega_r, const T* dxi_r, T* dq, T* dA) {
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0),
          four = from_double<T>(4.0);
  const T rho = (p.L - p.mu) / (p.L + p.mu);
  const T rho2 = rho * rho;
  const int r = p.iters;
  std::vector<T> xi(xi_r, xi_r + n), xim1(xi_rm1, xi_rm1 + n), xim2(n), Ax(n);
  std::vector<T> d(dxi_r, dxi_r + n), d_next(n, zero), Ad(n), d_prev(n);
  T nu = omega_r, nu_next = zero;  // ν_i, ν_{i+1}
  for (int j = 0; j < n; ++j) dq[j] = zero;
  for (int i = r; i >= 1; --i) {
    const T ci = two * nu / (p.L + p.mu);
    for (int j = 0; j < n; ++j) dq[j] += ci * d[j];
    if (dA)
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) dA[static_cast<std::size_t>(a) * n + b] -= ci * d[a] * xim1[b];
    // ξ_{i-2} = (ξ_i − A_i ξ_{i-1} − c_i q) / b_i   (eq. (59) solved from (54))
    apply(xim1.data(), Ax.data());
    const T bi = -(nu - one);
    for (int j = 0; j < n; ++j) xim2[j] = (xi[j] - (nu * xim1[j] - ci * Ax[j]) - ci * q[j]) / bi;
    apply(d.data(), Ad.data());
    const T b_next = i < r ? -(nu_next - one) : zero;
    for (int j = 0; j < n; ++j) d_prev[j] = nu * d[j] - ci * Ad[j] + b_next * d_next[j];
    nu_next = nu;
    nu = four / rho2 * (one - one / nu);  // ν_{i-1}, eq. (57)
    d_next = d;
    d = d_prev;
    xi = xim1;
    xim1 = xim2;
  }
  const T c0 = two / (p.L + p.mu);  // ξ_0 = c_0 q: the weight is c_0, not 2ν_0/(L+μ)
  for (int j = 0; j < n; ++j) dq[j] += c0 * d[j];
}

// Error-reduction factor of r Chebyshev steps after the initial gradient step:
// the iterate ξ_r = P(A) q has polynomial degree r+1 in A, and
// max_{λ∈[μ,L]} |1 − λ P(λ)| = 1/T_{r+1}((L+μ)/(L−μ)) = 2R^{r+1}/(1 + R^{2(r+1)}),
// R = (√κ − 1)/(√κ + 1), κ = L/μ.
template <class T>
T chebyshev_minimax_bound(const T& L, const T& mu, int degree) {
  using std::sqrt;
  const T one = from_double<T>(1.0), two = from_double<T>(2.0);
  const T s = sqrt(L / mu);
  const T R = (s - one) / (s + one);
  T Rd = one;
  for (int i = 0; i < degree; ++i) Rd *= R;
  return two * Rd / (one + Rd * Rd);
}

}  // namespace ttr
