// Chunkwise forward of Gated KalmaNet on the GPU (GKA §4.2 "Chunk-wise
// Implementation", eq. (5), Alg. 1): the algorithm of reference/gka/chunk.hpp with
// solver = chebyshev, written the way a tensor-core kernel is. Chunks of 64; per
// chunk the chunk-initial states H_0 (K×K), S_0 (K×V), the gates b, ζ, M̃
// (gpu/gka/gates.cuh) and the keys K (rows k_j) give every token's state without
// forming it:
//
//   1. state_pass (grid: 16-column tiles of [H | S] × B·H), sequential over chunks:
//        store narrow(H), narrow(S) (the chunk-initial states as operands);
//        H ← ζ_n H + (K ⊙ M̃_{·,n})ᵀ K,  S ← ζ_n S + (K ⊙ M̃_{·,n})ᵀ V        (state passing)
//      The columns of H and S are independent here, which is what lets the
//      stage split them across blocks.
//   2. solve (grid: chunks × B·H), independent per chunk:
//        ‖H_c‖²_F = ζ_c²‖H_0‖²_F + 2ζ_c Σ_j M̃_{j,c} k_jᵀH_0k_j + colsum(((G⊙G) M̃) ⊙ M̃)_c,  G = K Kᵀ   (eq. (5))
//        λ_c = a‖H_c‖_F (eq. (4)) or the fixed λ;  `iters` Chebyshev steps (Alg. 1) for all
//        64 tokens at once, each with its own L = ‖H_c‖_F + λ_c, μ = λ_c and weights, on
//        H_c ξ_c = rows of diag(ζ) Ξ H_0ᵀ + ((Ξ Kᵀ) ⊙ M̃ᵀ) K             (§4.2)
//        q̃ = scale·q + α (x − scale·q) (α absent: x), stored narrowed.
//   3. readout (grid: chunks × V-tiles × B·H):  O = diag(ζ) Q̃ S_0 + ((Q̃ Kᵀ) ⊙ M̃ᵀ) V.
//
// Narrowing points are the CPU form's (reference/gka/chunk.hpp, docs/arithmetic-
// policies.md): q, k, v as stored; Ξ before each product, the chunk-initial
// states, G⊙G and M̃ in eq. (5), the masked products, Q̃, the decayed keys of the
// state pass, and o; everything else fp32 (tensor cores accumulate in fp32; fp32
// operands go through FMA, never TF32). The solve keeps each thread's share of ξ,
// ξ_{−1} and scale·q in registers for all iterations. In bf16 the iterations
// run on mma.sync fragments with the iterate and the products in registers and
// one barrier per strip and step (solve_bf16.cuh); fp32 runs them by block_gemm
// (FMA), as does bf16 under TTR_GPU_GKA_SOLVE=wmma (WMMA, the kernel before).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/env_switch.hpp"
#include "gpu/core/launch.cuh"
#include "gpu/core/mma.cuh"
#include "gpu/core/mma_sync.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/seqs.cuh"
#include "gpu/core/tile.cuh"
#include "gpu/gka/chebyshev.cuh"
#include "gpu/gka/gates.cuh"

