// The last launch of GKA's backward kernels (gpu/gka/sequential_backward.cu,
// gpu/gka/chunk_backward.cu): dq, dk from their fp32 workspaces to the dtype, a
// warp per token row; under use_qk_l2norm_in_kernel through the L2 norm's chain
// rule dx = r(dy − y⟨y, dy⟩) from the rows as given (the delta family's finish).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/family/delta_backward_finish.cuh"

namespace ttr::gpu::gka_backward {

template <class E>
__global__ void __launch_bounds__(256) finish(std::int64_t rows, int K, const float* __restrict__ gq_in,
                                              const float* __restrict__ gk_in, const E* __restrict__ q_raw,
                                              const E* __restrict__ k_raw, float eps, E* __restrict__ dq,
                                              E* __restrict__ dk) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  float gq[4], gk[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int i = lane + 32 * c;
    gq[c] = i < K ? gq_in[row * K + i] : 0.0f;
    gk[c] = i < K ? gk_in[row * K + i] : 0.0f;
  }
  if (q_raw) {
    delta_backward::l2norm_backward_row(q_raw + row * K, gq, K, eps);
    delta_backward::l2norm_backward_row(k_raw + row * K, gk, K, eps);
  }
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int i = lane + 32 * c;
    if (i < K) {
      dq[row * K + i] = Elem<E>::from_float(gq[c]);
      dk[row * K + i] = Elem<E>::from_float(gk[c]);
    }
  }
}

// The finishing launch of a backward call `a` on `stream`, from the fp32 dq, dk of
// its `rows` token rows (none when every sequence of a varlen batch is empty).
template <class E>
void launch_finish(const GkaBackwardArgs& a, std::int64_t rows, const float* wdq, const float* wdk,
                   cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  if (blocks == 0) return;
  finish<E><<<blocks, 256, 0, stream>>>(rows, a.fwd.K, wdq, wdk, static_cast<const E*>(a.q_raw),
                                        static_cast<const E*>(a.k_raw), a.l2_eps, static_cast<E*>(a.dq),
                                        static_cast<E*>(a.dk));
  TTR_CUDA_CHECK_LAUNCH("gka backward finish");
}

}  // namespace ttr::gpu::gka_backward
