// Chunkwise forward of the delta rule with decay on the GPU: the algorithm of
// reference/family/delta_chunk.hpp (PDN §2.2 and eq. (6), App. D and F; the
// WY representation / UT transform), split the way FLA's chunk_gated_delta_rule
// splits it, so that each stage has enough independent blocks to fill the chip:
//
//   1. ut_transform   (grid: chunks × B·H)      per chunk, independent:
//        b = cumsum(g) inside the chunk                         (fp32)
//        A = tril(Diag(β) [K Wᵀ ⊙ Γ], −1),  T = (I + A)⁻¹       (fp32, T stored narrowed)
//        W = T (β ⊙ K ⊙ e^{b}),  U = T (β ⊙ V)                  (stored narrowed)
//   2. state_pass     (grid: V-tiles × B·H)     sequential over chunks:
//        h_n = narrow(S)  (the chunk-initial state as an operand, stored)
//        Δ = narrow(U − W h_n)                                  (FLA's v_new, stored)
//        S ← Diag(e^{b_last}) S + (w ⊙ e^{b_last − b})ᵀ Δ       (fp32 state)
//   3. outputs        (grid: chunks × V-tiles × B·H), independent:
//        O = (Q ⊙ e^{b}) h_n + [Q wᵀ ⊙ Γ]_{s ≤ t} Δ,  o = narrow(scale · O)
//
// The state's V columns are independent in the delta rule (δ_t's column j reads
// only column j of S), which is what lets stage 2 split V across blocks.
// Narrowing points are those of docs/arithmetic-policies.md ("Delta family
// chunk"); every product accumulates in fp32 (tensor cores for bf16, FMA for fp32).
// Per-key decay (KDA) cannot be factored without e^{+b}, so A and the score
// matrix are then formed pair by pair in fp32, as the reference does.
//
// Two implementations of the stages: the generic kernels below (WMMA/FMA
// block_gemm on shared-memory tiles) serve fp32; bf16 runs the kernels of
// delta_chunk_bf16.cuh (raw mma.sync fragments in registers, the state pass's S
// held in accumulators across chunks, one output block per chunk and head), the
// same arithmetic at the same narrowing points, only faster.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/cluster.cuh"
#include "gpu/core/launch.cuh"
#include "gpu/core/mma.cuh"
#include "gpu/core/mma_sync.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/tile.cuh"
#include "gpu/family/delta_chunk_stages.cuh"

namespace ttr::gpu {
namespace {

using chunk::kChunk;
using chunk::Shape;
using chunk::Work;  // stage intermediates (delta_chunk_stages.cuh)
constexpr int kThreads = 256;

// T = (I + A)⁻¹ for a strictly lower triangular 64×64 fp32 A in shared memory
// (leading dimension lda), by forward substitution, one column per group of 4
// threads (256 threads): column j of T solves (I + A) x = e_j,
// x_t = [t = j] − Σ_{s<t} A_ts x_s (x_s = 0 for s < j, so the formula needs no case
// for t < j). The columns are independent; the 4 threads split the sum over
// s ≡ part (mod 4), and each keeps its x_s in registers (t and the slot are
// compile-time after unrolling), so only A is read from shared memory, ~t/4 loads
// per step. store(t, j, x) receives every entry of T, from one thread each.
template <class Store>
__device__ inline void unit_lower_inverse(const float* A, int lda, Store&& store) {
  const int j = threadIdx.x / 4, part = threadIdx.x % 4;
  float xs[kChunk / 4];
#pragma unroll
  for (int i = 0; i < kChunk / 4; ++i) xs[i] = 0.0f;
#pragma unroll
  for (int t = 0; t < kChunk; ++t) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < (t + 3) / 4; ++i) {
      const int s2 = part + 4 * i;
      const float a = A[t * lda + min(s2, kChunk - 1)];
      acc = fmaf(s2 < t ? a : 0.0f, xs[i], acc);
    }
    acc += __shfl_xor_sync(0xffffffffu, acc, 1);
    acc += __shfl_xor_sync(0xffffffffu, acc, 2);
    const float x = (t == j ? 1.0f : 0.0f) - acc;
    if (part == (t & 3)) xs[t >> 2] = x;
    if (part == 0) store(t, j, x);
  }
}

