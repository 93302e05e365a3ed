// Block-wide matrix products on shared-memory tiles, the only products the
// kernels use:
//
//   C (+)= op(A) op(B),   C: M × N fp32,  op(A): M × Kd,  op(B): Kd × N  (all multiples of 16)
//
// op(X) = X (row-major tile) or Xᵀ (the tile read column-major), chosen at
// compile time. bf16 operands go through the tensor cores (WMMA m16n16k16,
// bf16 × bf16 → fp32 accumulate: the HMMA.16816.F32.BF16 instruction, i.e. the
// mma.sync m16n8k16 shape twice); fp32 operands through fp32 FMA — never TF32,
// so the fp32 kernels keep the fp32 error model (docs/error-model.md: u_op = 2⁻²⁴).
// The caller synchronises the block after the call.
#pragma once

#include <mma.h>

#include "gpu/core/numeric.cuh"

namespace ttr::gpu {

template <bool TA, bool TB, class E>
struct BlockGemm;

template <bool TA, bool TB>
struct BlockGemm<TA, TB, __nv_bfloat16> {
  using E = __nv_bfloat16;
  __device__ static void run(float* C, int ldc, const E* A, int lda, const E* B, int ldb, int M, int N, int Kd,
                             bool accumulate) {
    using namespace nvcuda;
    using LA = std::conditional_t<TA, wmma::col_major, wmma::row_major>;
    using LB = std::conditional_t<TB, wmma::col_major, wmma::row_major>;
    const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int tn = N / 16, tiles = (M / 16) * tn;
    for (int tile = warp; tile < tiles; tile += warps) {
      const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      if (accumulate) wmma::load_matrix_sync(acc, C + i0 * ldc + j0, ldc, wmma::mem_row_major);
      else wmma::fill_fragment(acc, 0.0f);
      for (int k0 = 0; k0 < Kd; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, E, LA> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, E, LB> b;
        wmma::load_matrix_sync(a, TA ? A + k0 * lda + i0 : A + i0 * lda + k0, lda);
        wmma::load_matrix_sync(b, TB ? B + j0 * ldb + k0 : B + k0 * ldb + j0, ldb);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(C + i0 * ldc + j0, acc, ldc, wmma::mem_row_major);
    }
  }
};

template <bool TA, bool TB>
struct BlockGemm<TA, TB, float> {
  // Each thread owns a 2 × 2 block of C (fp32 FMA: fmaf rounds once per term,
  // which the fp32 model's per-operation 2⁻²⁴ covers).
  __device__ static void run(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
                             int Kd, bool accumulate) {
    const int bn = N / 2, blocks = (M / 2) * bn;
    for (int idx = threadIdx.x; idx < blocks; idx += blockDim.x) {
      const int i = (idx / bn) * 2, j = (idx % bn) * 2;
      float c00 = 0, c01 = 0, c10 = 0, c11 = 0;
      if (accumulate) {
        c00 = C[i * ldc + j], c01 = C[i * ldc + j + 1];
        c10 = C[(i + 1) * ldc + j], c11 = C[(i + 1) * ldc + j + 1];
      }
      for (int k = 0; k < Kd; ++k) {
        const float a0 = TA ? A[k * lda + i] : A[i * lda + k];
        const float a1 = TA ? A[k * lda + i + 1] : A[(i + 1) * lda + k];
        const float b0 = TB ? B[j * ldb + k] : B[k * ldb + j];
        const float b1 = TB ? B[(j + 1) * ldb + k] : B[k * ldb + j + 1];
        c00 = fmaf(a0, b0, c00), c01 = fmaf(a0, b1, c01);
        c10 = fmaf(a1, b0, c10), c11 = fmaf(a1, b1, c11);
      }
      C[i * ldc + j] = c00, C[i * ldc + j + 1] = c01;
      C[(i + 1) * ldc + j] = c10, C[(i + 1) * ldc + j + 1] = c11;
    }
  }
};

template <bool TA, bool TB, class E>
__device__ inline void block_gemm(float* C, int ldc, const E* A, int lda, const E* B, int ldb, int M, int N, int Kd,
                                  bool accumulate) {
  BlockGemm<TA, TB, E>::run(C, ldc, A, lda, B, ldb, M, N, Kd, accumulate);
}

}  // namespace ttr::gpu