namespace ttr::gpu {
namespace {

using gka::decay_weight;
using gka::kChunk;
using gka::load_chunk_gates;

constexpr int kThreads = 256;
constexpr int kTile = 16;                  // state-pass column tile
constexpr int kPart = kThreads / kChunk;   // solve: threads per token row (4)
constexpr int kMaxPer = 128 / kPart;       // solve: columns per thread at K = 128

// With cu (varlen, gpu/core/seqs.cuh): B sequences, T the longest (NT, Tp size the
// per-sequence workspaces), sequence b the packed tokens [cu[b], cu[b+1]).
struct Shape {
  int B, T, H, K, V, NT, Tp;
  const std::int64_t* cu = nullptr;
  __device__ std::int64_t start(int b) const { return seq_start(cu, b, T); }
  __device__ int len(int b) const { return seq_len(cu, b, T); }
};

struct Work {  // per (b, h) contiguous
  void* Hs;    // E [BH][NT][K][K]  chunk-initial H as an operand
  void* Ss;    // E [BH][NT][K][V]  chunk-initial S as an operand
  void* Qt;    // E [BH][Tp][K]     q̃
};

struct SolveParams {
  float scale, a, lambda;
  bool fixed;
  int iters;
  float omega0;
};

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// ---------------------------------------------------------------- stage 1
template <class E>
__global__ void __launch_bounds__(kThreads) state_pass_kernel(Shape s, const E* __restrict__ k,
                                                               const E* __restrict__ v, const float* __restrict__ g,
                                                               const float* __restrict__ beta,
                                                               const float* __restrict__ hkk0,
                                                               const float* __restrict__ h0, float* hkk, float* ht,
                                                               Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int bh = blockIdx.y, b = bh / s.H, h = bh % s.H, K = s.K;
  const bool of_h = static_cast<int>(blockIdx.x) < K / kTile;  // a column tile of H, else of S
  const int j0 = (of_h ? blockIdx.x : blockIdx.x - K / kTile) * kTile;
  const int W = of_h ? K : s.V;          // the state's width
  const E* right = of_h ? k : v;         // the update's right operand: k or v columns
  const int ldk = padded_ld<E>(K), ldx = padded_ld<E>(kTile), ldf = padded_ld<float>(kTile);
  SmemArena arena{smem};
  float* St = arena.take<float>(K, kTile);
  E* Kw = arena.take<E>(kChunk, K);
  E* Xt = arena.take<E>(kChunk, kTile);
  float* bg = arena.take<float>(1, kChunk);
  float* zeta = arena.take<float>(1, kChunk);
  float* bet = arena.take<float>(1, kChunk);
  float* fw = arena.take<float>(1, kChunk);  // M̃_{j,n}: row j's weight at the chunk end

  const float* init = of_h ? hkk0 : h0;
  float* fin = of_h ? hkk : ht;
  const std::int64_t sbase = static_cast<std::int64_t>(bh) * K * W;
  for (int i = threadIdx.x; i < K * kTile; i += blockDim.x) {
    const int r = i / kTile, cc = i % kTile;
    St[r * ldf + cc] = init ? init[sbase + static_cast<std::int64_t>(r) * W + j0 + cc] : 0.0f;
  }
  E* out = static_cast<E*>(of_h ? work.Hs : work.Ss) + static_cast<std::int64_t>(bh) * s.NT * K * W + j0;
  const int len = s.len(b);  // this sequence's tokens (varlen)
  for (int n = 0; n * kChunk < len; ++n) {
    const int t0 = n * kChunk, c = min(kChunk, len - t0);
    const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
    load_rows(Kw, ldk, k + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
    load_rows(Xt, ldx, right + row0 * W + j0, static_cast<std::int64_t>(s.H) * W, kChunk, c, kTile);
    load_chunk_gates(g, beta, nullptr, row0, s.H, c, bg, zeta, bet, nullptr);  // synchronises
    E* outn = out + static_cast<std::int64_t>(n) * K * W;
    for (int i = threadIdx.x; i < K * kTile; i += blockDim.x) {
      const int r = i / kTile, cc = i % kTile;
      outn[static_cast<std::int64_t>(r) * W + cc] = Elem<E>::from_float(St[r * ldf + cc]);
    }
    if (threadIdx.x < kChunk) fw[threadIdx.x] = decay_weight(bg, bet, threadIdx.x, kChunk - 1);
    __syncthreads();
    // Decayed keys narrow(M̃_{j,n} k_j) (the update's left operand); decay first.
    for (int i = threadIdx.x; i < kChunk * K; i += blockDim.x) {
      const int j = i / K, d = i % K;
      Kw[j * ldk + d] = Elem<E>::from_float(Elem<E>::to_float(Kw[j * ldk + d]) * fw[j]);
    }
    for (int i = threadIdx.x; i < K * kTile; i += blockDim.x) St[(i / kTile) * ldf + i % kTile] *= zeta[kChunk - 1];
    __syncthreads();
    block_gemm<true, false>(St, ldf, Kw, ldk, Xt, ldx, K, kTile, kChunk, true);
    __syncthreads();
  }
  if (fin)
    for (int i = threadIdx.x; i < K * kTile; i += blockDim.x) {
      const int r = i / kTile, cc = i % kTile;
      fin[sbase + static_cast<std::int64_t>(r) * W + j0 + cc] = St[r * ldf + cc];
    }
}

template <class E>
std::size_t state_smem(const Shape& s) {
  return tile_bytes<float>(s.K, kTile) + tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(kChunk, kTile) +
         4 * tile_bytes<float>(1, kChunk);
}

// ---------------------------------------------------------------- stage 2
// Token rows of the chunk are split over kPart threads each: thread (row, part)
// owns columns part, part + kPart, ... of its row in every C×K matrix (no index
// division; consecutive threads touch consecutive banks).
#include "gpu/gka/solve_bf16.cuh"

// kFrag (bf16 only): the Chebyshev iterations on mma.sync fragments
// (solve_bf16.cuh); otherwise block_gemm from shared memory (WMMA for bf16, FMA
// for fp32). The prologue (eq. (5), λ) is the same code in both.
template <class E, bool kFrag>
__global__ void __launch_bounds__(kThreads) solve_kernel(Shape s, SolveParams p, const E* __restrict__ q,
                                                          const E* __restrict__ k, const float* __restrict__ g,
                                                          const float* __restrict__ beta,
                                                          const float* __restrict__ alpha, float* lambda_out,
                                                          float* fro_out, Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0), K = s.K, Kw = max(K, kChunk);
  const int ldh = padded_ld<E>(K), ldx = padded_ld<E>(Kw), ldy = padded_ld<float>(Kw);
  const int ldc = padded_ld<float>(kChunk), lde = padded_ld<E>(kChunk);
  SmemArena arena{smem};
  E* H0 = arena.take<E>(K, K);
  E* Kt = arena.take<E>(kChunk, K);
  E* Xi = arena.take<E>(kChunk, Kw);    // narrowed iterate Ξ (first: narrowed M̃)
  float* Y = arena.take<float>(kChunk, Kw);  // H_c ξ_c rows (first: K H_0ᵀ, then (G⊙G) M̃)
  float* Cf = arena.take<float>(kChunk, kChunk);
  E* Ce = arena.take<E>(kChunk, kChunk);
  float* MtT = arena.take<float>(kChunk, kChunk);  // MtT[c][j] = M̃_{j,c}: row c reads contiguously
  float* bg = arena.take<float>(1, kChunk);
  float* zeta = arena.take<float>(1, kChunk);
  float* bet = arena.take<float>(1, kChunk);
  float* alp = arena.take<float>(1, kChunk);
  float* lam = arena.take<float>(1, kChunk);
  float* rho2 = arena.take<float>(1, kChunk);
  float* lpm = arena.take<float>(1, kChunk);    // L + μ
  float* omega = arena.take<float>(1, kChunk);
  float* civ = arena.take<float>(1, kChunk);    // this step's 2ω/(L + μ)
  float* quad = arena.take<float>(1, kChunk);
  float* red = arena.take<float>(1, kChunk);
  E* Qs = nullptr;   // fragment path: the chunk's narrowed q (q̂ = scale·q re-read each step)
  E* Xi1 = nullptr;  // fragment path: Ξ's second buffer
  if constexpr (kFrag) {
    Qs = arena.take<E>(kChunk, K);
    Xi1 = arena.take<E>(kChunk, Kw);
  }

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  load_rows(H0, ldh, static_cast<const E*>(work.Hs) + (static_cast<std::int64_t>(bh) * s.NT + n) * K * K, K, K, K,
            K);
  load_rows(Kt, ldh, k + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  if constexpr (kFrag) load_rows(Qs, ldh, q + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_chunk_gates(g, beta, alpha, row0, s.H, c, bg, zeta, bet, alp);  // synchronises
  for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
    const int cc = i / kChunk, j = i % kChunk;
    MtT[cc * ldc + j] = decay_weight(bg, bet, j, cc);
  }
  // ‖H_c‖_F by eq. (5). Rows of K H_0ᵀ are (H_0 k_j)ᵀ; G = K Kᵀ.
  block_gemm<false, true>(Y, ldy, Kt, ldh, H0, ldh, kChunk, K, K, false);
  block_gemm<false, true>(Cf, ldc, Kt, ldh, Kt, ldh, kChunk, kChunk, K, false);
  {  // ‖H_0‖²_F of the narrowed state: per thread, per warp, then warps in a fixed order
    float part = 0.0f;
    for (int i = threadIdx.x; i < K * K; i += blockDim.x) {
      const float x = Elem<E>::to_float(H0[(i / K) * ldh + i % K]);
      part = fmaf(x, x, part);
    }
    part = warp_sum(part);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = part;
  }
  __syncthreads();
  const int row = threadIdx.x / kPart, part = threadIdx.x % kPart;
  {  // k_jᵀ H_0 k_j
    float qd = 0.0f;
#pragma unroll
    for (int m = 0; m < kMaxPer; ++m) {
      const int i = part + kPart * m;
      if (i < K) qd = fmaf(Y[row * ldy + i], Elem<E>::to_float(Kt[row * ldh + i]), qd);
    }
    qd += __shfl_xor_sync(0xffffffffu, qd, 1);
    qd += __shfl_xor_sync(0xffffffffu, qd, 2);
    if (part == 0) quad[row] = qd;
  }
  // G⊙G and M̃ narrowed: the operands of (G⊙G) M̃ (M̃ in Ξ's space, unused yet).
  for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
    const int r = i / kChunk, j = i % kChunk;
    const float x = Cf[r * ldc + j];
    Ce[r * lde + j] = Elem<E>::from_float(x * x);
    Xi[r * ldx + j] = Elem<E>::from_float(MtT[j * ldc + r]);  // M̃_{r,j}
  }
  __syncthreads();
  block_gemm<false, false>(Y, ldy, Ce, lde, Xi, ldx, kChunk, kChunk, kChunk, false);
  __syncthreads();
  if (threadIdx.x < kChunk) {
    const int cc = threadIdx.x;
    float h0sq = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) h0sq += red[w];
    float cross = 0.0f, intra = 0.0f;
    for (int j = 0; j <= cc; ++j) {  // M̃_{j,c} = 0 for j > c
      cross = fmaf(MtT[cc * ldc + j], quad[j], cross);
      intra = fmaf(Y[j * ldy + cc], MtT[cc * ldc + j], intra);
    }
    const float z = zeta[cc];
    // A squared norm: only rounding (or a non-PSD hkk0, in the cross term) takes it below 0.
    const float sq = fmaxf(z * z * h0sq + 2.0f * z * cross + intra, 0.0f);
    const float fro = sqrtf(sq), l = p.fixed ? p.lambda : p.a * fro;
    lam[cc] = l;
    const float L = fro + l, mu = l;
    lpm[cc] = L + mu;
    const float rho = (L - mu) / (L + mu);
    rho2[cc] = rho * rho;
    omega[cc] = p.omega0;
    if (cc < c) {
      if (lambda_out) lambda_out[row0 + static_cast<std::int64_t>(cc) * s.H] = l;
      if (fro_out) fro_out[row0 + static_cast<std::int64_t>(cc) * s.H] = fro;
    }
  }
  __syncthreads();
  if constexpr (kFrag) {
    const frag::SolveTiles tiles{H0, Kt, Qs, Xi, Xi1, MtT, zeta, lam, lpm, rho2, alp, ldh, ldx, ldc};
    frag::chebyshev(p, tiles, K, c, alpha != nullptr,
                    static_cast<E*>(work.Qt) + (static_cast<std::int64_t>(bh) * s.Tp + t0) * K);
    return;
  }
  // Alg. 1: ξ_{−1} = 0, ξ_0 = 2 scale·q/(L + μ); λ_c = 0 (H_c = 0): x_c = 0.
  const bool live = lam[row] != 0.0f;
  float x[kMaxPer], xp[kMaxPer], sq[kMaxPer];
  {
    const float c0 = live ? __fdiv_rn(2.0f, lpm[row]) : 0.0f;
    const E* qrow = q + (row0 + static_cast<std::int64_t>(row) * s.H) * K;
#pragma unroll
    for (int m = 0; m < kMaxPer; ++m) {
      const int i = part + kPart * m;
      sq[m] = (i < K && row < c) ? __fmul_rn(p.scale, Elem<E>::to_float(qrow[i])) : 0.0f;
      x[m] = __fmul_rn(c0, sq[m]);
      xp[m] = 0.0f;
      if (i < K) Xi[row * ldx + i] = Elem<E>::from_float(x[m]);
    }
  }
  __syncthreads();
  for (int it = 1; it <= p.iters; ++it) {
    block_gemm<false, true>(Y, ldy, Xi, ldx, H0, ldh, kChunk, K, K, false);        // rows (H_0 ξ_c)ᵀ
    block_gemm<false, true>(Cf, ldc, Xi, ldx, Kt, ldh, kChunk, kChunk, K, false);  // Ξ Kᵀ
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kMaxPer; ++m) {
      const int i = part + kPart * m;
      if (i < K) Y[row * ldy + i] = __fmul_rn(Y[row * ldy + i], zeta[row]);
    }
    for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
      const int r = i / kChunk, j = i % kChunk;
      Ce[r * lde + j] = Elem<E>::from_float(j <= r ? __fmul_rn(Cf[r * ldc + j], MtT[r * ldc + j]) : 0.0f);
    }
    if (threadIdx.x < kChunk && lam[threadIdx.x] != 0.0f) {  // the weight schedule ω_i = 4/(4 − ρ²ω_{i−1})
      const int cc = threadIdx.x;
      const float w = gka::chebyshev_weight(rho2[cc], omega[cc]);
      omega[cc] = w;
      civ[cc] = gka::chebyshev_step_size(w, lpm[cc]);
    }
    __syncthreads();
    block_gemm<false, false>(Y, ldy, Ce, lde, Kt, ldh, kChunk, K, kChunk, true);  // + ((Ξ Kᵀ) ⊙ M̃ᵀ) K
    __syncthreads();
    if (live) {
      const float w = omega[row], ci = civ[row], l = lam[row];
#pragma unroll
      for (int m = 0; m < kMaxPer; ++m) {
        const int i = part + kPart * m;
        if (i < K) {
          const float nx = gka::chebyshev_step(x[m], xp[m], Y[row * ldy + i], l, ci, w, sq[m]);  // step + momentum
          xp[m] = x[m];
          x[m] = nx;
          Xi[row * ldx + i] = Elem<E>::from_float(nx);
        }
      }
    }
    __syncthreads();
  }
  // q̃ = scale·q + α (x − scale·q), narrowed: the readout's operand.
  if (row < c) {
    E* qt = static_cast<E*>(work.Qt) + (static_cast<std::int64_t>(bh) * s.Tp + t0 + row) * K;
    const float a = alp[row];
#pragma unroll
    for (int m = 0; m < kMaxPer; ++m) {
      const int i = part + kPart * m;
      if (i < K) qt[i] = Elem<E>::from_float(alpha ? __fmaf_rn(a, __fsub_rn(x[m], sq[m]), sq[m]) : x[m]);
    }
  }
}

