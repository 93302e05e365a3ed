// The gate gradient of the gated linear core formed as flash-linear-attention's
// fused-recurrent backward forms it (fla/ops/common/fused_recurrent.py,
// fused_recurrent_bwd_kernel, fla-core 0.6.0; USE_GK for gla, USE_G for simple_gla):
// not from its definition dg_t = Σ_j dS_t ⊙ S̄_t (gated_linear_backward.hpp) but by
// one reverse running sum of the other gradients,
//   dg_t = Σ_v S_T ⊙ dht + Σ_{s ≥ t} (q_s ⊙ dq_s − k_s ⊙ dk_s)     (per key; simple_gla: summed over keys)
// The identity (exact arithmetic): with φ_t = Σ_j S_t,ij G_t,ij, G_t = ∂L/∂S_t,
//   dg_t = Σ_j G_t,ij (S_t,ij − k_t,i v_t,j) = φ_t − k_t,i dk_t,i   (S̄_t = S_t − k_t v_tᵀ)
//   φ_{t−1} = Σ_j S_{t−1,ij} (d_t,i G_t,ij + q̂_{t−1,i} do_{t−1,j}) = dg_t + q_{t−1,i} dq_{t−1,i}
// and φ_T = Σ_j S_T dht + q_T dq_T, so the sum telescopes to the line above.
// In floating point the two differ where the truth is small against the summed
// terms: at t = 0 without an initial state dg_0 = 0 exactly (S̄_0 = 0), and the direct
// form's error there is 0 while the running sum leaves about u·Σ_s |q_s dq_s| + |k_s dk_s|.
// That residue is correct behaviour of this algorithm: the `sequential_dg_sum` backward
// form (oracles/layers/gated_linear_dg_sum_form.hpp) models it, so that ttrcheck
// judges FLA's fused_recurrent_gla and fused_recurrent_simple_gla dg under the
// arithmetic they run (docs/validating-fla.md, "Failures").
//
// Rounding order as the kernel's: the running sum starts at Σ_j S_T,ij dht_ij (left to
// right in j), then per token adds (q·dq − k·dk) rounded as product, product,
// difference; simple_gla first sums the keys' terms (tl.sum), then adds. FLA splits V
// into blocks of min(next_pow2(V), 64) and sums the blocks' dg afterwards; for V ≤ 64
// (every ttrcheck suite but the production shapes) that is one block, as here.
#pragma once

#include <vector>

#include "reference/family/gated_linear_backward.hpp"

namespace ttr {

// Replaces dg (g's shape) with the running sum, from the backward's dq and dk and the
// forward's final state S_T (recomputed here in T, as the kernel's forward sweep does).
template <class T>
void gated_linear_dg_by_running_sum(Decay kind, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                    const Tensor<T>& g, const Tensor<T>* h0, const T& scale, const Tensor<T>* dht,
                                    const Tensor<T>& dq, const Tensor<T>& dk, Tensor<T>& dg) {
  if (kind == Decay::none) return;
  const std::int64_t B = q.dim(0), len = q.dim(1), H = q.dim(2);
  const int K = static_cast<int>(q.dim(3)), V = static_cast<int>(v.dim(3));
  const T zero = from_double<T>(0.0);
  Tensor<T> o, ST;
  gated_linear_forward<T>(kind, q, k, v, &g, h0, scale, o, ST);
  std::vector<T> run(K);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const T* S = state_block(ST, b, h);
      const T* dS = dht ? state_block(*dht, b, h) : nullptr;
      for (int i = 0; i < K; ++i) {  // Σ_v S_T ⊙ dht (0 without dht: FLA's b_dh starts at zero)
        T acc = zero;
        const std::size_t row = static_cast<std::size_t>(i) * V;
        if (dS)
          for (int j = 0; j < V; ++j) mul_add_to(acc, S[row + j], dS[row + j]);
        run[i] = acc;
      }
      T total = zero;
      if (kind == Decay::scalar)
        for (int i = 0; i < K; ++i) total += run[i];
      const SeqView<const T> qs = seq(q, b, h), ks = seq(k, b, h), dqs = seq(dq, b, h), dks = seq(dk, b, h);
      const SeqView<T> dgs = seq(dg, b, h);
      for (std::int64_t t = len - 1; t >= 0; --t) {
        T term = zero;
        for (int i = 0; i < K; ++i) {
          const T d = qs.row(t)[i] * dqs.row(t)[i] - ks.row(t)[i] * dks.row(t)[i];
          if (kind == Decay::per_key) {
            run[i] += d;
            dgs.row(t)[i] = run[i];
          } else {
            term += d;
          }
        }
        if (kind == Decay::scalar) {
          total += term;
          dgs.at(t) = total;
        }
      }
    }
}

}  // namespace ttr