// ---------------------------------------------------------------- stage 1
template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) ut_transform_kernel(Shape s, const E* __restrict__ k,
                                                                 const E* __restrict__ w, const E* __restrict__ v,
                                                                 const E* __restrict__ beta,
                                                                 const float* __restrict__ g, bool kaczmarz,
                                                                 float eps, Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0);
  const int K = s.K, V = s.V, ldk = padded_ld<E>(K), ldv = padded_ld<E>(V), ldc = padded_ld<E>(kChunk);
  SmemArena arena{smem};
  E* kt = arena.take<E>(kChunk, K);
  E* wt = w ? arena.take<E>(kChunk, K) : kt;
  E* vt = arena.take<E>(kChunk, V);
  E* tn = arena.take<E>(kChunk, kChunk);
  float* A = arena.take<float>(kChunk, kChunk);
  float* Tf = arena.take<float>(kChunk, kChunk);
  // W and U's fp32 results reuse A and T's space (adjacent, 2·64·68 floats ≥
  // 64·(128+4)): they are formed after the narrowed inverse has been taken.
  float* out = A;
  float* bg = arena.take<float>(kChunk, s.Kg);
  float* bt = arena.take<float>(1, kChunk);
  float* eb = arena.take<float>(1, kChunk);  // e^{b_t} (scalar decay)
  const int lda = padded_ld<float>(kChunk), ldo = padded_ld<float>(max(K, V)), ldg = padded_ld<float>(s.Kg);

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;  // (b, t0, h)
  load_rows(kt, ldk, k + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  if (w) load_rows(wt, ldk, w + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows(vt, ldv, v + row0 * V, static_cast<std::int64_t>(s.H) * V, kChunk, c, V);
  if (threadIdx.x < kChunk) {
    const int t = threadIdx.x;
    bt[t] = t < c ? Elem<E>::to_float(beta[row0 + static_cast<std::int64_t>(t) * s.H]) : 0.0f;
  }
  // b_t = Σ_{s ≤ t} g_s from the chunk start, in fp32, in token order (as
  // reference/family/chunk_common.hpp: cumulative_gates). Padding rows add 0, so
  // row 63 holds b_last of a partial chunk too.
  for (int i = threadIdx.x; i < kChunk * s.Kg; i += blockDim.x) {
    const int t = i / s.Kg, d = i % s.Kg;
    bg[t * ldg + d] = (D != Decay::none && t < c) ? g[(row0 + static_cast<std::int64_t>(t) * s.H) * s.Kg + d] : 0.0f;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < s.Kg; d += blockDim.x) {
    float acc = 0.0f;
    for (int t = 0; t < kChunk; ++t) bg[t * ldg + d] = acc += bg[t * ldg + d];
  }
  __syncthreads();
  if (D == Decay::scalar && threadIdx.x < kChunk) eb[threadIdx.x] = expf(bg[threadIdx.x * ldg]);
  // Kaczmarz (KLA-Z eq. (3)): β̃ = β/(‖k‖² + eps) in fp32 from the stored key,
  // then stored in E like any β.
  if (kaczmarz && threadIdx.x < c) {
    const int t = threadIdx.x;
    float kk = 0.0f;
    for (int d = 0; d < K; ++d) {
      const float x = Elem<E>::to_float(kt[t * ldk + d]);
      kk += x * x;
    }
    bt[t] = narrow<E>(bt[t] / (kk + eps));
  }
  // A = tril(Diag(β) [K Wᵀ ⊙ Γ], −1)
  if constexpr (D != Decay::per_key) block_gemm<false, true>(A, lda, kt, ldk, wt, ldk, kChunk, kChunk, K, false);
  __syncthreads();
  for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
    const int t = i / kChunk, j = i % kChunk;
    float a = 0.0f;
    if (j < t) {
      if constexpr (D == Decay::per_key) {
        for (int d = 0; d < K; ++d)
          a = fmaf(Elem<E>::to_float(kt[t * ldk + d]) * Elem<E>::to_float(wt[j * ldk + d]),
                   expf(bg[t * ldg + d] - bg[j * ldg + d]), a);
      } else {
        a = A[t * lda + j];
        if constexpr (D == Decay::scalar) a *= expf(bg[t * ldg] - bg[j * ldg]);
      }
      a *= bt[t];
    }
    A[t * lda + j] = a;
  }
  __syncthreads();
  unit_lower_inverse(A, lda, [&](int t, int j, float x) { Tf[t * lda + j] = x; });
  __syncthreads();
  // The narrowed inverse (FLA's solve_tril output, k.dtype), and the operands
  // β ⊙ K ⊙ e^{b} (the decayed key narrowed, then β times it narrowed) and β ⊙ V,
  // written over the k and v tiles (A no longer needs them).
  for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
    const int t = i / kChunk, j = i % kChunk;
    tn[t * ldc + j] = Elem<E>::from_float(Tf[t * lda + j]);
  }
  // The write keys decayed to the chunk end, narrow(w ⊙ e^{b_last − b_t}) (the
  // state update's operand; factors ≤ 1), stored for the state pass.
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0;
  {
    E* WDg = static_cast<E*>(work.WD) + wrow * K;
    const float* blast = bg + (kChunk - 1) * ldg;
    for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
      const int t = i / K, d = i % K, col = D == Decay::per_key ? d : 0;
      float x = Elem<E>::to_float(wt[t * ldk + d]);
      if constexpr (D != Decay::none) x *= expf(blast[col] - bg[t * ldg + col]);
      WDg[static_cast<std::int64_t>(t) * K + d] = Elem<E>::from_float(x);
    }
  }
  __syncthreads();  // wt may be kt, overwritten next
  if (work.Tn) {  // the narrowed inverse, for the backward (delta_chunk_stages.cuh)
    E* Tg = static_cast<E*>(work.Tn) + (static_cast<std::int64_t>(bh) * s.NT + n) * kChunk * kChunk;
    for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) Tg[i] = tn[(i / kChunk) * ldc + i % kChunk];
  }
  for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
    const int t = i / K, d = i % K;
    float x = Elem<E>::to_float(kt[t * ldk + d]);
    if constexpr (D == Decay::scalar) x = narrow<E>(x * eb[t]);
    if constexpr (D == Decay::per_key) x = narrow<E>(x * expf(bg[t * ldg + d]));
    kt[t * ldk + d] = Elem<E>::from_float(bt[t] * x);
  }
  for (int i = threadIdx.x; i < kChunk * V; i += blockDim.x) {
    const int t = i / V, j = i % V;
    vt[t * ldv + j] = Elem<E>::from_float(bt[t] * Elem<E>::to_float(vt[t * ldv + j]));
  }
  __syncthreads();
  // W = T (β ⊙ K ⊙ e^{b}),  U = T (β ⊙ V): stored narrowed (FLA's w, u).
  E* Wg = static_cast<E*>(work.W) + wrow * K;
  E* Ug = static_cast<E*>(work.U) + wrow * V;
  block_gemm<false, false>(out, ldo, tn, ldc, kt, ldk, kChunk, K, kChunk, false);
  __syncthreads();
  for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
    const int t = i / K, d = i % K;
    Wg[static_cast<std::int64_t>(t) * K + d] = Elem<E>::from_float(out[t * ldo + d]);
  }
  __syncthreads();
  block_gemm<false, false>(out, ldo, tn, ldc, vt, ldv, kChunk, V, kChunk, false);
  __syncthreads();
  for (int i = threadIdx.x; i < kChunk * V; i += blockDim.x) {
    const int t = i / V, j = i % V;
    Ug[static_cast<std::int64_t>(t) * V + j] = Elem<E>::from_float(out[t * ldo + j]);
  }
  float* Gg = work.G + wrow * s.Kg;
  for (int i = threadIdx.x; i < kChunk * s.Kg; i += blockDim.x) Gg[i] = bg[(i / s.Kg) * ldg + i % s.Kg];
}

