// Kalman linear attention (KLA-K), backward of the sequential form in information
// coordinates (sequential.hpp). Every state slot s = (n, d) is its own scalar
// filter, so the adjoint is a scalar recurrence per slot. Forward step t (KLA-K
// Thm 1 / eq. (18), Thm 2 / eq. (19)), with λv = lambda_v:
//   e = λv_d v_d,  φ = k_n² λv_d,  c = ā² + p̄ Λ_{t-1},  f = ā / c,
//   η_t = f η_{t-1} + k_n e,   Λ_t = Λ_{t-1} / c + φ,
//   o_d = scale Σ_n q_n η_t/Λ_t,   o_var_d = scale² Σ_n q_n² / Λ_t.
// Cotangents do, do_var (optional), dlambda_T, deta_T (optional, ∂L/∂Λ_T, ∂L/∂η_T).
// Adjoint step per slot, t = T..1, carrying dΛ = ∂L/∂Λ_t, dη = ∂L/∂η_t:
//   m = η_t/Λ_t;  dq_n += scale do_d m + 2 scale² do_var_d q_n / Λ_t
//   dη += scale do_d q_n / Λ_t;  dΛ −= scale do_d q_n m / Λ_t + scale² do_var_d q_n² / Λ_t²
//   (Λ_t)  dφ = dΛ,  dc = −dΛ Λ_{t-1}/c²,  dΛ_{t-1} = dΛ / c
//   (η_t)  df = dη η_{t-1},  de = dη k_n,  dk_n += dη e,  dη_{t-1} = f dη
//   (f)    dā += df / c,  dc −= df ā / c²
//   (c)    dā += 2 ā dc,  dp̄ += Λ_{t-1} dc,  dΛ_{t-1} += p̄ dc
//   (φ, e) dk_n += 2 k_n λv_d dφ,  dλv_d += k_n² dφ + v_d de,  dv_d += λv_d de
// At the end dlambda_init = dΛ_0, deta_init = dη_0 (with lambda_init absent, Λ_0 is
// the constant lambda0 and dlambda_init is still ∂L/∂Λ_0 per slot). dā, dp̄ [H,N,D]
// are summed over batch and tokens.
// Stored vs recomputed: a forward sweep stores Λ_{t-1}, η_{t-1} (2·T·N·D values per
// sequence); the backward recomputes c, f, Λ_t, η_t from them.
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
  const T zero = from_double<T>(0.0), two = from_double<T>(2.0), scale2 = scale * scale;
  g.dq = Tensor<T>(in.q.shape, zero);
  g.dk = Tensor<T>(in.k.shape, zero);
  g.dv = Tensor<T>(in.v.shape, zero);
  g.dlambda_v = Tensor<T>(in.lambda_v.shape, zero);
  g.da_bar = Tensor<T>(in.a_bar.shape, zero);
  g.dp_bar = Tensor<T>(in.p_bar.shape, zero);
  Tensor<T> lam0, eta0;
  kla_initial_state(in, lambda0, lam0, eta0);
  g.dlambda_init = cot.lambda_T ? *cot.lambda_T : Tensor<T>(lam0.shape, zero);
  g.deta_init = cot.eta_T ? *cot.eta_T : Tensor<T>(eta0.shape, zero);
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
      // Backward sweep.
      T* dLam = state_block(g.dlambda_init, b, h);
      T* dEta = state_block(g.deta_init, b, h);
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
            const T phi = kn * kn * lv;
            const T c = a[s] * a[s] + p[s] * Lp;
            const T f = a[s] / c;
            const T Et = f * Ep + kn * ev;
            const T Lt = Lp / c + phi;
            const T m = Et / Lt;
            // The readouts.
            dqs.row(t)[n] += g_o * m + two * g_var * qn / Lt;
            dEta[s] += g_o * qn / Lt;
            dLam[s] -= (g_o * qn * m + g_var * qn * qn / Lt) / Lt;
            // Λ_t = Λ_{t-1}/c + φ and η_t = f η_{t-1} + k e.
            const T dphi = dLam[s];
            T dc = -(dLam[s] * Lp) / (c * c);
            const T df = dEta[s] * Ep;
            const T de = dEta[s] * kn;
            dks.row(t)[n] += dEta[s] * ev + two * kn * lv * dphi;
            da[s] += df / c;
            dc -= df * a[s] / (c * c);
            da[s] += two * a[s] * dc;
            dp[s] += Lp * dc;
            dls.row(t)[d] += kn * kn * dphi + vd * de;
            dvs.row(t)[d] += lv * de;
            dLam[s] = dLam[s] / c + p[s] * dc;
            dEta[s] = f * dEta[s];
          }
        }
    }
}

}  // namespace ttr
