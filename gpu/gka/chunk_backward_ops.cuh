// The pieces of GKA's chunk backward kernel (gpu/gka/chunk_backward.cu): a chunk's
// workspace, its per-token scalars, block-wide products and reductions in a fixed
// order, and the batched operations of reference/gka/chunk_backward_parts.hpp on
// the device — A_c W and A_cᵀ W for all tokens (GKA §4.2), the adjoint of the
// states' dependence on (H_0, k, ζ, M̃) for rank-one cotangents, and Alg. 1 for all
// tokens at once. Operands are narrowed to the dtype E where the CPU form narrows
// them; every product accumulates in fp32 on FMA.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpu/core/numeric.cuh"

namespace ttr::gpu::gka_chunk_ops {

constexpr int kThreads = 256, kWarps = kThreads / 32, kC = 64;
constexpr int kTile = 64, kTileK = 16;  // gemm: 64×64 output tiles, 16-deep operand tiles


// A block's workspace for one chunk (fp32, row-major; n×· matrices have kC rows),
// and where the chunk's own results go (set per chunk: the per-chunk outputs that
// the carry and finishing launches read).
struct Scratch {
  float *H0, *S0;  // K×K, K×V: the chunk-initial states as read (narrowed)
  float *Kc, *Sq, *X, *Xp, *Qt, *dQt, *dX, *dSq, *xi, *xim1, *xim2, *ax, *dxi, *dxn, *dxp, *atd, *u, *adj, *t1, *t2,
      *t3;                          // kC×K
  float *Vc, *dO, *tv;              // kC×V
  float *Mt, *G, *GGM, *cc, *cc2;   // kC×kC
  float* sched;                     // kC×(r + 1): ω_0..ω_r per token
  float *gH, *gS, *gK, *gV, *gMt;   // ∂L/∂ of H_0, S_0, k, v, M̃: the chunk's outputs (ChunkOut)
  __host__ __device__ static std::size_t floats(int K, int V, int r) {
    return std::size_t(K) * K + std::size_t(K) * V + 21 * std::size_t(kC) * K + 3 * std::size_t(kC) * V +
           5 * kC * kC + kC * (r + 1);
  }
  __device__ Scratch(float* p, int K, int V) {
    auto take = [&p](std::size_t n) { float* q = p; p += n; return q; };
    const std::size_t CK = std::size_t(kC) * K, CV = std::size_t(kC) * V, CC = kC * kC;
    H0 = take(std::size_t(K) * K), S0 = take(std::size_t(K) * V);
    float** ck[] = {&Kc, &Sq, &X, &Xp, &Qt, &dQt, &dX, &dSq, &xi, &xim1, &xim2,
                    &ax, &dxi, &dxn, &dxp, &atd, &u, &adj, &t1, &t2, &t3};
    for (float** m : ck) *m = take(CK);
    float** cv[] = {&Vc, &dO, &tv};
    for (float** m : cv) *m = take(CV);
    float** cc_[] = {&Mt, &G, &GGM, &cc, &cc2};
    for (float** m : cc_) *m = take(CC);
    sched = p;
    gH = gS = gK = gV = gMt = nullptr;
  }
};

// One chunk's results that outlive its adjoint launch: ∂L/∂ of (H_0, S_0) from the
// chunk's own terms (K×K then K×V; the carry launch replaces them by the chunk's
// dH_end, dS_end), of k, v, M̃ and ζ, and ζ_{n−1} (the chunk's whole decay).
struct ChunkOut {
  float *gHS, *gK, *gV, *gMt, *dzeta, *zl;
  __host__ __device__ static std::size_t floats(int K, int V) {
    return std::size_t(K) * (K + V) + std::size_t(kC) * (K + V) + kC * kC + kC + 8;
  }
  __device__ ChunkOut(float* p, int K, int V) {
    gHS = p, p += std::size_t(K) * (K + V);
    gK = p, p += std::size_t(kC) * K;
    gV = p, p += std::size_t(kC) * V;
    gMt = p, p += kC * kC;
    dzeta = p, p += kC;
    zl = p;
  }
};

// The chunk's per-token scalars (shared memory).
struct Tokens {
  float g[kC], beta[kC], alpha[kC], b[kC], zeta[kC], fro[kC], lam[kC], quad[kC], dquad[kC];
  float rho2[kC], lpm[kC], om[kC], step[kC];  // Alg. 1: ρ², L + μ, ω, c_i
  float dlam[kC], dfro[kC], dzeta[kC], dalpha[kC], domega[kC], ds[kC], drho2[kC], db[kC], dbeta[kC], dg[kC];
  int degen[kC];  // λ_c = 0: x_c = 0, no gradient through the solve
  float red[kWarps];
  float tile_a[kTileK * kTile], tile_b[kTileK * kTile];  // gemm's operand tiles
  int naive;  // gemm by the one-thread-per-element loop (TTR_GPU_GKA_BACKWARD_GEMM=naive)
};

// C(i, j) for i < m, j < n: store(i, j, Σ_{p<kd} A(i, p) B(p, j)), the sum taken by one
// thread as fmaf(A(i, p), B(p, j), acc) for p = 0, 1, … in order, so both paths below give
// the same bits: 64×64 output tiles, each thread 4×4 of them, from 16-deep tiles of A
// and B staged in shared memory; or (tk.naive) a thread per element reading A and B
// directly, the check of the first. A barrier after.
template <class FA, class FB, class FS>
__device__ __forceinline__ void gemm(Tokens& tk, int m, int n, int kd, FA A, FB B, FS store) {
  if (tk.naive) {
    for (int e = threadIdx.x; e < m * n; e += kThreads) {
      const int i = e / n, j = e % n;
      float acc = 0.0f;
      for (int p = 0; p < kd; ++p) acc = fmaf(A(i, p), B(p, j), acc);
      store(i, j, acc);
    }
    __syncthreads();
    return;
  }
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;  // rows ty + 16a, columns tx + 16b of the tile
  float* As = tk.tile_a;  // [p][row]
  float* Bs = tk.tile_b;  // [p][column]
  for (int i0 = 0; i0 < m; i0 += kTile)
    for (int j0 = 0; j0 < n; j0 += kTile) {
      float acc[4][4] = {};
      for (int p0 = 0; p0 < kd; p0 += kTileK) {
        const int pe = min(kTileK, kd - p0);
        for (int e = threadIdx.x; e < kTileK * kTile; e += kThreads) {
          const int pp = e / kTile, x = e % kTile;
          As[e] = pp < pe && i0 + x < m ? A(i0 + x, p0 + pp) : 0.0f;
          Bs[e] = pp < pe && j0 + x < n ? B(p0 + pp, j0 + x) : 0.0f;
        }
        __syncthreads();
        for (int pp = 0; pp < pe; ++pp) {
          float a[4], b[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            a[u] = As[pp * kTile + ty + 16 * u];
            b[u] = Bs[pp * kTile + tx + 16 * u];
          }
#pragma unroll
          for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int w = 0; w < 4; ++w) acc[u][w] = fmaf(a[u], b[w], acc[u][w]);
        }
        __syncthreads();  // the tiles are rewritten next
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const int i = i0 + ty + 16 * u, j = j0 + tx + 16 * w;
          if (i < m && j < n) store(i, j, acc[u][w]);
        }
    }
  __syncthreads();
}

