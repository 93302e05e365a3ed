// KLA-K's formulas exactly as printed (docs/papers.md), one scalar
// slot, generic over the scalar (mpfr or GMP rationals). The entries compare
// these against kla_k.hpp's independent posteriors; nothing here is derived.
#pragma once

#include "proofs-checks/kla_k/kla_k.hpp"

namespace ttr::proofs::klak {

// A 2×2 matrix [[α, β], [γ, δ]] acting as the Möbius map x ↦ (αx + β)/(γx + δ);
// composing maps multiplies their matrices (support/dense.hpp's product).
template <class S>
S mobius(const Mat<S>& m, const S& x) {
  return S((m(0, 0) * x + m(0, 1)) / (m(1, 0) * x + m(1, 1)));
}

// KLA-K eq. (17): M_t = [[1 + p̄_t φ_t, ā_t² φ_t], [p̄_t, ā_t²]].
template <class S>
Mat<S> printed_M(const TokenT<S>& t) {
  const S phi = t.phi(), a2 = t.a * t.a;
  return Mat<S>(2, 2, {S(1 + t.p * phi), S(a2 * phi), t.p, a2});
}

// KLA-K eq. (16): λ_t = (α_t λ_{t-1} + β_t)/(γ_t λ_{t-1} + δ_t) with eq. (17)'s entries.
template <class S>
S printed_eq16(const TokenT<S>& t, const S& lam_prev) {
  return mobius(printed_M(t), lam_prev);
}

// KLA-K eq. (18): λ_t = (ā_t² + p̄_t λ_{t-1})⁻¹ λ_{t-1} + φ_t.
template <class S>
S printed_eq18(const TokenT<S>& t, const S& lam_prev) {
  return S(lam_prev / (t.a * t.a + t.p * lam_prev) + t.phi());
}

// KLA-K eq. (19): η_t = (ā_t² + p̄_t λ_{t-1})⁻¹ ā_t η_{t-1} + k_t Λv_t v_t  (forget gate f_t).
template <class S>
S printed_forget_gate(const TokenT<S>& t, const S& lam_prev) {
  return S(t.a / (t.a * t.a + t.p * lam_prev));
}
template <class S>
S printed_eq19(const TokenT<S>& t, const S& lam_prev, const S& eta_prev) {
  return S(printed_forget_gate(t, lam_prev) * eta_prev + t.k * t.lv * t.v);
}

// KLA-K eq. (20): μ_t = ā_t (1 − k_t² Λv_t/λ_t) μ_{t-1} + k_t Λv_t v_t/λ_t.
template <class S>
S printed_eq20(const TokenT<S>& t, const S& lam, const S& mu_prev) {
  return S(t.a * (1 - t.k * t.k * t.lv / lam) * mu_prev + t.k * t.lv * t.v / lam);
}

// KLA-K eq. (21): L_t(μ) = Λv_t ‖v_t − k_t μ‖² + ρ_t λ_{t-1} ‖μ − ā_t μ_{t-1}‖²,
// ρ_t = 1/(ā_t² + p̄_t λ_{t-1}) (the factor named after eq. (18)).
template <class S>
S printed_eq21_objective(const TokenT<S>& t, const S& lam_prev, const S& mu_prev, const S& mu) {
  const S rho = 1 / (t.a * t.a + t.p * lam_prev);
  const S fit = t.v - t.k * mu, prox = mu - t.a * mu_prev;
  return S(t.lv * fit * fit + rho * lam_prev * prox * prox);
}

}  // namespace ttr::proofs::klak
