// GKA's backward through the solve of one token, (H_t + λ_t I) x = q̂ (sequential.hpp),
// for each solver: the adjoints called by gka_backward (backward.hpp). Each adds
// to dq̂ (dsq), dH (row-major K×K, H read as a general matrix), dλ and d‖H‖_F
// (dfro) from the cotangent dx of the solver's output. A = H + λI is applied as the
// forward applies it (`apply`: y = A x) and transposed (`apply_t`: y = Aᵀ x).
//
//  * exact solve, implicit differentiation (GKA eq. (6), Lemma 1, eq. (7)):
//      u = A⁻ᵀ dx,  dq̂ += u,  dH −= u xᵀ,  dλ −= ⟨u, x⟩.
//  * Chebyshev, unrolled: the reverse pass over the stored iterates ξ_{-1..r} and
//    products Aξ_{i-1} (GKA App. C.1, eqs. (54)-(58)); with the bounds L = ‖H‖_F + λ,
//    μ = λ differentiated too (derivation in backward.hpp's header).
//  * Chebyshev, GKA Alg. 2 as derived: nothing stored but ξ_r, ξ_{r-1}, ω_r; see
//    gka_chebyshev_alg2_backward below.
//  * CG: reverse mode over CG's recorded iterates (reference/solvers/cg_backward.hpp).
#pragma once

#include <vector>

#include "reference/solvers/cg_backward.hpp"
#include "reference/solvers/chebyshev.hpp"
#include "reference/solvers/dense.hpp"