template <class E>
std::size_t ut_smem(const Shape& s, bool separate_w) {
  return tile_bytes<E>(kChunk, s.K) * (separate_w ? 2 : 1) + tile_bytes<E>(kChunk, s.V) +
         tile_bytes<E>(kChunk, kChunk) + 2 * tile_bytes<float>(kChunk, kChunk) + tile_bytes<float>(kChunk, s.Kg) +
         2 * tile_bytes<float>(1, kChunk);
}

// ---------------------------------------------------------------- stage 2
template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) state_pass_kernel(Shape s, int bv, int stages,
                                                               const float* __restrict__ h0, float* __restrict__ ht,
                                                               Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int j0 = blockIdx.x * bv, bh = blockIdx.y;
  const int K = s.K, V = s.V, ldk = padded_ld<E>(K), ldb = padded_ld<E>(bv), ldf = padded_ld<float>(bv);
  const int ldg = s.Kg;  // gates: flat rows (loaded as one contiguous block)
  SmemArena arena{smem};
  float* S = arena.take<float>(K, bv);
  E* h_op = arena.take<E>(K, bv);
  E* Dt = arena.take<E>(kChunk, bv);
  float* Df = arena.take<float>(kChunk, bv);
  float* dl = arena.take<float>(1, K);  // e^{b_last} per state row
  // Two stages of the per-chunk inputs (chunk n + 1 loads by cp.async while n
  // computes) where shared memory allows, else one.
  E *Wb[2], *wb[2], *Ub[2];
  float* gb[2];
  for (int i = 0; i < stages; ++i) {
    Wb[i] = arena.take<E>(kChunk, K);
    wb[i] = arena.take<E>(kChunk, K);
    Ub[i] = arena.take<E>(kChunk, bv);
    gb[i] = arena.take<float>(1, kChunk * s.Kg);
  }

  const std::int64_t sbase = static_cast<std::int64_t>(bh) * K * V;
  for (int i = threadIdx.x; i < K * bv; i += blockDim.x) {
    const int r = i / bv, cc = i % bv;
    S[r * ldf + cc] = h0 ? h0[sbase + static_cast<std::int64_t>(r) * V + j0 + cc] : 0.0f;
  }
  const E* Wg = static_cast<const E*>(work.W) + static_cast<std::int64_t>(bh) * s.Tp * K;
  const E* Ug = static_cast<const E*>(work.U) + static_cast<std::int64_t>(bh) * s.Tp * V + j0;
  const float* Gg = work.G + static_cast<std::int64_t>(bh) * s.Tp * s.Kg;
  const E* WDg = static_cast<const E*>(work.WD) + static_cast<std::int64_t>(bh) * s.Tp * K;
  E* Hg = static_cast<E*>(work.Hs) + static_cast<std::int64_t>(bh) * s.NT * K * V + j0;
  E* Dg = static_cast<E*>(work.D) + static_cast<std::int64_t>(bh) * s.Tp * V + j0;
  auto prefetch = [&](int n) {
    const int t0 = n * kChunk, buf = n & (stages - 1);
    load_rows_async(Wb[buf], ldk, Wg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
    load_rows_async(wb[buf], ldk, WDg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
    load_rows_async(Ub[buf], ldb, Ug + static_cast<std::int64_t>(t0) * V, V, kChunk, kChunk, bv);
    load_flat_async(gb[buf], Gg + static_cast<std::int64_t>(t0) * s.Kg, kChunk * s.Kg);
    cp_async_commit();
  };
  const int len = s.len(bh / s.H), NT = s.chunks(bh / s.H);  // this sequence's chunks (varlen)
  if (stages == 2 && NT > 0) prefetch(0);
  for (int n = 0; n < NT; ++n) {
    const int t0 = n * kChunk, c = min(kChunk, len - t0), buf = n & (stages - 1);
    const E* Wt = Wb[buf];
    const E* wt = wb[buf];
    const E* Ut = Ub[buf];
    const float* bg = gb[buf];
    if (stages == 1) {
      prefetch(n);
      cp_async_wait<0>();
    } else if (n + 1 < NT) {
      prefetch(n + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // every thread's copies of chunk n have landed
    if (D != Decay::none)
      for (int r = threadIdx.x; r < (D == Decay::per_key ? K : 1); r += blockDim.x)
        dl[r] = expf(bg[(kChunk - 1) * ldg + r]);
    // h_n = narrow(S): the chunk-initial state as an operand (FLA stores h per chunk in k.dtype).
    for (int i = threadIdx.x; i < K * bv; i += blockDim.x) {
      const int r = i / bv, cc = i % bv;
      const E x = Elem<E>::from_float(S[r * ldf + cc]);
      h_op[r * ldb + cc] = x;
      Hg[static_cast<std::int64_t>(n) * K * V + static_cast<std::int64_t>(r) * V + cc] = x;
    }
    __syncthreads();
    // Δ = narrow(U − W h_n)
    block_gemm<false, false>(Df, ldf, Wt, ldk, h_op, ldb, kChunk, bv, K, false);
    __syncthreads();
    for (int i = threadIdx.x; i < kChunk * bv; i += blockDim.x) {
      const int t = i / bv, cc = i % bv;
      const E x = Elem<E>::from_float(Elem<E>::to_float(Ut[t * ldb + cc]) - Df[t * ldf + cc]);
      Dt[t * ldb + cc] = x;
      if (t < c) Dg[static_cast<std::int64_t>(t0 + t) * V + cc] = x;
    }
    // S ← Diag(e^{b_last}) S (the decayed write keys come from stage 1).
    if constexpr (D != Decay::none)
      for (int i = threadIdx.x; i < K * bv; i += blockDim.x) {
        const int r = i / bv, cc = i % bv;
        S[r * ldf + cc] *= dl[D == Decay::per_key ? r : 0];
      }
    __syncthreads();
    // S += (w ⊙ e^{b_last − b})ᵀ Δ
    block_gemm<true, false>(S, ldf, wt, ldk, Dt, ldb, K, bv, kChunk, true);
    __syncthreads();
  }
  if (ht)
    for (int i = threadIdx.x; i < K * bv; i += blockDim.x) {
      const int r = i / bv, cc = i % bv;
      ht[sbase + static_cast<std::int64_t>(r) * V + j0 + cc] = S[r * ldf + cc];
    }
}

template <class E>
std::size_t state_smem(const Shape& s, int bv, int stages) {
  return tile_bytes<float>(s.K, bv) + tile_bytes<E>(s.K, bv) + tile_bytes<E>(kChunk, bv) +
         tile_bytes<float>(kChunk, bv) + tile_bytes<float>(1, s.K) +
         stages * (2 * tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(kChunk, bv) + tile_bytes<float>(1, kChunk * s.Kg));
}

// ---------------------------------------------------------------- stage 3
template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) output_kernel(Shape s, int bv, const E* __restrict__ q,
                                                           const E* __restrict__ wkey, float scale, E* __restrict__ o,
                                                           Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int n = blockIdx.x, j0 = blockIdx.y * bv, bh = blockIdx.z, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0);
  const int K = s.K, V = s.V, ldk = padded_ld<E>(K), ldb = padded_ld<E>(bv), ldf = padded_ld<float>(bv);
  const int ldc = padded_ld<E>(kChunk), lds = padded_ld<float>(kChunk), ldg = padded_ld<float>(s.Kg);
  SmemArena arena{smem};
  E* qt = arena.take<E>(kChunk, K);
  E* wt = arena.take<E>(kChunk, K);
  E* h_op = arena.take<E>(K, bv);
  E* Dt = arena.take<E>(kChunk, bv);
  E* sc = arena.take<E>(kChunk, kChunk);
  float* Sf = arena.take<float>(kChunk, kChunk);
  float* Of = arena.take<float>(kChunk, bv);
  float* bg = arena.take<float>(kChunk, s.Kg);

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0;
  load_rows(qt, ldk, q + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows(wt, ldk, wkey + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows(h_op, ldb,
            static_cast<const E*>(work.Hs) + (static_cast<std::int64_t>(bh) * s.NT + n) * K * V + j0, V, K, K, bv);
  load_rows(Dt, ldb, static_cast<const E*>(work.D) + wrow * V + j0, V, kChunk, c, bv);
  for (int i = threadIdx.x; i < kChunk * s.Kg; i += blockDim.x)
    bg[(i / s.Kg) * ldg + i % s.Kg] = work.G[wrow * s.Kg + i];
  __syncthreads();
  // Scores [Q wᵀ ⊙ Γ]_{s ≤ t}, narrowed (the masked score matrix as an operand).
  if constexpr (D != Decay::per_key) block_gemm<false, true>(Sf, lds, qt, ldk, wt, ldk, kChunk, kChunk, K, false);
  __syncthreads();
  for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
    const int t = i / kChunk, j = i % kChunk;
    float a = 0.0f;
    if (j <= t) {
      if constexpr (D == Decay::per_key) {
        for (int d = 0; d < K; ++d)
          a = fmaf(Elem<E>::to_float(qt[t * ldk + d]) * Elem<E>::to_float(wt[j * ldk + d]),
                   expf(bg[t * ldg + d] - bg[j * ldg + d]), a);
      } else {
        a = Sf[t * lds + j];
        if constexpr (D == Decay::scalar) a *= expf(bg[t * ldg] - bg[j * ldg]);
      }
    }
    sc[t * ldc + j] = Elem<E>::from_float(a);
  }
  __syncthreads();
  // Q ⊙ e^{b}, narrowed, over the q tile (scalar decay: one e^{b_t} per row, kept in Of).
  if constexpr (D == Decay::scalar)
    if (threadIdx.x < kChunk) Of[threadIdx.x] = expf(bg[threadIdx.x * ldg]);
  __syncthreads();
  if constexpr (D != Decay::none)
    for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
      const int t = i / K, d = i % K;
      const float f = D == Decay::per_key ? expf(bg[t * ldg + d]) : Of[t];
      qt[t * ldk + d] = Elem<E>::from_float(Elem<E>::to_float(qt[t * ldk + d]) * f);
    }
  __syncthreads();
  // O = (Q ⊙ e^{b}) h_n + scores Δ in one fp32 accumulator.
  block_gemm<false, false>(Of, ldf, qt, ldk, h_op, ldb, kChunk, bv, K, false);
  __syncthreads();
  block_gemm<false, false>(Of, ldf, sc, ldc, Dt, ldb, kChunk, bv, kChunk, true);
  __syncthreads();
  for (int i = threadIdx.x; i < c * bv; i += blockDim.x) {
    const int t = i / bv, cc = i % bv;
    o[(row0 + static_cast<std::int64_t>(t) * s.H) * V + j0 + cc] = Elem<E>::from_float(scale * Of[t * ldf + cc]);
  }
}

template <class E>
std::size_t output_smem(const Shape& s, int bv) {
  return 2 * tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(s.K, bv) + tile_bytes<E>(kChunk, bv) +
         tile_bytes<E>(kChunk, kChunk) + tile_bytes<float>(kChunk, kChunk) + tile_bytes<float>(kChunk, bv) +
         tile_bytes<float>(kChunk, s.Kg);
}

#include "gpu/family/delta_chunk_bf16.cuh"

// ---------------------------------------------------------------- host side
template <class Kern>
void set_smem(Kern kernel, std::size_t bytes) {
  allow_smem(kernel, bytes, "gpu delta kernel");
}

// Stage 1: the bf16 kernel of delta_chunk_bf16.cuh, the generic one for fp32.
template <class E, Decay D>
void stage1(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream) {
  const unsigned BH = static_cast<unsigned>(s.B) * s.H;
  const E* k = static_cast<const E*>(a.k);
  const E* w = static_cast<const E*>(a.w);
  const E* v = static_cast<const E*>(a.v);
  const E* beta = static_cast<const E*>(a.beta);
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    const std::size_t sm1 = bf16k::ut_smem(s, w != nullptr);
    with_static_kv(s.K, s.V, [&](auto kv) {
      constexpr int KV = decltype(kv)::value;
      set_smem(bf16k::ut_transform<D, KV>, sm1);
      bf16k::ut_transform<D, KV><<<dim3(s.NT, BH), kThreads, sm1, stream>>>(s, k, w, v, beta, a.g, a.kaczmarz,
                                                                             a.kaczmarz_eps, work);
    });
  } else {
    const std::size_t sm1 = ut_smem<E>(s, w != nullptr);
    set_smem(ut_transform_kernel<E, D>, sm1);
    ut_transform_kernel<E, D><<<dim3(s.NT, BH), kThreads, sm1, stream>>>(s, k, w, v, beta, a.g, a.kaczmarz,
                                                                          a.kaczmarz_eps, work);
  }
  TTR_CUDA_CHECK_LAUNCH("ut_transform_kernel");
}

// Stage 2. bf16: state-pass tiles of 16 columns, B·H·V/16 blocks (256 at B = 4,
// H = 8, V = 128, two per multiprocessor, whose sequential chains hide each
// other's latency). TTR_GPU_STATE_BV (read at every launch; V a multiple of 32
// for the 32-column ones, else the default) chooses another tiling: "32" halves the
// blocks and the redundant W reads, "32x2" does the same with two warps a 16-row
// strip (each 16 columns: the per-warp work of 16); "16c" and "32x2c" run a head's
// column blocks as one cluster of 2, 4 or 8 (the largest that divides V/BV) that
// shares each chunk's W tiles. All give the same bits (their check:
// CudaDelta.StatePassTilingsGiveTheSameBits); which is fastest is
// docs/gpu-delta-backward-speed.md's question. fp32: 16 columns too,
// double-buffered where shared memory allows.
#include "gpu/family/delta_state_tiling.cuh"

template <class E, Decay D>
void stage2(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream) {
  const unsigned BH = static_cast<unsigned>(s.B) * s.H;
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    const StateTiling t = state_tiling(a.V);
    const unsigned cx = t.cluster ? cluster_blocks(a.V / t.bv) : 1;
    with_static_kv(s.K, s.V, [&](auto kv) {
      constexpr int KV = decltype(kv)::value;
      if (t.bv == 32 && t.split == 2) {
        if (cx > 1) return launch_bf16_state_pass<D, 32, KV, 2, true>(a, s, work, BH, stream, cx);
        return launch_bf16_state_pass<D, 32, KV, 2>(a, s, work, BH, stream);
      }
      if (t.bv == 32) return launch_bf16_state_pass<D, 32, KV, 1>(a, s, work, BH, stream);
      if (cx > 1) return launch_bf16_state_pass<D, 16, KV, 1, true>(a, s, work, BH, stream, cx);
      launch_bf16_state_pass<D, 16, KV, 1>(a, s, work, BH, stream);
    });
  } else {
    const int bv2 = 16;
    const int smem_max = max_smem_optin();
    const int stages = state_smem<E>(s, bv2, 2) <= static_cast<std::size_t>(smem_max) ? 2 : 1;
    const std::size_t sm2 = state_smem<E>(s, bv2, stages);
    set_smem(state_pass_kernel<E, D>, sm2);
    state_pass_kernel<E, D><<<dim3(a.V / bv2, BH), kThreads, sm2, stream>>>(s, bv2, stages, a.h0, a.ht, work);
  }
  TTR_CUDA_CHECK_LAUNCH("state_pass_kernel");
}

