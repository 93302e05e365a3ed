// The diagonal preconditioner of PGDN/PKDA ("ATK": A applied to the write key),
// PDN eq. (9) and App. E.3, with FLA's conventions (fla/ops/precond_gated_delta_rule,
// naive_recurrent_precond_gated_delta_rule):
//
//   A_t = e^{g_atk,t} A_{t-1} + β_atk,t (k_t ⊙ k_t)        (diagonal second moment)
//   r_t = log(A_t + eps) − c,   s_t = r_t ⊘ (1 + |r_t|)     (squash onto (−1, 1))
//   B_t = exp(−log(x) s_t) ∈ (1/x, x),   k̃_t = B_t ⊙ k_t
//
// Differences from the paper, all FLA's: the centre c = log_atk_scale enters
// directly (the paper writes μ = e^{logAScale} in App. E.3 but r = log A − μ in
// eq. (9)); eps inside the log (the paper has none; A_0 = 0 makes it necessary);
// the decay and write of A are exp(g_atk), beta_atk (the paper's α^P, β^P).
#pragma once

#include <cmath>
#include <vector>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

struct AtkParams {
  double x = 1.5;    // squash range [1/x, x]
  double eps = 1e-6;
};

// Write keys k̃ [B,T,H,K] and the final A state [B,H,K]. center [H] is c per head;
// A0 optional [B,H,K].
template <class T>
void atk_write_keys(const Tensor<T>& k, const Tensor<T>& g_atk, const Tensor<T>& beta_atk,
                    const std::vector<T>& center, const Tensor<T>* A0, const T& log_x, const T& eps,
                    Tensor<T>& k_tilde, Tensor<T>& A_final) {
  using std::abs;
  using std::exp;
  using std::log;
  const std::int64_t B = k.dim(0), len = k.dim(1), H = k.dim(2);
  const int K = static_cast<int>(k.dim(3));
  const T one = from_double<T>(1.0);
  k_tilde = k;
  A_final = A0 ? *A0 : Tensor<T>({B, H, K}, from_double<T>(0.0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      T* A = state_block(A_final, b, h);
      const auto ks = seq(k, b, h);
      const auto ga = seq(g_atk, b, h), ba = seq(beta_atk, b, h);
      const auto kt_out = seq(k_tilde, b, h);
      for (std::int64_t t = 0; t < len; ++t) {
        const T decay = exp(ga.at(t));
        const T& w = ba.at(t);
        for (int i = 0; i < K; ++i) {
          const T& ki = ks.row(t)[i];
          A[i] = decay * A[i] + w * (ki * ki);
          const T r = log(A[i] + eps) - center[h];
          const T s = r / (one + abs(r));
          kt_out.row(t)[i] = exp(-(log_x * s)) * ki;
        }
      }
    }
}

}  // namespace ttr
