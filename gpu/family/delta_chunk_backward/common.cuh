// Shared by the chunk backward's stages (gpu/family/delta_chunk_backward.cu and
// the kernels beside this file): the workspace, the kernel arguments, and the
// warp-level tile products every stage is written in.
//
// One source for both dtypes. Every product is written as 16 × 16 output units
// held in the mma.sync accumulator layout (gpu/core/mma_sync.cuh: lane = 4g + q;
// unit element (j, e) at row m0 + g + 8(e/2), column n0 + 8j + 2q + e%2):
//   * bf16 operands: `ldmatrix` + `mma.sync.m16n8k16` (fp32 accumulation);
//   * fp32 operands: the same unit computed by fp32 FMA from shared memory, in
//     the same layout — never TF32, so the fp32 kernels keep the fp32 model.
// Masks, decays, narrowing and the reductions are then one code for both.
//
// Products whose operand the CPU form keeps in fp32 (reference/family/
// delta_chunk_backward.hpp: dT, Tᵀ dT, the decayed dM and dA) are "wide" tiles:
// in fp32 for fp32; for bf16 a pair of bf16 tiles hi = bf16(x), lo = bf16(x − hi),
// multiplied as two tensor-core products. |x − hi − lo| ≤ 2⁻¹⁸|x|: between fp32
// (2⁻²⁴) and bf16 (2⁻⁹), 2⁸ below the bf16 rounding of the other operand of the
// same product (T, K, Q), so the chunk form's bf16 model covers it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "gpu/api.hpp"
#include "gpu/core/mma_sync.cuh"
#include "gpu/core/mutant.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/tile.cuh"
#include "gpu/family/delta_backward_finish.cuh"
#include "gpu/family/delta_chunk_stages.cuh"