// put(c, Σ_{i<len} f(c, i)) for rows c < n: a warp per row, lanes then a butterfly.
template <class F, class Put>
__device__ __forceinline__ void row_sums(int n, int len, F f, Put put) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int c = warp; c < n; c += kWarps) {
    float s = 0.0f;
    for (int i = lane; i < len; i += 32) s += f(c, i);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) put(c, s);
  }
  __syncthreads();
}

// The block's sum of one value per thread, returned to every thread (fixed order).
__device__ inline float block_sum(float x, float* red) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < kWarps; ++w) s += red[w];
  return s;
}

template <class E>
struct Chunk {
  float omega0;
  Scratch& s;
  Tokens& tk;
  int n, K, V;

  __device__ static float nr(float x) { return narrow<E>(x); }

  // Y (n×K) = A_c W for the state X_0 (K×D) with keys R (n×D) and operands W (n×D):
  // rows diag(ζ) W X_0ᵀ + ((W Rᵀ) ⊙ M̃ᵀ) K [+ diag(λ) W] (gka_state_apply / gka_chunk_matvec).
  // `transposed`: X_0ᵀ for X_0 (A_cᵀ; D = K). `narrow`: W and the masked product as
  // 16-bit operands (the forward's), else fp32 (the reversed pass's).
  __device__ void apply(const float* X0, bool transposed, const float* R, int D, const float* W, bool narrow,
                        bool ridge, float* Y) {
    const int nn = n;
    float* cc = s.cc;
    const float* Mt = s.Mt;
    const float* zeta = tk.zeta;
    gemm(
        tk, nn, nn, D, [=](int c, int q) { return narrow ? nr(W[c * D + q]) : W[c * D + q]; },
        [=](int q, int j) { return R[j * D + q]; },
        [=](int c, int j, float v) { cc[c * kC + j] = j <= c ? v * Mt[j * kC + c] : 0.0f; });
    const int KK = K;
    gemm(
        tk, nn, KK, D, [=](int c, int q) { return narrow ? nr(W[c * D + q]) : W[c * D + q]; },
        [=](int q, int i) { return transposed ? X0[q * KK + i] : X0[i * D + q]; },
        [=](int c, int i, float v) { Y[c * KK + i] = zeta[c] * v; });
    const float* Kc = s.Kc;
    const float* lam = tk.lam;
    gemm(
        tk, nn, KK, nn, [=](int c, int j) { return narrow ? nr(cc[c * kC + j]) : cc[c * kC + j]; },
        [=](int j, int i) { return Kc[j * KK + i]; },
        [=](int c, int i, float v) {
          const float y = Y[c * KK + i] + v;
          Y[c * KK + i] = ridge ? fmaf(lam[c], W[c * D + i], y) : y;
        });
  }