// Stage 3: bf16 one block per (chunk, head) over all of V; fp32 V tiles of 64
// (or 32, 16) columns.
template <class E, Decay D>
void stage3(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream) {
  const unsigned BH = static_cast<unsigned>(s.B) * s.H;
  const E* q = static_cast<const E*>(a.q);
  const E* wkey = static_cast<const E*>(a.w ? a.w : a.k);
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    const std::size_t sm3 = bf16k::output_smem(s);
    with_static_kv(s.K, s.V, [&](auto kv) {
      constexpr int KV = decltype(kv)::value;
      set_smem(bf16k::output<D, KV>, sm3);
      bf16k::output<D, KV><<<dim3(s.NT, BH), kThreads, sm3, stream>>>(s, q, wkey, a.scale, static_cast<E*>(a.o), work);
    });
  } else {
    const int bv3 = a.V % 64 == 0 ? 64 : (a.V % 32 == 0 ? 32 : 16);
    const std::size_t sm3 = output_smem<E>(s, bv3);
    set_smem(output_kernel<E, D>, sm3);
    output_kernel<E, D><<<dim3(s.NT, a.V / bv3, BH), kThreads, sm3, stream>>>(s, bv3, q, wkey, a.scale,
                                                                               static_cast<E*>(a.o), work);
  }
  TTR_CUDA_CHECK_LAUNCH("output_kernel");
}