namespace ttr::gpu::chunk_bwd {

using bf16 = __nv_bfloat16;
using chunk::kChunk;
using chunk::Shape;
constexpr int kThreads = 256;  // the per-chunk kernels: 8 warps

// The backward's intermediates beyond the forward's (all per (b, h) contiguous).
struct Work {
  chunk::Work fwd;  // W, U, G, D (Δ), WD, Tn, and the chunk-initial states Hs in fp32
  void* M;          // E [BH][Tp][64]      scores narrow([Q Kᵀ ⊙ Γ]_{s ≤ t})
  void* QD;         // E [BH][Tp][K]       narrow(Q ⊙ e^{b})
  void* dH;         // E [BH][NT][K][V]    narrow(dS_end) per chunk (FLA's dh)
  void* dD;         // E [BH][Tp][V]       dΔ (FLA's dv2)
  float* rowdot;    // [BH][NT][NVT][K]    Σ_j dS_end,ij S_0,ij over a state pass tile's columns
  void* dWy;        // E [BH][Tp][K]       dWy = narrow(−dΔ S_0ᵀ) (FLA's dw)
  float* dWk;       // [BH][Tp][K]         the write key's gradient from the output's reads (fp32)
  float* dbp;       // [NKB][BH][Tp][Kg']  gate-gradient partials of dqkwg (scalar: per K block)
  int NVT, NKB, KB;  // state-pass column tiles; dqkwg's key blocks of KB columns
};

template <class E>
struct Args {
  Shape s;
  const E *q, *k, *v, *beta, *do_;
  // The write key: k itself, or the preconditioned layers' k̃, whose gradient then
  // goes to out.dw apart from the read key's (wy's OWN_W).
  const E* w;
  const float* dht;  // optional
  float* dh0;        // optional
  E* dv;
  delta_backward::DeltaGradPartials out;  // dq (scaled), dk (read + write key, or read), dw (k̃'s), dg, dbeta
  float scale, eps;
  bool kaczmarz;
  Mutant mutant;  // a catalogued bug (gpu/core/mutant.cuh), Mutant::none normally
  // The final dq, dk, dβ in the dtype, written by the stages themselves when `finish`
  // has no chain rule to apply (no Kaczmarz, no L2 norm); nullptr: the fp32 partials
  // in `out`, for finish.
  E *dq_out = nullptr, *dk_out = nullptr, *dbeta_out = nullptr;
};

// A gradient element: into the final tensor (rounded to the dtype as finish rounds
// it, after its own 0 + x, which makes −0 +0) or into the fp32 partial.
template <class E>
__device__ inline void put_grad(E* out, float* partial, std::int64_t at, float x) {
  if (out) out[at] = Elem<E>::from_float(0.0f + x);
  else partial[at] = x;
}

// The last chunk of sequence b when it is partial and the
// backward-last-partial-chunk-dropped mutant is on: a floor(T/64) grid, whose
// stages leave it out (gradients 0).
template <class E>
__device__ inline bool chunk_dropped(const Args<E>& a, int b, int n) {
  return mutated(a.mutant, Mutant::backward_last_partial_chunk_dropped) && a.s.len(b) % kChunk != 0 &&
         n == a.s.chunks(b) - 1;
}

// ---------------------------------------------------------------- elements
template <class E>
__device__ inline void st_pair(E* p, float x0, float x1) {
  if constexpr (std::is_same_v<E, float>) *reinterpret_cast<float2*>(p) = make_float2(x0, x1);
  else *reinterpret_cast<unsigned*>(p) = mma::pack_bf16(x0, x1);
}
// A pair of adjacent elements as they lie in memory (float2 or a bf16x2 word), so
// that a load can be issued long before its use: converting at the load would put
// the conversion, and with it the wait for memory, right after the load.
template <class E>
using RawPair = std::conditional_t<std::is_same_v<E, float>, float2, unsigned>;
template <class E>
__device__ inline RawPair<E> ld_pair_raw(const E* p) {
  return *reinterpret_cast<const RawPair<E>*>(p);
}
template <class E>
__device__ inline float2 unpack_pair(RawPair<E> x) {
  if constexpr (std::is_same_v<E, float>) return x;
  else return mma::unpack_bf16(x);
}
template <class E>
__device__ inline float2 ld_pair(const E* p) {
  return unpack_pair<E>(ld_pair_raw(p));
}

// Butterfly sums (every lane gets the same bits; fixed order, so deterministic):
// over the 4 lanes q of a row group, and over the 8 row groups g of a column.
__device__ inline float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ inline float group_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 8);
  return x + __shfl_xor_sync(0xffffffffu, x, 16);
}
__device__ inline float warp_sum(float x) { return group_sum(quad_sum(x)); }

// The calling lane's place in a unit: rows m0 + g, m0 + g + 8; columns n0 + 8j + 2q (+1).
struct Lane {
  int warp, g, q;
};
__device__ inline Lane lane_of() {
  const int l = threadIdx.x % 32;
  return {static_cast<int>(threadIdx.x / 32), l / 4, l % 4};
}
__device__ inline int unit_row(const Lane& L, int m0, int e) { return m0 + L.g + 8 * (e / 2); }
__device__ inline int unit_col(const Lane& L, int n0, int j, int e) { return n0 + 8 * j + 2 * L.q + e % 2; }

using Unit = float[2][4];
__device__ inline void zero(Unit& u) {
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) u[j][e] = 0.0f;
}