  // The adjoint of X_c = ζ_c X_0 + Σ_j M̃_{j,c} k_j r_jᵀ for the rank-one cotangents
  // ∂L/∂X_c += u_c w_cᵀ, all tokens at once (gka_state_outer_backward):
  //   dX_0 += (diag(ζ) U)ᵀ W, dζ_c += u_cᵀ X_0 w_c, dk += ((W Rᵀ) ⊙ M̃ᵀ)ᵀ U,
  //   dr += ((U Kᵀ) ⊙ M̃ᵀ)ᵀ W, dM̃_{j,c} += (u_c·k_j)(w_c·r_j). Operands narrowed.
  __device__ void outer_backward(const float* X0, const float* R, int D, const float* U, const float* W, float* dX0,
                                 float* dR) {
    const int nn = n, KK = K;
    float* t = s.t3;
    gemm(
        tk, nn, KK, D, [=](int c, int q) { return nr(W[c * D + q]); }, [=](int q, int i) { return X0[i * D + q]; },
        [=](int c, int i, float v) { t[c * KK + i] = v; });
    float* dzeta = tk.dzeta;
    row_sums(
        nn, KK, [=](int c, int i) { return U[c * KK + i] * t[c * KK + i]; },
        [=](int c, float v) { dzeta[c] += v; });
    const float* zeta = tk.zeta;
    gemm(
        tk, KK, D, nn, [=](int q, int c) { return nr(zeta[c] * U[c * KK + q]); },
        [=](int c, int q) { return nr(W[c * D + q]); }, [=](int i, int q, float v) { dX0[i * D + q] += v; });
    float* cc = s.cc;
    float* cc2 = s.cc2;
    const float* Kc = s.Kc;
    gemm(
        tk, nn, nn, KK, [=](int c, int q) { return nr(U[c * KK + q]); }, [=](int q, int j) { return Kc[j * KK + q]; },
        [=](int c, int j, float v) { cc[c * kC + j] = v; });
    gemm(
        tk, nn, nn, D, [=](int c, int q) { return nr(W[c * D + q]); }, [=](int q, int j) { return R[j * D + q]; },
        [=](int c, int j, float v) { cc2[c * kC + j] = v; });
    float* gMt = s.gMt;
    const float* Mt = s.Mt;
    for (int e = threadIdx.x; e < nn * nn; e += kThreads) {
      const int c = e / nn, j = e % nn;
      if (j <= c) {
        gMt[j * kC + c] = fmaf(cc[c * kC + j], cc2[c * kC + j], gMt[j * kC + c]);
        cc[c * kC + j] *= Mt[j * kC + c];
        cc2[c * kC + j] *= Mt[j * kC + c];
      } else {
        cc[c * kC + j] = 0.0f;
        cc2[c * kC + j] = 0.0f;
      }
    }
    __syncthreads();
    float* gK = s.gK;
    gemm(
        tk, nn, KK, nn, [=](int j, int c) { return nr(cc2[c * kC + j]); }, [=](int c, int i) { return nr(U[c * KK + i]); },
        [=](int j, int i, float v) { gK[j * KK + i] += v; });
    gemm(
        tk, nn, D, nn, [=](int j, int c) { return nr(cc[c * kC + j]); }, [=](int c, int i) { return nr(W[c * D + i]); },
        [=](int j, int i, float v) { dR[j * D + i] += v; });
  }