template <class E, Decay D>
void launch(const DeltaArgs& a) {
  const Shape s = chunk::shape_of(a);
  auto stream = static_cast<cudaStream_t>(a.stream);
  const std::int64_t BH = static_cast<std::int64_t>(a.B) * a.H;
  const std::size_t bytesW = BH * s.Tp * a.K * sizeof(E), bytesU = BH * s.Tp * a.V * sizeof(E);
  const std::size_t bytesG = BH * s.Tp * s.Kg * sizeof(float), bytesH = BH * s.NT * a.K * a.V * sizeof(E);
  unsigned char* ws = nullptr;
  const std::size_t total = 2 * bytesW + 2 * bytesU + bytesG + bytesH + 6 * 256;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), total, stream));
  auto align = [](std::size_t x) { return (x + 255) / 256 * 256; };
  Work work{};
  std::size_t off = 0;
  work.W = ws + off, off += align(bytesW);
  work.WD = ws + off, off += align(bytesW);
  work.U = ws + off, off += align(bytesU);
  work.D = ws + off, off += align(bytesU);
  work.G = reinterpret_cast<float*>(ws + off), off += align(bytesG);
  work.Hs = ws + off;
  // TTR_GPU_STAGE_TIMING=1: per-stage event times on stderr (benchmarking aid).
  StageTimer timer(stream, {"ut_transform", "state_pass", "output"});
  try {
    timer.mark(0);
    stage1<E, D>(a, s, work, stream);
    timer.mark(1);
    stage2<E, D>(a, s, work, stream);
    timer.mark(2);
    stage3<E, D>(a, s, work, stream);
    timer.mark(3);
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
  timer.print();
}