// ---------------------------------------------------------------- products
// acc += op(A)[m0 .. m0+16, k0 .. k0+16) · op(B)[k0 .. k0+16, n0 .. n0+16), where
// op(A)(m, k) = TA ? A[k·lda + m] : A[m·lda + k], op(B)(k, n) = TB ? B[n·ldb + k] : B[k·ldb + n].
template <bool TA, bool TB>
__device__ inline void mma16(Unit& acc, const bf16* A, int lda, int m0, const bf16* B, int ldb, int n0, int k0) {
  unsigned a[4], b[4];
  if constexpr (TA) mma::load_a_trans(a, A, lda, m0, k0);
  else mma::load_a(a, A, lda, m0, k0);
  if constexpr (TB) mma::load_b2_trans(b, B, ldb, n0, k0);
  else mma::load_b2(b, B, ldb, k0, n0);
  mma::mma_bf16(acc[0], a, b);
  mma::mma_bf16(acc[1], a, b + 2);
}
template <bool TA, bool TB>
__device__ inline void mma16(Unit& acc, const float* A, int lda, int m0, const float* B, int ldb, int n0, int k0) {
  const Lane L = lane_of();
  const int r0 = m0 + L.g, r1 = r0 + 8;
#pragma unroll 4
  for (int kk = 0; kk < 16; ++kk) {
    const int k = k0 + kk;
    const float a0 = TA ? A[k * lda + r0] : A[r0 * lda + k];
    const float a1 = TA ? A[k * lda + r1] : A[r1 * lda + k];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int n = n0 + 8 * j + 2 * L.q;
      const float b0 = TB ? B[n * ldb + k] : B[k * ldb + n];
      const float b1 = TB ? B[(n + 1) * ldb + k] : B[k * ldb + n + 1];
      acc[j][0] = fmaf(a0, b0, acc[j][0]);
      acc[j][1] = fmaf(a0, b1, acc[j][1]);
      acc[j][2] = fmaf(a1, b0, acc[j][2]);
      acc[j][3] = fmaf(a1, b1, acc[j][3]);
    }
  }
}

// A tile of fp32 values as a product operand: fp32 itself, or bf16 hi + lo (above).
template <class E>
struct Wide {
  E* hi;
  E* lo;  // bf16 only
};
template <class E>
__device__ inline void put_wide(const Wide<E>& w, int at, float x0, float x1) {
  if constexpr (std::is_same_v<E, float>) {
    st_pair(w.hi + at, x0, x1);
  } else {
    const unsigned h = mma::pack_bf16(x0, x1);
    const float2 hf = mma::unpack_bf16(h);
    *reinterpret_cast<unsigned*>(w.hi + at) = h;
    *reinterpret_cast<unsigned*>(w.lo + at) = mma::pack_bf16(x0 - hf.x, x1 - hf.y);
  }
}
// acc += op(A) op(B) with A wide (mma16_wa) or B wide (mma16_wb).
template <bool TA, bool TB, class E>
__device__ inline void mma16_wa(Unit& acc, const Wide<E>& A, int lda, int m0, const E* B, int ldb, int n0, int k0) {
  mma16<TA, TB>(acc, A.hi, lda, m0, B, ldb, n0, k0);
  if constexpr (!std::is_same_v<E, float>) mma16<TA, TB>(acc, A.lo, lda, m0, B, ldb, n0, k0);
}
template <bool TA, bool TB, class E>
__device__ inline void mma16_wb(Unit& acc, const E* A, int lda, int m0, const Wide<E>& B, int ldb, int n0, int k0) {
  mma16<TA, TB>(acc, A, lda, m0, B.hi, ldb, n0, k0);
  if constexpr (!std::is_same_v<E, float>) mma16<TA, TB>(acc, A, lda, m0, B.lo, ldb, n0, k0);
}

// ---------------------------------------------------------------- tiles
// β of a chunk row as the forward uses it (ut_transform): narrowed; Kaczmarz
// β̃ = narrow(β / (‖k‖² + eps)), ‖k‖² in fp32 in coordinate order from the key
// as stored (the same operations, so the same bits).
template <class E>
__device__ inline float beta_used(const Args<E>& a, const E* krow, float beta) {
  if (!a.kaczmarz) return beta;
  float kk = 0.0f;
  for (int d = 0; d < a.s.K; ++d) {
    const float x = Elem<E>::to_float(krow[d]);
    kk += x * x;
  }
  return narrow<E>(beta / (kk + a.eps));
}

}  // namespace ttr::gpu::chunk_bwd
