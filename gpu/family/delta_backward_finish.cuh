// The last stage of the delta family's backward kernels (delta_sequential_backward.cu,
// delta_chunk_backward.cu): the core's gradient partials summed in a fixed order
// (deterministic: no atomics), dk = dk_read + dk_write (the read and the write key
// are one input; the preconditioned layers: + the preconditioner's part, which
// took dk_write), then the layer's chain rule in fp32 — Kaczmarz β̃ = η/(‖k‖²+eps)
// (reference/kaczmarz_delta_rule/backward.hpp) and the L2 norm of q and k,
// dx = r(dy − y⟨y, dy⟩) (reference/family/l2norm_backward.hpp) — and the
// gradients written: dq, dk, dβ in the dtype, dg fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/numeric.cuh"

namespace ttr::gpu::delta_backward {

__device__ inline float sum32(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// The core's gradients as NB partials (NB column blocks of the state, summed in
// block order; NB = 1 for a kernel that forms each gradient whole), fp32.
struct DeltaGradPartials {
  float* dq;     // [NB, rows, K] (times `scale` in finish)
  float* dk;     // [NB, rows, K]: the read key's
  float* dw;     // [NB, rows, K]: the write key's (nullptr: already added to dk)
  float* dg;     // [NB, rows, Kg]
  float* dbeta;  // [NB, rows]: of the β the recurrence used
  // [rows, K]: the preconditioner's part of dk (gpu/family/atk_backward.cu), which
  // consumed dw (then nullptr); added after the core's read and write key parts.
  const float* dk_extra = nullptr;
};

// dx = r (dy − y⟨y, dy⟩), r = (‖x‖² + eps)^{−1/2}, y = x r: in place on the
// lane's coordinates (i = lane + 32 c), x read as stored.
template <class E>
__device__ void l2norm_backward_row(const E* x, float (&dy)[4], int K, float eps) {
  const int lane = threadIdx.x % 32;
  float xs[4], nn = 0.0f;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int i = lane + 32 * c;
    xs[c] = i < K ? Elem<E>::to_float(x[i]) : 0.0f;
    nn = fmaf(xs[c], xs[c], nn);
  }
  const float inv = 1.0f / sqrtf(sum32(nn) + eps);
  float yd = 0.0f;
#pragma unroll
  for (int c = 0; c < 4; ++c) yd = fmaf(xs[c] * inv, dy[c], yd);
  yd = sum32(yd);
#pragma unroll
  for (int c = 0; c < 4; ++c) dy[c] = inv * (dy[c] - xs[c] * inv * yd);
}

template <class E, Decay D>
__global__ void __launch_bounds__(256) finish(std::int64_t rowsTotal, int K, int NB, const E* __restrict__ k,
                                              const E* __restrict__ q_raw, const E* __restrict__ k_raw,
                                              const E* __restrict__ beta, bool kaczmarz, float kaczmarz_eps,
                                              float l2_eps, float scale, DeltaGradPartials work, E* __restrict__ dq,
                                              E* __restrict__ dk, E* __restrict__ dbeta, float* __restrict__ dg,
                                              bool l2norm_backward = true) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rowsTotal) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  float gq[4], gk[4], gw[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int i = lane + 32 * c;
    float sq = 0.0f, sk = 0.0f, sw = 0.0f, sg = 0.0f;
    if (i < K)
      for (int nb = 0; nb < NB; ++nb) {
        const std::int64_t at = (nb * rowsTotal + row) * K + i;
        sq += work.dq[at], sk += work.dk[at];
        if (work.dw) sw += work.dw[at];
        if constexpr (D == Decay::per_key) sg += work.dg[at];
      }
    gq[c] = scale * sq;
    gk[c] = sk + sw;  // read key + write key
    if (work.dk_extra && i < K) gk[c] += work.dk_extra[row * K + i];
    gw[c] = sg;
  }
  float db = 0.0f;
  [[maybe_unused]] float dgs = 0.0f;
  for (int nb = 0; nb < NB; ++nb) {
    db += work.dbeta[nb * rowsTotal + row];
    if constexpr (D == Decay::scalar) dgs += work.dg[nb * rowsTotal + row];
  }
  const E* kr = k + row * K;
  if (kaczmarz) {
    // β̃ = η/(‖k‖² + eps): dη = dβ̃/den, dk += −2 β̃ dβ̃ k/den (β̃ unrounded, as the CPU chain rule).
    float kk = 0.0f;
    for (int d = 0; d < K; ++d) kk += Elem<E>::to_float(kr[d]) * Elem<E>::to_float(kr[d]);
    const float den = kk + kaczmarz_eps, bt = Elem<E>::to_float(beta[row]) / den;
    const float cc = -(2.0f * bt * db) / den;
    db = db / den;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int i = lane + 32 * c;
      if (i < K) gk[c] = fmaf(cc, Elem<E>::to_float(kr[i]), gk[c]);
    }
  }
  // l2norm_backward false: the chunk kernel's mutant l2norm-backward-skipped.
  if (q_raw && l2norm_backward) {
    l2norm_backward_row(q_raw + row * K, gq, K, l2_eps);
    l2norm_backward_row(k_raw + row * K, gk, K, l2_eps);
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int i = lane + 32 * c;
    if (i < K) {
      dq[row * K + i] = Elem<E>::from_float(gq[c]);
      dk[row * K + i] = Elem<E>::from_float(gk[c]);
      if constexpr (D == Decay::per_key) dg[row * K + i] = gw[c];
    }
  }
  if (lane == 0) {
    dbeta[row] = Elem<E>::from_float(db);
    if constexpr (D == Decay::scalar) dg[row] = dgs;
  }
}

}  // namespace ttr::gpu::delta_backward
