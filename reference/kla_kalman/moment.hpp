// KLA-K in moment coordinates: the posterior mean μ = η/Λ carried directly,
// KLA-K Cor. 2.2, eq. (20):
//   μ_t = ā (1 − φ_t/Λ_t) μ_{t-1} + k_{t,n} λv_{t,d} v_{t,d} / Λ_t,
// with Λ_t from eq. (18). A second implementation of kla_kalman's outputs, used
// to check the information form; it also survives p̄ = 0 in float64 longer,
// since only 1/Λ_t (which tends to 0) enters, never η_t.
//
// Derivation from eq. (19), with f_t = ā/(ā² + p̄Λ_{t-1}) and Λ_t − φ_t =
// Λ_{t-1}/(ā² + p̄Λ_{t-1}):  μ_t = η_t/Λ_t = (f_t Λ_{t-1} μ_{t-1} + kλv v)/Λ_t
// = ā (Λ_t − φ_t)/Λ_t μ_{t-1} + kλv v/Λ_t.
#pragma once

#include "reference/kla_kalman/sequential.hpp"

namespace ttr {

// Outputs as kla_kalman_sequential; eta_T = Λ_T μ_T.
template <class T>
void kla_kalman_moment(const KlaInputs<T>& in, const T& lambda0, const T& scale, KlaOutputs<T>& out) {
  const std::int64_t B = in.q.dim(0), len = in.q.dim(1), H = in.q.dim(2);
  const int N = static_cast<int>(in.q.dim(3)), D = static_cast<int>(in.v.dim(3));
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0);
  Tensor<T> mu;
  kla_initial_state(in, lambda0, out.lambda_T, mu);  // mu holds η_0 here
  for (std::size_t i = 0; i < mu.data.size(); ++i) mu.data[i] = mu.data[i] / out.lambda_T.data[i];
  out.o = Tensor<T>({B, len, H, D}, zero);
  out.o_var = Tensor<T>({B, len, H, D}, zero);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      T* Lam = state_block(out.lambda_T, b, h);
      T* Mu = state_block(mu, b, h);
      const T* a = in.a_bar.data.data() + h * N * D;
      const T* p = in.p_bar.data.data() + h * N * D;
      const auto qs = seq(in.q, b, h), ks = seq(in.k, b, h), vs = seq(in.v, b, h), ls = seq(in.lambda_v, b, h);
      for (std::int64_t t = 0; t < len; ++t) {
        for (int d = 0; d < D; ++d) {
          T o = zero, ov = zero;
          for (int n = 0; n < N; ++n) {
            const std::size_t s = static_cast<std::size_t>(n) * D + d;
            const T& kn = ks.row(t)[n];
            const T phi = kn * kn * ls.row(t)[d];
            Lam[s] = Lam[s] / (a[s] * a[s] + p[s] * Lam[s]) + phi;
            const T inv = one / Lam[s];
            Mu[s] = a[s] * (one - phi * inv) * Mu[s] + kn * ls.row(t)[d] * vs.row(t)[d] * inv;
            const T& qn = qs.row(t)[n];
            o += qn * Mu[s];
            ov += qn * qn * inv;
          }
          seq(out.o, b, h).row(t)[d] = scale * o;
          seq(out.o_var, b, h).row(t)[d] = scale * scale * ov;
        }
      }
    }
  out.eta_T = mu;
  for (std::size_t i = 0; i < mu.data.size(); ++i) out.eta_T.data[i] = out.lambda_T.data[i] * mu.data[i];
}

}  // namespace ttr
