// Chunkwise form of the diagonal preconditioner of PGDN/PKDA (atk.hpp): PDN
// §3.3, the equation after (8) — the second-moment state is an additive,
// decayed prefix sum per coordinate, so inside a chunk with initial A_0 and
// cumulative log decay b_t of g_atk,
//
//   A_t = e^{b_t} A_0 + Σ_{s ≤ t} e^{b_t − b_s} β_atk,s (k_s ⊙ k_s),
//
// one masked (c×c)·(c×K) product per chunk plus the chunk-boundary states A_{iC}
// carried between chunks; the squash to B_t and k̃_t = B_t ⊙ k_t are elementwise.
//
// Arithmetic policy: the whole preconditioner runs in acc (fp32 under the 16-bit
// policies: it is elementwise work feeding a log, and k ⊙ k of a bf16 key is exact
// in fp32); k̃ is narrowed when the delta chunk form reads it as an operand.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "reference/family/chunk_common.hpp"

namespace ttr {

template <class P>
void atk_write_keys_chunk(const Tensor<typename P::acc>& k, const Tensor<typename P::acc>& g_atk,
                          const Tensor<typename P::acc>& beta_atk, const std::vector<typename P::acc>& center,
                          const Tensor<typename P::acc>* A0, const typename P::acc& log_x,
                          const typename P::acc& eps, int chunk, Tensor<typename P::acc>& k_tilde,
                          Tensor<typename P::acc>& A_final) {
  using A = typename P::acc;
  using std::abs;
  using std::exp;
  using std::log;
  const std::int64_t B = k.dim(0), len = k.dim(1), H = k.dim(2);
  const int K = static_cast<int>(k.dim(3));
  const A zero = from_double<A>(0.0), one = from_double<A>(1.0);
  k_tilde = k;
  A_final = A0 ? *A0 : Tensor<A>({B, H, K}, zero);
  Matrix<A> b, decay, k2, moments;
  for (std::int64_t bb = 0; bb < B; ++bb)
    for (std::int64_t h = 0; h < H; ++h) {
      A* state = state_block(A_final, bb, h);
      const auto ks = seq(k, bb, h), ga = seq(g_atk, bb, h), ba = seq(beta_atk, bb, h);
      const auto kt_out = seq(k_tilde, bb, h);
      for (std::int64_t t0 = 0; t0 < len; t0 += chunk) {
        const int c = static_cast<int>(std::min<std::int64_t>(chunk, len - t0));
        cumulative_gates(Decay::scalar, ga, t0, c, K, b);
        decay.assign(c, c, zero);
        for (int t = 0; t < c; ++t)
          for (int s = 0; s <= t; ++s) decay(t, s) = decay_between(b, t, s, 0);
        k2.assign(c, K, zero);
        for (int s = 0; s < c; ++s)
          for (int d = 0; d < K; ++d) {
            const A& kd = ks.row(t0 + s)[d];
            k2(s, d) = ba.at(t0 + s) * (kd * kd);
          }
        gemm_nn(decay, k2, moments);
        for (int t = 0; t < c; ++t) {
          const A carry = exp(b(t, 0));
          for (int d = 0; d < K; ++d) {
            const A At = moments(t, d) + carry * state[d];
            const A r = log(At + eps) - center[static_cast<std::size_t>(h)];
            const A sq = r / (one + abs(r));
            kt_out.row(t0 + t)[d] = exp(-(log_x * sq)) * ks.row(t0 + t)[d];
            if (t == c - 1) state[d] = At;  // the chunk-boundary state A_{iC}; its last read was above
          }
        }
      }
    }
}

}  // namespace ttr
