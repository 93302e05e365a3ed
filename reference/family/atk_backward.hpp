// Backward of the ATK preconditioner of atk.hpp (PDN eq. (9), App. E.3, in FLA's
// form): given dk̃ = ∂L/∂k̃ (the write-key gradient of the delta core) and the
// optional cotangent dA_T of the final A state, the gradients of k, g_atk,
// beta_atk, the initial A state and the centre c = log_atk_scale.
//
// Forward, per key channel i (atk.hpp):
//   A_t = e^{ga_t} A_{t-1} + βa_t k_t²,  r_t = log(A_t + eps) − c,
//   s_t = r_t / (1 + |r_t|),  B_t = e^{−L s_t} (L = log x),  k̃_t = B_t k_t.
// Adjoint step, t = T..1, carrying dA = ∂L/∂A_t (dA_T, or 0):
//   dk_t  = B_t dk̃_t                                  (direct path)
//   ds    = −L B_t k_t dk̃_t,   dr = ds / (1 + |r_t|)²  (d/dr [r/(1+|r|)] = 1/(1+|r|)², also at r = 0)
//   dc   −= dr,                dA += dr / (A_t + eps)
//   dga_t += dA e^{ga_t} A_{t-1},  dβa_t += dA k_t²,  dk_t += 2 βa_t k_t dA
//   dA   ← e^{ga_t} dA   (= ∂L/∂A_{t-1}),   dA_0 = dA after t = 1.
// PDN App. D, Fig. 9 (b), step 5 (atk_backward) returns the same dk_atk, dbeta_atk,
// dg_atk, d_log_A_scale, chunkwise.
//
// dg_atk two ways (equal in exact arithmetic):
//  * direct (the oracle's): dga_t = D_t · e^{ga_t} A_{t-1}, with D_t the carried
//    adjoint above; without an initial A state dga_0 = 0 exactly;
//  * by reverse running sum (`DgAtk::reverse_sum`, the chunk forms'): with
//    G_t = Σ_{τ≤t} ga_τ, ∂L/∂G_s = Σ_i ρ_s A_s − U_s D_s (ρ_s = ∂L/∂A_s directly:
//    dr/(A_s + eps), plus dA_T at the last token; U_s = βa_s k_s²) and
//    dga_t = Σ_{s≥t} ∂L/∂G_s. Telescoping D_t A_t − D_{t+1} A_{t+1} = ρ_t A_t − D_{t+1} U_{t+1}
//    gives the direct form. flash-linear-attention's chunk_atk_bwd forms dg this way
//    (tl.cumsum(reverse=True) inside a chunk, the chunk sums across chunks), so where
//    the truth is 0 (token 0) its value is the rounding residue of Σ_s ∂L/∂G_s, which a
//    model of the direct form, exactly 0 there, cannot cover (docs/validating-fla.md,
//    "Failures": dg_atk at token 0).
//
// Stored vs recomputed: a forward sweep stores A_{t-1} (T·K values per sequence);
// the backward recomputes A_t, r_t, s_t, B_t from it as the forward does.
#pragma once

#include <cmath>
#include <vector>

#include "reference/family/atk.hpp"

namespace ttr {

enum class DgAtk { direct, reverse_sum };

// dk_atk [B,T,H,K]: the preconditioner's part of dk (the caller adds the delta core's).
// dg_atk, dbeta_atk [B,T,H]; dA0 [B,H,K]; dcenter [H] (summed over batch, tokens, channels).
template <class T>
void atk_write_keys_backward(const Tensor<T>& k, const Tensor<T>& g_atk, const Tensor<T>& beta_atk,
                             const std::vector<T>& center, const Tensor<T>* A0, const T& log_x, const T& eps,
                             const Tensor<T>& dk_tilde, const Tensor<T>* dA_final, Tensor<T>& dk_atk,
                             Tensor<T>& dg_atk, Tensor<T>& dbeta_atk, Tensor<T>& dA0, Tensor<T>& dcenter,
                             DgAtk dg_route = DgAtk::direct) {
  using std::abs;
  using std::exp;
  using std::log;
  const std::int64_t B = k.dim(0), len = k.dim(1), H = k.dim(2);
  const int K = static_cast<int>(k.dim(3));
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0);
  dk_atk = Tensor<T>(k.shape, zero);
  dg_atk = Tensor<T>(g_atk.shape, zero);
  dbeta_atk = Tensor<T>(beta_atk.shape, zero);
  dA0 = dA_final ? *dA_final : Tensor<T>({B, H, K}, zero);
  dcenter = Tensor<T>({H}, zero);
  std::vector<T> prev(static_cast<std::size_t>(len) * K);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const auto ks = seq(k, b, h), dkt = seq(dk_tilde, b, h);
      const auto ga = seq(g_atk, b, h), ba = seq(beta_atk, b, h);
      const auto dks = seq(dk_atk, b, h), dga = seq(dg_atk, b, h), dba = seq(dbeta_atk, b, h);
      // Forward sweep: A_{t-1} for every t, updated as atk_write_keys does.
      std::vector<T> A = A0 ? std::vector<T>(state_block(*A0, b, h), state_block(*A0, b, h) + K)
                            : std::vector<T>(K, zero);
      for (std::int64_t t = 0; t < len; ++t) {
        const T decay = exp(ga.at(t));
        for (int i = 0; i < K; ++i) {
          prev[static_cast<std::size_t>(t) * K + i] = A[i];
          const T& ki = ks.row(t)[i];
          A[i] = decay * A[i] + ba.at(t) * (ki * ki);
        }
      }
      // Backward sweep.
      T* dA = state_block(dA0, b, h);
      T& dc = dcenter.data[static_cast<std::size_t>(h)];
      T dG_sum = zero;  // Σ_{s>t} ∂L/∂G_s (reverse_sum)
      for (std::int64_t t = len - 1; t >= 0; --t) {
        const T decay = exp(ga.at(t));
        const T& w = ba.at(t);
        T dg_t = zero, db_t = zero, dG_t = zero;
        for (int i = 0; i < K; ++i) {
          const T& Ap = prev[static_cast<std::size_t>(t) * K + i];
          const T& ki = ks.row(t)[i];
          const T At = decay * Ap + w * (ki * ki);
          const T r = log(At + eps) - center[static_cast<std::size_t>(h)];
          const T ar = one + abs(r);
          const T s = r / ar;
          const T Bt = exp(-(log_x * s));
          const T& dkti = dkt.row(t)[i];
          T dki = Bt * dkti;
          const T dr = -(log_x * Bt * ki * dkti) / (ar * ar);
          dc -= dr;
          const T rho = dr / (At + eps);
          dA[i] += rho;
          if (dg_route == DgAtk::reverse_sum) {
            // ρ_t A_t − U_t D_t; at the last token the carried dA_T is direct too (ρ = D).
            mul_add_to(dG_t, t == len - 1 ? dA[i] : rho, At);
            mul_add_to(dG_t, -(w * (ki * ki)), dA[i]);
          } else {
            mul_add_to(dg_t, dA[i], decay * Ap);
          }
          mul_add_to(db_t, dA[i], ki * ki);
          mul_add_to(dki, two * w * ki, dA[i]);
          dks.row(t)[i] = dki;
          scale_by(dA[i], decay);
        }
        if (dg_route == DgAtk::reverse_sum) {
          dG_sum += dG_t;
          dg_t = dG_sum;
        }
        dga.at(t) = dg_t;
        dba.at(t) = db_t;
      }
    }
}

}  // namespace ttr