template <class E>
std::size_t solve_smem(const Shape& s, bool frag) {
  const int Kw = std::max(s.K, kChunk);
  return tile_bytes<E>(s.K, s.K) + tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(kChunk, Kw) +
         tile_bytes<float>(kChunk, Kw) + 2 * tile_bytes<float>(kChunk, kChunk) + tile_bytes<E>(kChunk, kChunk) +
         11 * tile_bytes<float>(1, kChunk) + (frag ? tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(kChunk, Kw) : 0);
}

// TTR_GPU_GKA_SOLVE=wmma: the bf16 solve's iterations by block_gemm (WMMA from
// shared memory, four barriers per step), the kernel before the fragment path:
// a benchmarking aid, read at every launch (the GPU test compares both paths).
inline bool wmma_solve_requested() {
  return env_switch("TTR_GPU_GKA_SOLVE", {"wmma"}, "wmma (unset: the mma.sync fragment solve)") == "wmma";
}

template <class E, bool kFrag>
void launch_solve(const Shape& s, const SolveParams& p, const GkaArgs& a, const E* q, const E* k, const Work& work,
                  cudaStream_t stream) {
  const std::size_t sm = solve_smem<E>(s, kFrag);
  allow_smem(solve_kernel<E, kFrag>, sm, "gpu gka solve");
  solve_kernel<E, kFrag><<<dim3(s.NT, static_cast<unsigned>(a.B) * a.H), kThreads, sm, stream>>>(
      s, p, q, k, a.g, a.beta, a.alpha, a.lambda, a.fro, work);
  TTR_CUDA_CHECK_LAUNCH("gka solve_kernel");
}

