// Kalman linear attention (KLA-K), sequential form in information coordinates:
// a scalar Kalman filter per state slot (n, d) with precision Λ and information
// mean η = Λμ (KLA-K §4).
//
//   φ_t = k_{t,n}² λv_{t,d}                                          (eq. (18))
//   Λ_t = ((1 + p̄φ_t) Λ_{t-1} + ā² φ_t) / (p̄ Λ_{t-1} + ā²)           (Thm 1, eqs. (16)-(17))
//       = Λ_{t-1} / (ā² + p̄ Λ_{t-1}) + φ_t                          (eq. (18))
//   f_t = ā / (ā² + p̄ Λ_{t-1}),   η_t = f_t η_{t-1} + k_{t,n} λv_{t,d} v_{t,d}   (Thm 2, eq. (19))
//   o_{t,d} = scale Σ_n q_{t,n} η_{t,n,d}/Λ_{t,n,d},  o_var_{t,d} = scale² Σ_n q_{t,n}² / Λ_{t,n,d}
//
// With p̄ = 0 the precision grows like ā^{-2t}: float64 overflows after a few
// hundred tokens at ā = 0.5 while η/Λ stays bounded. MPFR's exponent range
// (|e| < 2^30 by default) carries such runs; the moment form (moment.hpp,
// Cor. 2.2) is the independent route that never overflows.
#pragma once

#include <vector>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

template <class T>
struct KlaInputs {
  const Tensor<T>& q;         // [B,T,H,N]
  const Tensor<T>& k;         // [B,T,H,N]
  const Tensor<T>& v;         // [B,T,H,D]
  const Tensor<T>& lambda_v;  // [B,T,H,D] > 0
  const Tensor<T>& a_bar;     // [H,N,D] in (0, 1]
  const Tensor<T>& p_bar;     // [H,N,D] >= 0
  const Tensor<T>* lambda_init;  // [B,H,N,D], default lambda0
  const Tensor<T>* eta_init;     // [B,H,N,D], default 0
};

template <class T>
struct KlaOutputs {
  Tensor<T> o, o_var, lambda_T, eta_T;
};

// Initial precision and information mean of every slot.
template <class T>
void kla_initial_state(const KlaInputs<T>& in, const T& lambda0, Tensor<T>& lam, Tensor<T>& eta) {
  const std::int64_t B = in.q.dim(0), H = in.q.dim(2), N = in.q.dim(3), D = in.v.dim(3);
  lam = in.lambda_init ? *in.lambda_init : Tensor<T>({B, H, N, D}, lambda0);
  eta = in.eta_init ? *in.eta_init : Tensor<T>({B, H, N, D}, from_double<T>(0.0));
}

template <class T>
void kla_kalman_sequential(const KlaInputs<T>& in, const T& lambda0, const T& scale, KlaOutputs<T>& out) {
  const std::int64_t B = in.q.dim(0), len = in.q.dim(1), H = in.q.dim(2);
  const int N = static_cast<int>(in.q.dim(3)), D = static_cast<int>(in.v.dim(3));
  const T zero = from_double<T>(0.0);
  kla_initial_state(in, lambda0, out.lambda_T, out.eta_T);
  out.o = Tensor<T>({B, len, H, D}, zero);
  out.o_var = Tensor<T>({B, len, H, D}, zero);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      T* Lam = state_block(out.lambda_T, b, h);
      T* Eta = state_block(out.eta_T, b, h);
      const T* a = in.a_bar.data.data() + h * N * D;
      const T* p = in.p_bar.data.data() + h * N * D;
      const auto qs = seq(in.q, b, h), ks = seq(in.k, b, h), vs = seq(in.v, b, h), ls = seq(in.lambda_v, b, h);
      for (std::int64_t t = 0; t < len; ++t) {
        T* ot = seq(out.o, b, h).row(t);
        T* vt_out = seq(out.o_var, b, h).row(t);
        for (int d = 0; d < D; ++d) {
          T o = zero, ov = zero;
          const T ev = ls.row(t)[d] * vs.row(t)[d];
          for (int n = 0; n < N; ++n) {
            const std::size_t s = static_cast<std::size_t>(n) * D + d;
            const T& kn = ks.row(t)[n];
            const T phi = kn * kn * ls.row(t)[d];
            const T denom = a[s] * a[s] + p[s] * Lam[s];  // ā² + p̄ Λ_{t-1}
            Eta[s] = (a[s] / denom) * Eta[s] + kn * ev;
            Lam[s] = Lam[s] / denom + phi;
            const T& qn = qs.row(t)[n];
            o += qn * (Eta[s] / Lam[s]);
            ov += qn * qn / Lam[s];
          }
          ot[d] = scale * o;
          vt_out[d] = scale * scale * ov;
        }
      }
    }
}

}  // namespace ttr