  // GKA Alg. 1 for every token at once on A_c (A_cᵀ: `transposed`), right-hand sides
  // R, `iters` steps (gka_chunk_chebyshev): on return *x = ξ_r, *xp = ξ_{r−1}; the
  // buffers are swapped as the iteration goes.
  __device__ void chebyshev(bool transposed, const float* R, int iters, float*& x, float*& xp) {
    const int nn = n, KK = K;
    if (threadIdx.x < nn) {
      const int c = threadIdx.x;
      tk.om[c] = omega0;
      const float L = tk.fro[c] + tk.lam[c], mu = tk.lam[c], lpm = L + mu, rho = (L - mu) / lpm;
      tk.rho2[c] = tk.degen[c] ? 0.0f : rho * rho;
      tk.lpm[c] = lpm;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < nn * KK; e += kThreads) {
      const int c = e / KK;
      x[e] = tk.degen[c] ? 0.0f : (2.0f / tk.lpm[c]) * R[e];  // ξ_0 = 2q/(L + μ)
      xp[e] = 0.0f;                                          // ξ_{−1}
    }
    __syncthreads();
    for (int it = 1; it <= iters; ++it) {
      apply(s.H0, transposed, s.Kc, KK, x, true, false, s.ax);
      if (threadIdx.x < nn) {
        const int c = threadIdx.x;
        const float w = 4.0f / (4.0f - tk.rho2[c] * tk.om[c]);  // ω_i = 4/(4 − ρ²ω_{i−1})
        tk.om[c] = w;
        tk.step[c] = 2.0f * w / tk.lpm[c];
      }
      __syncthreads();
      for (int e = threadIdx.x; e < nn * KK; e += kThreads) {
        const int c = e / KK;
        if (tk.degen[c]) continue;
        const float ax = fmaf(tk.lam[c], x[e], s.ax[e]);
        xp[e] = x[e] - tk.step[c] * (ax - R[e]) + (tk.om[c] - 1.0f) * (x[e] - xp[e]);  // over ξ_{i−2}
      }
      __syncthreads();
      float* t = x;
      x = xp;
      xp = t;
    }
  }
};

}  // namespace ttr::gpu::gka_chunk_ops