// ---------------------------------------------------------------- stage 3
template <class E>
__global__ void __launch_bounds__(kThreads) readout_kernel(Shape s, int bv, const E* __restrict__ k,
                                                            const E* __restrict__ v, const float* __restrict__ g,
                                                            const float* __restrict__ beta, E* __restrict__ o,
                                                            Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int n = blockIdx.x, j0 = blockIdx.y * bv, bh = blockIdx.z, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0), K = s.K, V = s.V;
  const int ldk = padded_ld<E>(K), ldb = padded_ld<E>(bv), ldf = padded_ld<float>(bv);
  const int ldc = padded_ld<E>(kChunk), lds = padded_ld<float>(kChunk);
  SmemArena arena{smem};
  E* Qt = arena.take<E>(kChunk, K);
  E* Kt = arena.take<E>(kChunk, K);
  E* S0 = arena.take<E>(K, bv);
  E* Vt = arena.take<E>(kChunk, bv);
  E* Sc = arena.take<E>(kChunk, kChunk);
  float* Sf = arena.take<float>(kChunk, kChunk);
  float* Of = arena.take<float>(kChunk, bv);
  float* bg = arena.take<float>(1, kChunk);
  float* zeta = arena.take<float>(1, kChunk);
  float* bet = arena.take<float>(1, kChunk);

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  load_rows(Qt, ldk, static_cast<const E*>(work.Qt) + (static_cast<std::int64_t>(bh) * s.Tp + t0) * K, K, kChunk, c,
            K);
  load_rows(Kt, ldk, k + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows(S0, ldb, static_cast<const E*>(work.Ss) + (static_cast<std::int64_t>(bh) * s.NT + n) * K * V + j0, V, K,
            K, bv);
  load_rows(Vt, ldb, v + row0 * V + j0, static_cast<std::int64_t>(s.H) * V, kChunk, c, bv);
  load_chunk_gates(g, beta, nullptr, row0, s.H, c, bg, zeta, bet, nullptr);  // synchronises
  block_gemm<false, false>(Of, ldf, Qt, ldk, S0, ldb, kChunk, bv, K, false);
  block_gemm<false, true>(Sf, lds, Qt, ldk, Kt, ldk, kChunk, kChunk, K, false);
  __syncthreads();
  for (int i = threadIdx.x; i < kChunk * bv; i += blockDim.x) Of[(i / bv) * ldf + i % bv] *= zeta[i / bv];
  for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
    const int r = i / kChunk, j = i % kChunk;
    Sc[r * ldc + j] = Elem<E>::from_float(j <= r ? Sf[r * lds + j] * decay_weight(bg, bet, j, r) : 0.0f);
  }
  __syncthreads();
  block_gemm<false, false>(Of, ldf, Sc, ldc, Vt, ldb, kChunk, bv, kChunk, true);
  __syncthreads();
  for (int i = threadIdx.x; i < c * bv; i += blockDim.x) {
    const int t = i / bv, cc = i % bv;
    o[(row0 + static_cast<std::int64_t>(t) * s.H) * V + j0 + cc] = Elem<E>::from_float(Of[t * ldf + cc]);
  }
}