namespace ttr {

template <class T>
struct GkaSolveAdjoint {
  std::vector<T>& dsq;  // ∂L/∂q̂
  T* dH;                // ∂L/∂H_t (K×K), accumulated
  T& dlam;              // ∂L/∂λ_t
  T& dfro;              // ∂L/∂‖H_t‖_F
};

// Implicit differentiation of the exact solve: A is the forward's matrix H + λI.
template <class T>
void gka_exact_solve_backward(const std::vector<T>& A, int K, const std::vector<T>& x, const std::vector<T>& dx,
                              const GkaSolveAdjoint<T>& g) {
  const T zero = from_double<T>(0.0);
  std::vector<T> u(K);
  if (!cholesky_solve(A, K, dx.data(), u.data()) && !lu_solve(A, K, dx.data(), u.data()))
    std::fill(u.begin(), u.end(), zero / zero);
  for (int i = 0; i < K; ++i) {
    g.dsq[i] += u[i];
    for (int j = 0; j < K; ++j) mul_add_to(g.dH[static_cast<std::size_t>(i) * K + j], -u[i], x[j]);
  }
  g.dlam = -dot(u.data(), x.data(), K);
}

// The bounds' part of the Chebyshev adjoint, shared by both routes: from ds (the
// sum over i ≥ 1 of −dc_i c_i/s), dρ² and dξ_0, with s = L + μ, c_0 = 2/s:
//   ds −= ⟨dξ_0, q̂⟩ c_0/s,  dρ = 2ρ dρ²,  ds −= dρ ρ/s,  dL = ds + dρ/s,  dμ = ds − dρ/s;
//   L = ‖H‖_F + λ, μ = λ:  d‖H‖_F += dL,  dλ += dL + dμ.
template <class T>
void gka_chebyshev_bounds_backward(const ChebyshevParams<T>& cp, const std::vector<T>& sq, const T* dxi0, T ds,
                                   const T& drho2, const GkaSolveAdjoint<T>& g) {
  const int K = static_cast<int>(sq.size());
  const T two = from_double<T>(2.0);
  const T s = cp.L + cp.mu, rho = (cp.L - cp.mu) / s;
  const T c0 = two / s;
  ds -= dot(dxi0, sq.data(), K) * c0 / s;
  const T drho = two * rho * drho2;
  ds -= drho * rho / s;
  const T dL = ds + drho / s, dmu = ds - drho / s;
  g.dfro += dL;
  g.dlam += dL + dmu;
}

// Chebyshev, the reverse pass over the stored iterates (ch from chebyshev_forward
// with store = true).
template <class T, class ApplyT>
void gka_chebyshev_unrolled_backward(ApplyT&& apply_t, const std::vector<T>& sq, const ChebyshevParams<T>& cp,
                                     const ChebyshevResult<T>& ch, const std::vector<T>& dx, bool bounds,
                                     const GkaSolveAdjoint<T>& g) {
  const int K = static_cast<int>(sq.size());
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0),
          four = from_double<T>(4.0);
  const int r = cp.iters;
  const T s = cp.L + cp.mu, rho = (cp.L - cp.mu) / s, rho2 = rho * rho;
  auto c = [&](int i) { return i == 0 ? two / s : two * ch.omega[i] / s; };
  auto xi = [&](int i) -> const std::vector<T>& { return ch.stored[static_cast<std::size_t>(i + 1)]; };
  std::vector<std::vector<T>> d(static_cast<std::size_t>(r) + 2, std::vector<T>(K, zero));  // dξ_{-1..r}
  auto dxi = [&](int i) -> std::vector<T>& { return d[static_cast<std::size_t>(i + 1)]; };
  dxi(r) = dx;
  std::vector<T> domega(static_cast<std::size_t>(r) + 1, zero), tmp(K);
  T diff = zero;
  T ds = zero, drho2 = zero;
  for (int i = r; i >= 1; --i) {
    const std::vector<T>& di = dxi(i);
    const std::vector<T>& xm1 = xi(i - 1);
    const std::vector<T>& xm2 = xi(i - 2);
    const std::vector<T>& Axm1 = ch.applied[static_cast<std::size_t>(i - 1)];  // A ξ_{i-1}, as the forward made it
    const T ci = c(i), wi = ch.omega[i];
    apply_t(di.data(), tmp.data());
    std::vector<T>& dm1 = dxi(i - 1);
    std::vector<T>& dm2 = dxi(i - 2);
    if constexpr (reorders_for_speed<T>::value) {
      // MPFR/MPFI: in place, fused, no temporaries (this O(K) work runs r times a token
      // and its allocations alone cost as much as a tenth of the reverse pass). The
      // other tiers keep the operations as written: the Monte Carlo model of GKA's
      // recurrent kernels and the low-precision sequential forms round each of them.
      const T mci = -ci, one_m_wi = one - wi;
      for (int j = 0; j < K; ++j) {
        mul_add_to(g.dsq[j], ci, di[j]);
        mul_add_to(dm1[j], wi, di[j]);
        mul_add_to(dm1[j], mci, tmp[j]);
        mul_add_to(dm2[j], one_m_wi, di[j]);
      }
    } else {
      for (int j = 0; j < K; ++j) {
        g.dsq[j] += ci * di[j];
        dm1[j] += wi * di[j] - ci * tmp[j];
        dm2[j] -= (wi - one) * di[j];
      }
    }
    for (int p = 0; p < K; ++p) {  // the row's factor formed once, not per element
      const T f = -(ci * di[p]);
      for (int q = 0; q < K; ++q) mul_add_to(g.dH[static_cast<std::size_t>(p) * K + q], f, xm1[q]);
    }
    g.dlam -= ci * dot(di.data(), xm1.data(), K);
    T dci = zero, dwi = domega[static_cast<std::size_t>(i)];
    for (int j = 0; j < K; ++j) {
      if constexpr (reorders_for_speed<T>::value) {  // dc_i = ⟨dξ_i, q̂ − Aξ_{i-1}⟩, no temporaries
        diff = sq[j];
        diff -= Axm1[j];
        mul_add_to(dci, di[j], diff);
        diff = xm1[j];
        diff -= xm2[j];
        mul_add_to(dwi, di[j], diff);
      } else {
        mul_add_to(dci, -di[j], Axm1[j] - sq[j]);
        mul_add_to(dwi, di[j], xm1[j] - xm2[j]);
      }
    }
    dwi += two * dci / s;
    ds -= dci * ci / s;
    const T w2 = wi * wi;
    domega[static_cast<std::size_t>(i - 1)] += dwi * rho2 * w2 / four;
    drho2 += dwi * ch.omega[i - 1] * w2 / four;
  }
  const T c0 = c(0);
  for (int j = 0; j < K; ++j) g.dsq[j] += c0 * dxi(0)[j];
  if (bounds) gka_chebyshev_bounds_backward(cp, sq, dxi(0).data(), ds, drho2, g);
}

