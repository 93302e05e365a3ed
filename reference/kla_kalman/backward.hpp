// Kalman linear attention (KLA-K), backward of the sequential form in information
// coordinates (sequential.hpp). Every state slot s = (n, d) is its own scalar
// filter, so the adjoint is a scalar recurrence per slot. Forward step t (KLA-K
// Thm 1 / eqs. (16)-(18), Thm 2 / eq. (19)), with λv = lambda_v:
//   e = λv_d v_d,  φ = k_n² λv_d,  c = ā² + p̄ Λ_{t-1},  f = ā / c,
//   η_t = f η_{t-1} + k_n e,   Λ_t = Λ_{t-1} / c + φ,
//   o_d = scale Σ_n q_n η_t/Λ_t,   o_var_d = scale² Σ_n q_n² / Λ_t.
// Cotangents do, do_var (optional), dlambda_T, deta_T (optional, ∂L/∂Λ_T, ∂L/∂η_T).
//
// Why the adjoint is not run in (Λ, η). Differentiating the two lines above as
// written gives dc = −(dΛ_t Λ_{t-1} + dη_t η_{t-1} ā)/c² and dp̄ += Λ_{t-1} dc. The
// outputs depend on (Λ, η) mostly through μ = η/Λ, so dΛ_t ≈ −μ_t dη_t and the two
// parts of dc nearly cancel: their difference is dη_t (ā η_{t-1} − μ_t Λ_{t-1}) =
// dη_t (ā η_{t-1} φ − Λ_{t-1} k_n e)/Λ_t, a fraction ~φ/Λ_t of either part. With
// p̄ = 0 and ā < 1, Λ_t ~ ā^{-2t}: past float64's range (Λ > 2^1024) that is a
// cancellation of more than 1024 bits, and at 512 bits dp̄ had no correct digit
// (reverse mode through the forward cancels identically). The same holds for the
// c-terms of dā.
//
// The adjoint below runs instead in moment coordinates, the variance P = 1/Λ and
// the mean μ = η/Λ (KLA-K Cor. 2.2), in which the step reads
//   P⁻_t = ā² P_{t-1} + p̄                   (= c/Λ_{t-1}: the Möbius map, eqs. (16)-(17))
//   P_t  = P⁻_t / (1 + φ P⁻_t)              (eq. (18): Λ_t = 1/P⁻_t + φ)
//   r_t  = P_t / P⁻_t = 1 − φ P_t           (the fraction of precision carried)
//   μ_t  = ā μ_{t-1} + w_t ν_t,  w_t = k_n λv_d P_t,  ν_t = v_d − k_n ā μ_{t-1}
//                                            (eq. (20), in innovation form)
//   o_d = scale Σ_n q_n μ_t,  o_var_d = scale² Σ_n q_n² P_t.
// Its local partial derivatives in closed form, with every difference one of the
// problem's own (the innovation ν, and 2r − 1):
//   ∂P_t/∂P⁻ = r²,  ∂P_t/∂φ = −P_t²,
//   ∂μ_t/∂μ_{t-1} = ā r,  ∂μ_t/∂ā|_{P⁻} = r μ_{t-1},  ∂μ_t/∂v = w,  ∂μ_t/∂P⁻ = k λv ν r²,
//   ∂μ_t/∂k|_{P⁻} = λv P_t (v (2r − 1) − 2 r k ā μ_{t-1}),   ∂μ_t/∂λv|_{P⁻} = k P_t r ν
// (the last two include the path through φ = k²λv: λv P_t ν + k λv ν ∂P_t/∂k − w ā μ_{t-1}
// with ∂P_t/∂k = −2kλv P_t² and φ P_t = 1 − r). Adjoint step per slot, t = T..1,
// carrying dP = ∂L/∂P_t, dμ = ∂L/∂μ_t:
//   (readout) dq_n += scale do_d μ_t + 2 scale² do_var_d q_n P_t;
//             dμ += scale do_d q_n;  dP += scale² do_var_d q_n²
//   (μ, φ)    dv_d += w dμ;  dā += r μ_{t-1} dμ;
//             dk_n += λv P_t (v (2r−1) − 2 r k ā μ_{t-1}) dμ − 2 k λv P_t² dP;
//             dλv_d += k P_t r ν dμ − k² P_t² dP
//   (P⁻)      dP⁻ = r² (dP + k λv ν dμ);  dā += 2 ā P_{t-1} dP⁻;  dp̄ += dP⁻
//   (carry)   dP ← ā² dP⁻,  dμ ← ā r dμ.
// Every term is a product of O(1) factors with the quantities' natural scales (P,
// r ∈ (0, 1], μ): nothing huge is subtracted, whatever the size of Λ. The two ends
// change coordinates: (Λ, η) = (1/P, μ/P) gives at t = T
//   dP_T = −Λ_T (Λ_T dΛ_T + η_T dη_T),  dμ_T = Λ_T dη_T   (given cotangents only),
// and at t = 0 dlambda_init = −P_0 (P_0 dP_0 + μ_0 dμ_0), deta_init = P_0 dμ_0 (with
// lambda_init absent, Λ_0 is the constant lambda0 and dlambda_init is still ∂L/∂Λ_0
// per slot). dā, dp̄ [H,N,D] are summed over batch and tokens.
// Stored vs recomputed: a forward sweep stores Λ_{t-1}, η_{t-1} (2·T·N·D values per
// sequence), the forward's own numbers; the backward recomputes c, Λ_{t-1}/c = 1/P⁻,
// Λ_t, η_t from them as the forward does and takes P = 1/Λ, μ = η/Λ, r = (Λ_{t-1}/c)/Λ_t.
#pragma once