template <class E>
void launch_decay(const DeltaArgs& a) {
  switch (a.decay) {
    case Decay::none: return launch<E, Decay::none>(a);
    case Decay::scalar: return launch<E, Decay::scalar>(a);
    case Decay::per_key: return launch<E, Decay::per_key>(a);
  }
}

// One of the stages for the dtype and decay of `a`.
template <template <class, Decay> class Stage>
void dispatch(const DeltaArgs& a, const Shape& s, const Work& w) {
  auto stream = static_cast<cudaStream_t>(a.stream);
  auto by_decay = [&](auto e) {
    using E = decltype(e);
    switch (a.decay) {
      case Decay::none: return Stage<E, Decay::none>::run(a, s, w, stream);
      case Decay::scalar: return Stage<E, Decay::scalar>::run(a, s, w, stream);
      case Decay::per_key: return Stage<E, Decay::per_key>::run(a, s, w, stream);
    }
  };
  if (a.dtype == DType::bf16) by_decay(__nv_bfloat16{});
  else by_decay(float{});
}
template <class E, Decay D>
struct Stage1 {
  static void run(const DeltaArgs& a, const Shape& s, const Work& w, cudaStream_t st) { stage1<E, D>(a, s, w, st); }
};
template <class E, Decay D>
struct Stage2 {
  static void run(const DeltaArgs& a, const Shape& s, const Work& w, cudaStream_t st) { stage2<E, D>(a, s, w, st); }
};

}  // namespace

void delta_chunk_forward(const DeltaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) launch_decay<__nv_bfloat16>(a);
  else launch_decay<float>(a);
}

namespace chunk {
void launch_ut_transform(const DeltaArgs& a, const Shape& s, const Work& w) { dispatch<Stage1>(a, s, w); }
void launch_state_pass(const DeltaArgs& a, const Shape& s, const Work& w) { dispatch<Stage2>(a, s, w); }
}  // namespace chunk

}  // namespace ttr::gpu