template <class E>
std::size_t readout_smem(const Shape& s, int bv) {
  return 2 * tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(s.K, bv) + tile_bytes<E>(kChunk, bv) +
         tile_bytes<E>(kChunk, kChunk) + tile_bytes<float>(kChunk, kChunk) + tile_bytes<float>(kChunk, bv) +
         3 * tile_bytes<float>(1, kChunk);
}

// ---------------------------------------------------------------- host side
template <class E>
void launch(const GkaArgs& a) {
  const bool wmma_solve = wmma_solve_requested();  // refused before anything is allocated, in either dtype
  Shape s{a.B, a.T, a.H, a.K, a.V, (a.T + kChunk - 1) / kChunk, 0, a.cu_seqlens};
  s.Tp = s.NT * kChunk;
  auto stream = static_cast<cudaStream_t>(a.stream);
  const std::size_t BH = static_cast<std::size_t>(a.B) * a.H;
  const std::size_t bytesH = BH * s.NT * a.K * a.K * sizeof(E), bytesS = BH * s.NT * a.K * a.V * sizeof(E);
  const std::size_t bytesQ = BH * s.Tp * a.K * sizeof(E);
  auto align = [](std::size_t x) { return (x + 255) / 256 * 256; };
  unsigned char* ws = nullptr;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), align(bytesH) + align(bytesS) + bytesQ, stream));
  const Work work{ws, ws + align(bytesH), ws + align(bytesH) + align(bytesS)};
  const SolveParams p{a.scale, a.a, a.lambda_value, a.fixed_lambda, a.iters, a.omega0};
  const E* q = static_cast<const E*>(a.q);
  const E* k = static_cast<const E*>(a.k);
  const E* v = static_cast<const E*>(a.v);
  StageTimer timer(stream, {"state_pass", "solve", "readout"});
  try {
    timer.mark(0);
    const std::size_t sm1 = state_smem<E>(s);
    allow_smem(state_pass_kernel<E>, sm1, "gpu gka state pass");
    state_pass_kernel<E><<<dim3((a.K + a.V) / kTile, static_cast<unsigned>(BH)), kThreads, sm1, stream>>>(
        s, k, v, a.g, a.beta, a.hkk0, a.h0, a.hkk, a.ht, work);
    TTR_CUDA_CHECK_LAUNCH("gka state_pass_kernel");
    timer.mark(1);
    if constexpr (std::is_same_v<E, __nv_bfloat16>) {
      if (wmma_solve) launch_solve<E, false>(s, p, a, q, k, work, stream);
      else launch_solve<E, true>(s, p, a, q, k, work, stream);
    } else {
      launch_solve<E, false>(s, p, a, q, k, work, stream);
    }
    timer.mark(2);
    const int bv = a.V % 64 == 0 ? 64 : (a.V % 32 == 0 ? 32 : 16);
    const std::size_t sm3 = readout_smem<E>(s, bv);
    allow_smem(readout_kernel<E>, sm3, "gpu gka readout");
    readout_kernel<E><<<dim3(s.NT, a.V / bv, static_cast<unsigned>(BH)), kThreads, sm3, stream>>>(
        s, bv, k, v, a.g, a.beta, static_cast<E*>(a.o), work);
    TTR_CUDA_CHECK_LAUNCH("gka readout_kernel");
    timer.mark(3);
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
  timer.print();
}

}  // namespace

void gka_chunk_forward(const GkaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) launch<__nv_bfloat16>(a);
  else launch<float>(a);
}

}  // namespace ttr::gpu
