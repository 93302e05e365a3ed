// Warp-level bf16 tensor-core products with the fragments in registers: raw
// `mma.sync.m16n8k16` (bf16 × bf16 → fp32 accumulate, the same HMMA instruction
// WMMA issues) fed by `ldmatrix` from padded shared-memory tiles. Unlike WMMA,
// the accumulator layout is documented (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"), so a kernel can keep a product in registers across steps
// (a running state) and touch its elements in place (masks, decays, narrowing)
// without a round trip through shared memory.
//
// Fragment layout, lane = 4·g + q (g = lane / 4 ∈ [0, 8), q = lane % 4):
//   A (16 × 16, row-major):  a[0] = A[g][2q, 2q+1],  a[1] = A[g+8][2q, 2q+1],
//                            a[2] = A[g][2q+8, +9],   a[3] = A[g+8][2q+8, +9]
//   B (16 × 8):              b[0] = B[2q, 2q+1][g],   b[1] = B[2q+8, 2q+9][g]
//   C (16 × 8, fp32):        c[0], c[1] = C[g][2q, 2q+1],  c[2], c[3] = C[g+8][2q, 2q+1]
// Every tile address handed to the loaders must be 16-byte aligned per row
// (tile.cuh's padded leading dimensions are).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace ttr::gpu::mma {

using bf16 = __nv_bfloat16;

__device__ inline unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ inline void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ inline void ldmatrix_x2_trans(unsigned (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}

// c += a b (one m16n8k16 tile, fp32 accumulation).
__device__ inline void mma_bf16(float (&c)[4], const unsigned (&a)[4], const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A fragment of the 16 × 16 block at X[r0..r0+16) × [k0..k0+16) of a row-major tile.
__device__ inline void load_a(unsigned (&a)[4], const bf16* X, int ld, int r0, int k0) {
  const int l = threadIdx.x % 32;
  ldmatrix_x4(a, X + (r0 + (l % 8) + 8 * ((l / 8) % 2)) * ld + k0 + 8 * (l / 16));
}
// A fragment of Xᵀ: A[m][k] = X[k0 + k][m0 + m] (X row-major with rows k).
__device__ inline void load_a_trans(unsigned (&a)[4], const bf16* X, int ld, int m0, int k0) {
  const int l = threadIdx.x % 32, i = l / 8;
  ldmatrix_x4_trans(a, X + (k0 + (l % 8) + 8 * (i / 2)) * ld + m0 + 8 * (i % 2));
}
// B fragments of two adjacent n-tiles, B = X[k0..k0+16) × [n0..n0+16) of a
// row-major tile (rows k): b[0..1] for columns n0.., b[2..3] for n0+8...
__device__ inline void load_b2(unsigned (&b)[4], const bf16* X, int ld, int k0, int n0) {
  const int l = threadIdx.x % 32, i = l / 8;
  ldmatrix_x4_trans(b, X + (k0 + (l % 8) + 8 * (i % 2)) * ld + n0 + 8 * (i / 2));
}
// B fragment of one n-tile, B = X[k0..k0+16) × [n0..n0+8) (row-major, rows k).
__device__ inline void load_b1(unsigned (&b)[2], const bf16* X, int ld, int k0, int n0) {
  const int l = threadIdx.x % 32;
  ldmatrix_x2_trans(b, X + (k0 + (l % 8) + 8 * ((l / 8) % 2)) * ld + n0);
}
// B fragments of two adjacent n-tiles of Yᵀ: B[k][n] = Y[n0 + n][k0 + k] (Y
// row-major with rows n, e.g. the keys of Q Kᵀ).
__device__ inline void load_b2_trans(unsigned (&b)[4], const bf16* Y, int ld, int n0, int k0) {
  const int l = threadIdx.x % 32, i = l / 8;
  ldmatrix_x4(b, Y + (n0 + (l % 8) + 8 * (i / 2)) * ld + k0 + 8 * (i % 2));
}

__device__ inline unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // round to nearest even, each
  return *reinterpret_cast<const unsigned*>(&v);
}
__device__ inline float2 unpack_bf16(unsigned x) {
  __nv_bfloat162 v;
  *reinterpret_cast<unsigned*>(&v) = x;
  return __bfloat1622float2(v);
}

}  // namespace ttr::gpu::mma
