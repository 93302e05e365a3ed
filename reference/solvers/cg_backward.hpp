// Reverse mode of conjugate_gradient (iterative.hpp) over its recorded iterates
// (CgTrace): the exact gradient of CG's output x_m after m steps, the computation as
// it ran, not the implicit (exact-solve) gradient. GKA §4.2.3 and Lemma 2: unlike
// Chebyshev, CG's coefficients α_i, β_i depend on the right-hand side, so
// CG(A, dx, m) (Table 1's "CG (impl)") is not this gradient (tests measure the gap).
//
// Forward, from x_0 = 0, r_0 = p_0 = q, rr_0 = r_0·r_0; for i = 0..m-1:
//   a_i = A p_i,  π_i = p_i·a_i,  α_i = rr_i/π_i,
//   x_{i+1} = x_i + α_i p_i,  r_{i+1} = r_i − α_i a_i,  rr_{i+1} = r_{i+1}·r_{i+1},
//   β_i = rr_{i+1}/rr_i,  p_{i+1} = r_{i+1} + β_i p_i.
// Adjoint (bars; derived by the chain rule, each line the reverse of one above),
// starting from x̄_m = dx and r̄ = p̄ = 0, rr̄ = 0 (r_m, p_m, rr_m do not reach x_m):
//   for i = m-1..0:
//     p_{i+1}:  r̄_{i+1} += p̄_{i+1},  β̄_i = ⟨p̄_{i+1}, p_i⟩,  p̄_i = β_i p̄_{i+1}
//     β_i:      rr̄_{i+1} += β̄_i/rr_i,  rr̄_i = −β̄_i β_i/rr_i
//     rr_{i+1}: r̄_{i+1} += 2 rr̄_{i+1} r_{i+1}
//     r_{i+1}:  r̄_i = r̄_{i+1},  ᾱ_i = −⟨r̄_{i+1}, a_i⟩,  ā_i = −α_i r̄_{i+1}
//     x_{i+1}:  ᾱ_i += ⟨x̄, p_i⟩,  p̄_i += α_i x̄           (x̄_i = x̄_{i+1} = dx)
//     α_i:      rr̄_i += ᾱ_i/π_i,  π̄_i = −ᾱ_i α_i/π_i
//     π_i:      p̄_i += π̄_i a_i,  ā_i += π̄_i p_i
//     a_i:      p̄_i += Aᵀ ā_i,  Ā += ā_i p_iᵀ
//   then rr_0: r̄_0 += 2 rr̄_0 r_0;  q̄ = r̄_0 + p̄_0.
// The divisions by rr_i and π_i are the forward's own; where CG has converged to
// the working precision's rounding (m ≥ n) they divide rounding noise by rounding
// noise, in the forward and its reverse alike: the gradient is then the one of
// the rounded computation and not a derivative of A⁻¹q (tests keep m < n, GKA's r ≪ K).
#pragma once

#include <vector>

#include "reference/core/scalar.hpp"
#include "reference/solvers/iterative.hpp"

namespace ttr {

// dq = ∂L/∂q. `apply_t(x, y)`: y = Aᵀ x. `add_dA(u, v)`: the caller's Ā += u vᵀ.
template <class T, class ApplyT, class AddDA>
void conjugate_gradient_backward(ApplyT&& apply_t, AddDA&& add_dA, int n, const CgTrace<T>& tr, const T* dx, T* dq) {
  const T zero = from_double<T>(0.0), two = from_double<T>(2.0);
  std::vector<T> rbar(n, zero), pbar(n, zero), pbar_prev(n), abar(n), Atabar(n);
  T rrbar = zero;  // ∂L/∂rr_{i+1}
  for (int i = tr.steps - 1; i >= 0; --i) {
    const std::vector<T>& p = tr.p[i];
    const std::vector<T>& a = tr.Ap[i];
    const std::vector<T>& r_next = tr.r[i + 1];
    // p_{i+1} = r_{i+1} + β_i p_i
    const T beta_bar = dot(pbar.data(), p.data(), n);
    for (int j = 0; j < n; ++j) {
      rbar[j] += pbar[j];
      pbar_prev[j] = tr.beta[i] * pbar[j];
    }
    // β_i = rr_{i+1}/rr_i
    rrbar += beta_bar / tr.rr[i];
    T rrbar_i = -(beta_bar * tr.beta[i] / tr.rr[i]);
    // rr_{i+1} = r_{i+1}·r_{i+1}
    for (int j = 0; j < n; ++j) rbar[j] += two * rrbar * r_next[j];
    // r_{i+1} = r_i − α_i a_i (r̄_i = r̄_{i+1}: rbar carries over)
    T alpha_bar = -dot(rbar.data(), a.data(), n);
    for (int j = 0; j < n; ++j) abar[j] = -(tr.alpha[i] * rbar[j]);
    // x_{i+1} = x_i + α_i p_i
    alpha_bar += dot(dx, p.data(), n);
    for (int j = 0; j < n; ++j) pbar_prev[j] += tr.alpha[i] * dx[j];
    // α_i = rr_i/π_i
    rrbar_i += alpha_bar / tr.pAp[i];
    const T pi_bar = -(alpha_bar * tr.alpha[i] / tr.pAp[i]);
    // π_i = p_i·a_i
    for (int j = 0; j < n; ++j) {
      pbar_prev[j] += pi_bar * a[j];
      abar[j] += pi_bar * p[j];
    }
    // a_i = A p_i
    apply_t(abar.data(), Atabar.data());
    for (int j = 0; j < n; ++j) pbar_prev[j] += Atabar[j];
    add_dA(abar.data(), p.data());
    std::swap(pbar, pbar_prev);
    rrbar = rrbar_i;
  }
  // rr_0 = r_0·r_0, r_0 = p_0 = q.
  const std::vector<T>& r0 = tr.r[0];
  for (int j = 0; j < n; ++j) dq[j] = rbar[j] + two * rrbar * r0[j] + pbar[j];
}

}  // namespace ttr