// Chebyshev, GKA Alg. 2 as derived (App. C, C.1): a second route to the same
// gradient that stores no iterate.
//  * dq̂ by GKA Lemma 2 / eq. (53): ξ_r = p_r(A) q̂ with p_r fixed by (L, μ, r, ω_0)
//    (none depends on q̂), so dq̂ = p_r(A)ᵀ dx = p_r(Aᵀ) dx: Alg. 1 run on the adjoint
//    system, right-hand side dx. (p_r(A)ᵀ = p_r(Aᵀ) holds for any matrix, so this is
//    exact even where rounding left H_t not exactly symmetric.)
//  * dH, dλ and the bounds' gradient by running the adjoint recursion eq. (56)/(61)
//    for dξ_{i-1} together with the reversed forward: ν_{i-1} from ν_i by eq. (57),
//    ξ_{i-2} from ξ_i and ξ_{i-1} by eq. (54) solved for ξ_{i-2}:
//        ξ_{i-2} = (ξ_i − A_i ξ_{i-1} − c_i q̂) / b_i,   b_i = −(ν_i − 1).
//    Where this differs from the print: eqs. (59) and (60) print "+ c_i q" (solving
//    (54) gives − c_i q); eqs. (62)-(63) weight dξ_0 by 2ν_0/(L+μ) where ξ_0 = c_0 q
//    has c_0 = 2/(L+μ) (this route takes dq̂ from Lemma 2 instead, so the weight of
//    dξ_0 enters only the bounds' term, with c_0); and at i = 1 we take the known
//    ξ_{-1} = 0 and ν_0 = ω_0 rather than recovering them (with the printed Alg. 1's
//    ω_0 = 0, b_1 = 0 and ξ_{-1} could not be recovered at all). Alg. 2 holds L, μ
//    constant; the bounds' terms dc_i, dω_i of the unrolled pass are added here with
//    the recovered iterates, so both routes compute the gradient of the same function.
// Reversing multiplies rounding errors by up to 1/(ω* − 1) per step in ν and
// 1/√(ω* − 1) in ξ (ω* = lim ω_i; √(ω* − 1) = (√κ − 1)/(√κ + 1), GKA Lemma 3): fine
// for GKA's κ ≤ (a+1)/a and r ~ 30 at MPFR precisions (tests measure it), not an
// fp16 route. Returns false, touching nothing, where the iteration cannot be
// reversed: ρ = 0 (L = μ: ‖H_t‖_F = 0 under a fixed λ), GKA Remark 2.
template <class T, class Apply, class ApplyT>
bool gka_chebyshev_alg2_backward(Apply&& apply, ApplyT&& apply_t, const std::vector<T>& sq,
                                 const ChebyshevParams<T>& cp, const std::vector<T>& xi_r,
                                 const std::vector<T>& xi_rm1, const T& omega_r, const std::vector<T>& dx,
                                 bool bounds, const GkaSolveAdjoint<T>& g) {
  const int K = static_cast<int>(sq.size());
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0),
          four = from_double<T>(4.0);
  const int r = cp.iters;
  const T s = cp.L + cp.mu, rho = (cp.L - cp.mu) / s, rho2 = rho * rho;
  if (rho == zero) return false;
  const ChebyshevResult<T> adjoint = chebyshev_forward(apply_t, dx.data(), K, cp);  // Lemma 2
  for (int j = 0; j < K; ++j) g.dsq[j] += adjoint.xi[j];
  std::vector<T> xi = xi_r, xim1 = xi_rm1, xim2(K), Axm1(K), d = dx, d_next(K, zero), d_prev(K), Atd(K);
  T nu = omega_r, nu_next = zero, domega = zero, ds = zero, drho2 = zero;
  for (int i = r; i >= 1; --i) {
    const T ci = two * nu / s;
    const T nu_prev = i == 1 ? cp.omega0 : four / rho2 * (one - one / nu);  // eq. (57)
    apply(xim1.data(), Axm1.data());
    if (i == 1) {
      std::fill(xim2.begin(), xim2.end(), zero);  // ξ_{-1} = 0
    } else {
      const T bi = -(nu - one);
      for (int j = 0; j < K; ++j) xim2[j] = (xi[j] - (nu * xim1[j] - ci * Axm1[j]) - ci * sq[j]) / bi;
    }
    // eq. (58): dH −= c_i dξ_i ξ_{i-1}ᵀ, and λ's share of A.
    for (int p = 0; p < K; ++p) {
      const T f = -(ci * d[p]);
      for (int q = 0; q < K; ++q) mul_add_to(g.dH[static_cast<std::size_t>(p) * K + q], f, xim1[q]);
    }
    g.dlam -= ci * dot(d.data(), xim1.data(), K);
    // The coefficients: c_i = 2ν_i/s, b_i = −(ν_i − 1), ν_i = 4/(4 − ρ²ν_{i-1}).
    T dci = zero, dwi = domega;
    for (int j = 0; j < K; ++j) {
      mul_add_to(dci, -d[j], Axm1[j] - sq[j]);
      mul_add_to(dwi, d[j], xim1[j] - xim2[j]);
    }
    dwi += two * dci / s;
    ds -= dci * ci / s;
    const T w2 = nu * nu;
    domega = dwi * rho2 * w2 / four;
    drho2 += dwi * nu_prev * w2 / four;
    // eq. (56)/(61): dξ_{i-1} = ν_i dξ_i − c_i Aᵀ dξ_i − (ν_{i+1} − 1) dξ_{i+1}.
    apply_t(d.data(), Atd.data());
    for (int j = 0; j < K; ++j) {
      d_prev[j] = nu * d[j] - ci * Atd[j];
      if (i < r) d_prev[j] -= (nu_next - one) * d_next[j];
    }
    std::swap(d_next, d);
    std::swap(d, d_prev);
    nu_next = nu;
    nu = nu_prev;
    std::swap(xi, xim1);
    std::swap(xim1, xim2);
  }
  if (bounds) gka_chebyshev_bounds_backward(cp, sq, d.data(), ds, drho2, g);  // d = dξ_0
  return true;
}

// CG: reverse mode over the recorded iterates; A = H + λI, so Ā = u vᵀ adds u vᵀ to
// dH and ⟨u, v⟩ to dλ.
template <class T, class ApplyT>
void gka_cg_backward(ApplyT&& apply_t, int K, const CgTrace<T>& trace, const std::vector<T>& dx,
                     const GkaSolveAdjoint<T>& g) {
  std::vector<T> dq(K);
  auto add_dA = [&](const T* u, const T* v) {
    for (int p = 0; p < K; ++p)
      for (int q = 0; q < K; ++q) mul_add_to(g.dH[static_cast<std::size_t>(p) * K + q], u[p], v[q]);
    g.dlam += dot(u, v, K);
  };
  conjugate_gradient_backward(apply_t, add_dA, K, trace, dx.data(), dq.data());
  for (int j = 0; j < K; ++j) g.dsq[j] += dq[j];
}

}  // namespace ttr
