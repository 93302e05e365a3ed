// GKA's gate factors of one chunk, shared by the three chunk kernels
// (reference/gka/chunk.hpp: gka_chunk_decays), in fp32:
//
//   b_c = Σ_{i≤c} log γ_i (chunk-local, token order),  ζ_c = e^{b_c},
//   M̃_{j,c} = e^{b_c − b_j} β_j for j ≤ c, 0 otherwise       (GKA §4.2, write gate folded in)
//
// e^{b_c − b_j} ≤ 1 is formed from the difference of cumulative log-gates, never as
// ζ_c/ζ_j, so an underflowed ζ_j is never divided by. Rows past the end of a last,
// partial chunk read g = 0 and β = 0: b stays at its last value (so b_63 is the
// chunk's b_last) and those tokens write nothing.
#pragma once

#include <cstdint>

namespace ttr::gpu::gka {

constexpr int kChunk = 64;

// Per-token gates of the chunk into shared memory: b (cumulative), ζ, β (1 when
// absent) and α (when given). `row0` indexes token t0 of sequence (b, h) in a
// [B,T,H] gate tensor; tokens are `H` apart; `n` of the chunk's rows are valid.
// The caller synchronises the block afterwards.
__device__ inline void load_chunk_gates(const float* __restrict__ g, const float* __restrict__ beta,
                                        const float* __restrict__ alpha, std::int64_t row0, int H, int n, float* b,
                                        float* zeta, float* bet, float* alp) {
  const int t = threadIdx.x;
  if (t < kChunk) {
    const std::int64_t r = row0 + static_cast<std::int64_t>(t) * H;
    b[t] = t < n ? g[r] : 0.0f;
    bet[t] = t < n ? (beta ? beta[r] : 1.0f) : 0.0f;
    if (alp) alp[t] = t < n && alpha ? alpha[r] : 0.0f;
  }
  __syncthreads();
  // The cumulative sum in token order, as the CPU form sums it (one thread: 64 adds).
  if (t == 0) {
    float acc = 0.0f;
    for (int c = 0; c < kChunk; ++c) b[c] = acc += b[c];
  }
  __syncthreads();
  if (t < kChunk) zeta[t] = expf(b[t]);
}

// M̃_{j,c} as the CPU form rounds it: e^{b_c − b_j}, then times β_j.
__device__ inline float decay_weight(const float* b, const float* bet, int j, int c) {
  return j <= c ? expf(b[c] - b[j]) * bet[j] : 0.0f;
}

}  // namespace ttr::gpu::gka