#include <vector>

#include "reference/kla_kalman/sequential.hpp"

namespace ttr {

template <class T>
struct KlaCotangents {
  const Tensor<T>& o;          // [B,T,H,D]
  const Tensor<T>* o_var;      // [B,T,H,D]
  const Tensor<T>* lambda_T;   // [B,H,N,D]
  const Tensor<T>* eta_T;      // [B,H,N,D]
};

template <class T>
struct KlaGrads {
  Tensor<T> dq, dk, dv, dlambda_v, da_bar, dp_bar, dlambda_init, deta_init;
};

template <class T>
void kla_kalman_backward(const KlaInputs<T>& in, const T& lambda0, const T& scale, const KlaCotangents<T>& cot,
                         KlaGrads<T>& g) {
  const std::int64_t B = in.q.dim(0), len = in.q.dim(1), H = in.q.dim(2);
  const int N = static_cast<int>(in.q.dim(3)), D = static_cast<int>(in.v.dim(3));
  const std::size_t ND = static_cast<std::size_t>(N) * D;
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0), scale2 = scale * scale;
  g.dq = Tensor<T>(in.q.shape, zero);
  g.dk = Tensor<T>(in.k.shape, zero);
  g.dv = Tensor<T>(in.v.shape, zero);
  g.dlambda_v = Tensor<T>(in.lambda_v.shape, zero);
  g.da_bar = Tensor<T>(in.a_bar.shape, zero);
  g.dp_bar = Tensor<T>(in.p_bar.shape, zero);
  Tensor<T> lam0, eta0;
  kla_initial_state(in, lambda0, lam0, eta0);
  g.dlambda_init = Tensor<T>(lam0.shape, zero);
  g.deta_init = Tensor<T>(eta0.shape, zero);
  std::vector<T> Ls(static_cast<std::size_t>(len) * ND), Es(static_cast<std::size_t>(len) * ND);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const T* a = in.a_bar.data.data() + h * N * D;
      const T* p = in.p_bar.data.data() + h * N * D;
      T* da = g.da_bar.data.data() + h * N * D;
      T* dp = g.dp_bar.data.data() + h * N * D;
      const auto qs = seq(in.q, b, h), ks = seq(in.k, b, h), vs = seq(in.v, b, h), ls = seq(in.lambda_v, b, h);
      const auto dqs = seq(g.dq, b, h), dks = seq(g.dk, b, h), dvs = seq(g.dv, b, h), dls = seq(g.dlambda_v, b, h);
      // Forward sweep: Λ_{t-1}, η_{t-1} for every t (the forward's operations).
      std::vector<T> Lam(state_block(lam0, b, h), state_block(lam0, b, h) + ND);
      std::vector<T> Eta(state_block(eta0, b, h), state_block(eta0, b, h) + ND);
      for (std::int64_t t = 0; t < len; ++t)
        for (int d = 0; d < D; ++d) {
          const T ev = ls.row(t)[d] * vs.row(t)[d];
          for (int n = 0; n < N; ++n) {
            const std::size_t s = static_cast<std::size_t>(n) * D + d;
            Ls[t * ND + s] = Lam[s];
            Es[t * ND + s] = Eta[s];
            const T& kn = ks.row(t)[n];
            const T phi = kn * kn * ls.row(t)[d];
            const T denom = a[s] * a[s] + p[s] * Lam[s];
            Eta[s] = (a[s] / denom) * Eta[s] + kn * ev;
            Lam[s] = Lam[s] / denom + phi;
          }
        }
      // Backward sweep in moment coordinates (header): dP = ∂L/∂P_t, dM = ∂L/∂μ_t.
      std::vector<T> dP(ND, zero), dM(ND, zero);
      if (cot.lambda_T || cot.eta_T)
        for (std::size_t s = 0; s < ND; ++s) {
          const T dlam = cot.lambda_T ? state_block(*cot.lambda_T, b, h)[s] : zero;
          const T deta = cot.eta_T ? state_block(*cot.eta_T, b, h)[s] : zero;
          dP[s] = -(Lam[s] * (Lam[s] * dlam + Eta[s] * deta));
          dM[s] = Lam[s] * deta;
        }
      for (std::int64_t t = len - 1; t >= 0; --t)
        for (int d = 0; d < D; ++d) {
          const T& lv = ls.row(t)[d];
          const T& vd = vs.row(t)[d];
          const T ev = lv * vd;
          const T g_o = scale * seq(cot.o, b, h).row(t)[d];
          const T g_var = cot.o_var ? scale2 * seq(*cot.o_var, b, h).row(t)[d] : zero;
          for (int n = 0; n < N; ++n) {
            const std::size_t s = static_cast<std::size_t>(n) * D + d;
            const T& Lp = Ls[t * ND + s];
            const T& Ep = Es[t * ND + s];
            const T& kn = ks.row(t)[n];
            const T& qn = qs.row(t)[n];
            const T& as = a[s];
            // The forward's own quantities, then the moment ones.
            const T phi = kn * kn * lv;
            const T c = as * as + p[s] * Lp;
            const T Lc = Lp / c;  // Λ_{t-1}/c = 1/P⁻
            const T Lt = Lc + phi;
            const T Et = (as / c) * Ep + kn * ev;
            const T Pt = one / Lt, Pp = one / Lp;
            const T mu = Et / Lt, mu_p = Ep / Lp;
            const T r = Lc / Lt;
            const T kam = kn * as * mu_p;  // k ā μ_{t-1}, the prediction of v
            const T nu = vd - kam;         // innovation ν_t
            // The readouts.
            dqs.row(t)[n] += g_o * mu + two * g_var * qn * Pt;
            dM[s] += g_o * qn;
            dP[s] += g_var * qn * qn;
            // μ_t = ā μ_{t-1} + w ν and P_t = P⁻/(1 + φP⁻), local partials (header).
            const T dm = dM[s];
            const T PtP = Pt * Pt * dP[s];
            dvs.row(t)[d] += kn * lv * Pt * dm;
            da[s] += r * mu_p * dm;
            dks.row(t)[n] += lv * Pt * (vd * (two * r - one) - two * r * kam) * dm - two * kn * lv * PtP;
            dls.row(t)[d] += kn * Pt * r * nu * dm - kn * kn * PtP;
            // P⁻ = ā² P_{t-1} + p̄.
            const T dPm = r * r * (dP[s] + kn * lv * nu * dm);
            da[s] += two * as * Pp * dPm;
            dp[s] += dPm;
            dP[s] = as * as * dPm;
            dM[s] = as * r * dm;
          }
        }
      // Back to (Λ_0, η_0).
      T* dLam0 = state_block(g.dlambda_init, b, h);
      T* dEta0 = state_block(g.deta_init, b, h);
      const T* L0 = state_block(lam0, b, h);
      const T* E0 = state_block(eta0, b, h);
      for (std::size_t s = 0; s < ND; ++s) {
        const T P0 = one / L0[s], mu0 = E0[s] / L0[s];
        dLam0[s] = -(P0 * (P0 * dP[s] + mu0 * dM[s]));
        dEta0[s] = P0 * dM[s];
      }
    }
}

}  // namespace ttr
