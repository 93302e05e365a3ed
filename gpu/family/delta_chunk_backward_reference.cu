// The first chunk backward of the delta family, kept as the GPU's plain
// reference of the fast one (gpu/family/delta_chunk_backward.cu) and as its
// "before" in bench/gpu/gdn_backward_bench.cu: one block per (batch, head),
// sequential over the chunks, every product a block-wide fp32 FMA loop over a
// per-block workspace in device memory (1.3 MB per head at K = V = 128), no
// tensor cores: 360 ms against the staged kernel's 1.5 ms (bf16, B = 4, T = 4096,
// H = 8, K = V = 128; docs/gpu-delta-backward-speed-history.md). Not registered with the gate (its layers'
// `chunk` backward kernel is the staged one).
//
// The algorithm of reference/family/delta_chunk_backward.hpp (FLA's
// chunk_gated_delta_rule_bwd: recompute A, T = (I + A)⁻¹, W, U, Δ per chunk; the
// backward state pass for dS (FLA's dh) and dΔ (dv2); the output's reads for dq
// and the write keys; dWy = −dΔ S_0ᵀ (dw) and the UT backward dA = −Tᵀ dT Tᵀ
// (prepare_wy_repr_bwd) to dk and dβ; dg as the chunk-local reverse cumulative
// sum), with the CPU form's narrowing points (docs/arithmetic-policies.md, "Delta
// family chunk backward"): every stored operand rounded to the dtype (`narrow<E>`),
// products of rounded operands accumulated in fp32, the running dS, dA, the gate
// gradients, dg and dh0 in fp32.
//
// Launches: `chunk_backward` (grid B·H: a forward pass over the chunks storing
// each chunk-initial state in fp32, stepped by the chunk form's own update, then
// the backward pass last chunk first), then `finish` (delta_backward_finish.cuh).
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/family/delta_backward_finish.cuh"

namespace ttr::gpu {
namespace {

constexpr int kC = 64, kThreads = 256;

// A block-wide product C (+)= alpha · op(A) op(B), m×n, depth k, fp32 FMA in p
// order; row-major with leading dimensions. Ends with a barrier.
template <bool TA, bool TB>
__device__ void gemm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int m, int n, int k,
                     float alpha, bool accumulate) {
  for (int e = threadIdx.x; e < m * n; e += blockDim.x) {
    const int i = e / n, j = e % n;
    float s = 0.0f;
    for (int p = 0; p < k; ++p) {
      const float a = TA ? A[p * lda + i] : A[i * lda + p];
      const float b = TB ? B[j * ldb + p] : B[p * ldb + j];
      s = fmaf(a, b, s);
    }
    s *= alpha;
    C[i * ldc + j] = accumulate ? C[i * ldc + j] + s : s;
  }
  __syncthreads();
}

template <class E>
__device__ void narrow_all(float* x, int n) {
  for (int e = threadIdx.x; e < n; e += blockDim.x) x[e] = narrow<E>(x[e]);
  __syncthreads();
}

// The per-block workspace (fp32), sized for c = 64, K, V.
struct Scratch {
  float *q, *k, *w, *v, *b, *beta, *G, *T, *kd, *bk, *bv, *wy, *u, *s0, *delta, *qd, *scores, *wd;
  float *dO, *dse, *ddelta, *dq, *dk, *dw, *dv, *db, *dbeta, *dqd, *dscores, *dwd, *dwy, *dt, *dbk, *dbv, *da,
      *tmpc, *tmpKV, *S, *rowsum, *rowsum2;
};

__host__ __device__ inline std::size_t scratch_floats(int K, int V) {
  const std::size_t cK = kC * K, cV = kC * V, cc = kC * kC, KV = static_cast<std::size_t>(K) * V;
  return 15 * cK + 8 * cV + 8 * cc + 4 * KV + 2 * kC * K + 4 * kC * K + 2 * kC;
}

__device__ inline Scratch carve(float* p, int K, int V) {
  const std::size_t cK = kC * K, cV = kC * V, cc = kC * kC, KV = static_cast<std::size_t>(K) * V;
  Scratch s;
  auto take = [&](std::size_t n) { float* r = p; p += n; return r; };
  s.q = take(cK), s.k = take(cK), s.w = take(cK), s.kd = take(cK), s.bk = take(cK), s.wy = take(cK);
  s.qd = take(cK), s.wd = take(cK), s.dq = take(cK), s.dk = take(cK), s.dw = take(cK), s.dqd = take(cK);
  s.dwd = take(cK), s.dwy = take(cK), s.dbk = take(cK);
  s.v = take(cV), s.bv = take(cV), s.u = take(cV), s.delta = take(cV), s.dO = take(cV), s.ddelta = take(cV);
  s.dv = take(cV), s.dbv = take(cV);
  s.G = take(cc), s.T = take(cc), s.scores = take(cc), s.dscores = take(cc), s.dt = take(cc), s.da = take(cc);
  s.tmpc = take(cc), s.rowsum = take(cc);
  s.s0 = take(KV), s.dse = take(KV), s.tmpKV = take(KV), s.S = take(KV);
  s.b = take(kC * K), s.db = take(kC * K);
  s.rowsum2 = take(4 * kC * K);
  s.beta = take(kC), s.dbeta = take(kC);
  return s;
}

template <Decay D>
__device__ inline float decay_between(const float* b, int Kg, int t, int s, int d) {
  if constexpr (D == Decay::none) return 1.0f;
  const int col = D == Decay::per_key ? d : 0;
  return expf(b[t * Kg + col] - b[s * Kg + col]);
}

// out_ts = Σ_d X_td Y_sd e^{b_td − b_sd} for s < t (strict) or s ≤ t, zero above
// (reference/family/chunk_common.hpp: one product then the mask for scalar and no
// decay; pair by pair for per-key decay).
template <Decay D>
__device__ void masked_products(const float* X, const float* Y, const float* b, int Kg, int c, int K, bool strict,
                                float* out) {
  if constexpr (D != Decay::per_key) {
    gemm<false, true>(out, kC, X, K, Y, K, c, c, K, 1.0f, false);
    for (int e = threadIdx.x; e < c * c; e += blockDim.x) {
      const int t = e / c, s = e % c;
      if (s > t || (strict && s == t)) out[t * kC + s] = 0.0f;
      else if (D == Decay::scalar) out[t * kC + s] *= decay_between<D>(b, Kg, t, s, 0);
    }
  } else {
    for (int e = threadIdx.x; e < c * c; e += blockDim.x) {
      const int t = e / c, s = e % c;
      float acc = 0.0f;
      if (s < t || (!strict && s == t))
        for (int d = 0; d < K; ++d) acc = fmaf(X[t * K + d] * Y[s * K + d], decay_between<D>(b, Kg, t, s, d), acc);
      out[t * kC + s] = acc;
    }
  }
  __syncthreads();
}

// The backward of masked_products given dP: dX, dY and db accumulate
// (reference/family/delta_chunk_backward.hpp, masked_decayed_products_backward).
template <Decay D>
__device__ void masked_products_backward(const float* X, const float* Y, const float* b, int Kg, int c, int K,
                                         bool strict, const float* dP, float* dX, float* dY, float* db, float* pair) {
  auto causal = [&](int t, int s) { return s < t || (!strict && s == t); };
  for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
    const int t = e / K, i = e % K;
    float ax = 0.0f, ay = 0.0f;
    for (int s = 0; s < c; ++s) {
      if (causal(t, s)) ax = fmaf(dP[t * kC + s] * decay_between<D>(b, Kg, t, s, i), Y[s * K + i], ax);
      if (causal(s, t)) ay = fmaf(dP[s * kC + t] * decay_between<D>(b, Kg, s, t, i), X[s * K + i], ay);
    }
    dX[t * K + i] += ax;
    dY[t * K + i] += ay;
  }
  if constexpr (D == Decay::per_key) {
    // db_ti += Σ_s term(t, s, i) − Σ_t' term(t', t, i).
    for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
      const int t = e / K, i = e % K;
      float acc = 0.0f;
      for (int s = 0; s < c; ++s) {
        if (causal(t, s)) acc += dP[t * kC + s] * decay_between<D>(b, Kg, t, s, i) * X[t * K + i] * Y[s * K + i];
        if (causal(s, t)) acc -= dP[s * kC + t] * decay_between<D>(b, Kg, s, t, i) * X[s * K + i] * Y[t * K + i];
      }
      db[t * K + i] += acc;
    }
  }
  if constexpr (D == Decay::scalar) {
    // pair_ts = Σ_i term(t, s, i); db_t += Σ_s pair_ts − Σ_t' pair_t't.
    for (int e = threadIdx.x; e < c * c; e += blockDim.x) {
      const int t = e / c, s = e % c;
      float acc = 0.0f;
      if (causal(t, s)) {
        const float de = dP[t * kC + s] * decay_between<D>(b, Kg, t, s, 0);
        for (int i = 0; i < K; ++i) acc += de * X[t * K + i] * Y[s * K + i];
      }
      pair[t * kC + s] = acc;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < c; t += blockDim.x) {
      float acc = 0.0f;
      for (int s = 0; s < c; ++s) acc += pair[t * kC + s] - pair[s * kC + t];
      db[t] += acc;
    }
  }
  __syncthreads();
}

template <class E, Decay D>
struct ChunkArgs {
  int B, T, H, K, V;
  const E *q, *k, *v, *beta, *do_;
  const float *g, *h0, *dht;
  float *dh0, *states, *scratch;
  E* dv;
  delta_backward::DeltaGradPartials out;  // NB = 1: dq (scaled), dk, dw, dg, dbeta, narrowed as written
  float scale, eps;
  bool kaczmarz;
};

// The chunk's forward quantities (delta_chunk.hpp, the forward's narrowing):
// q, k, w, v, b, β, G (the β-free A), T, K ⊙ e^b, β ⊙ K ⊙ e^b, β ⊙ V, W, U, S_0 as
// an operand, Δ, and (full) Q ⊙ e^b, the scores, W ⊙ e^{b_last − b}.
template <class E, Decay D>
__device__ void recompute(const ChunkArgs<E, D>& a, const Scratch& s, int b_, int h, int t0, int c,
                          const float* S0, bool full) {
  const int K = a.K, V = a.V, Kg = D == Decay::per_key ? K : 1, last = c - 1;
  const std::int64_t row0 = (static_cast<std::int64_t>(b_) * a.T + t0) * a.H + h, rstride = a.H;
  for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
    const int t = e / K, i = e % K;
    const std::int64_t r = row0 + t * rstride;
    s.q[e] = Elem<E>::to_float(a.q[r * K + i]);
    s.k[e] = s.w[e] = Elem<E>::to_float(a.k[r * K + i]);
  }
  for (int e = threadIdx.x; e < c * V; e += blockDim.x) {
    const int t = e / V, j = e % V;
    s.v[e] = Elem<E>::to_float(a.v[(row0 + t * rstride) * V + j]);
  }
  if constexpr (D != Decay::none)
    for (int col = threadIdx.x; col < Kg; col += blockDim.x) {  // chunk-local cumulative gates
      float run = 0.0f;
      for (int t = 0; t < c; ++t) {
        const float gt = a.g[(row0 + t * rstride) * Kg + col];
        run = t == 0 ? gt : run + gt;
        s.b[t * Kg + col] = run;
      }
    }
  __syncthreads();
  for (int t = threadIdx.x; t < c; t += blockDim.x) {
    float bt = Elem<E>::to_float(a.beta[row0 + t * rstride]);
    if (a.kaczmarz) {  // as the forward kernels: fp32 from the key as stored, stored in E
      float kk = 0.0f;
      for (int d = 0; d < K; ++d) kk += s.k[t * K + d] * s.k[t * K + d];
      bt = narrow<E>(bt / (kk + a.eps));
    }
    s.beta[t] = bt;
  }
  __syncthreads();
  masked_products<D>(s.k, s.w, s.b, Kg, c, K, true, s.G);
  // T = (I + Diag(β) G)⁻¹ by forward substitution, a thread per column; narrowed.
  for (int j = threadIdx.x; j < c; j += blockDim.x)
    for (int i = 0; i < c; ++i) {
      float x = i == j ? 1.0f : 0.0f;
      for (int p = 0; p < i; ++p) x = fmaf(-(s.G[i * kC + p] * s.beta[i]), s.T[p * kC + j], x);
      s.T[i * kC + j] = x;
    }
  __syncthreads();
  narrow_all<E>(s.T, c * kC);
  for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
    const int t = e / K, d = e % K;
    const float f = D == Decay::none ? 1.0f : expf(s.b[t * Kg + (D == Decay::per_key ? d : 0)]);
    const float kd = D == Decay::none ? s.k[e] : narrow<E>(s.k[e] * f);
    s.kd[e] = kd;
    s.bk[e] = narrow<E>(s.beta[t] * kd);
  }
  for (int e = threadIdx.x; e < c * V; e += blockDim.x) s.bv[e] = narrow<E>(s.beta[e / V] * s.v[e]);
  __syncthreads();
  gemm<false, false>(s.wy, K, s.T, kC, s.bk, K, c, K, c, 1.0f, false);
  gemm<false, false>(s.u, V, s.T, kC, s.bv, V, c, V, c, 1.0f, false);
  narrow_all<E>(s.wy, c * K);
  narrow_all<E>(s.u, c * V);
  for (int e = threadIdx.x; e < K * V; e += blockDim.x) s.s0[e] = narrow<E>(S0[e]);
  __syncthreads();
  gemm<false, false>(s.delta, V, s.wy, K, s.s0, V, c, V, K, 1.0f, false);
  for (int e = threadIdx.x; e < c * V; e += blockDim.x) s.delta[e] = narrow<E>(s.u[e] - s.delta[e]);
  for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
    const int t = e / K, d = e % K, col = D == Decay::per_key ? d : 0;
    if (D == Decay::none) {
      s.qd[e] = s.q[e], s.wd[e] = s.w[e];
    } else {
      s.qd[e] = narrow<E>(s.q[e] * expf(s.b[t * Kg + col]));
      s.wd[e] = narrow<E>(s.w[e] * expf(s.b[last * Kg + col] - s.b[t * Kg + col]));
    }
  }
  __syncthreads();
  if (full) {
    masked_products<D>(s.q, s.w, s.b, Kg, c, K, false, s.scores);
    narrow_all<E>(s.scores, c * kC);
  }
}

template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) chunk_backward(ChunkArgs<E, D> a) {
  const int bh = blockIdx.x, b_ = bh / a.H, h = bh % a.H, K = a.K, V = a.V;
  const int Kg = D == Decay::per_key ? K : 1, nchunks = (a.T + kC - 1) / kC;
  const std::size_t KV = static_cast<std::size_t>(K) * V;
  const Scratch s = carve(a.scratch + bh * scratch_floats(K, V), K, V);
  float* states = a.states + static_cast<std::size_t>(bh) * nchunks * KV;
  const std::int64_t sbase = static_cast<std::int64_t>(bh) * KV;
  // Forward over the chunks: S_0 of every chunk (fp32), by the chunk form's update
  // S ← Diag(e^{b_last}) S + (W ⊙ e^{b_last − b})ᵀ Δ.
  for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x) s.S[e] = a.h0 ? a.h0[sbase + e] : 0.0f;
  __syncthreads();
  for (int n = 0; n < nchunks; ++n) {
    float* Sn = states + n * KV;
    for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x) Sn[e] = s.S[e];
    __syncthreads();
    if (n + 1 == nchunks) break;
    recompute<E, D>(a, s, b_, h, n * kC, kC, Sn, false);
    if constexpr (D != Decay::none)
      for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x)
        s.S[e] *= expf(s.b[(kC - 1) * Kg + (D == Decay::per_key ? static_cast<int>(e / V) : 0)]);
    __syncthreads();
    gemm<true, false>(s.S, V, s.wd, K, s.delta, V, K, V, kC, 1.0f, true);
  }
  // dS = ∂L/∂S_T: dht, a 16-bit input.
  for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x) s.S[e] = a.dht ? narrow<E>(a.dht[sbase + e]) : 0.0f;
  __syncthreads();
  float* dS = s.S;
  for (int n = nchunks - 1; n >= 0; --n) {
    const int t0 = n * kC, c = min(kC, a.T - t0), last = c - 1;
    const float* Sn = states + n * KV;
    recompute<E, D>(a, s, b_, h, t0, c, Sn, true);
    const std::int64_t row0 = (static_cast<std::int64_t>(b_) * a.T + t0) * a.H + h;
    for (int e = threadIdx.x; e < c * V; e += blockDim.x)
      s.dO[e] = Elem<E>::to_float(a.do_[(row0 + (e / V) * a.H) * V + e % V]);
    for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x) s.dse[e] = narrow<E>(dS[e]);
    __syncthreads();
    // dΔ = scale·Mᵀ dO + (W ⊙ e^{b_last − b}) dS_end, narrowed (FLA's dv2).
    gemm<true, false>(s.ddelta, V, s.scores, kC, s.dO, V, c, V, c, a.scale, false);
    gemm<false, false>(s.ddelta, V, s.wd, K, s.dse, V, c, V, K, 1.0f, true);
    narrow_all<E>(s.ddelta, c * V);
    for (int e = threadIdx.x; e < c * K; e += blockDim.x) s.dq[e] = s.dk[e] = s.dw[e] = 0.0f;
    for (int e = threadIdx.x; e < c * V; e += blockDim.x) s.dv[e] = 0.0f;
    for (int e = threadIdx.x; e < c * Kg; e += blockDim.x) s.db[e] = 0.0f;
    for (int t = threadIdx.x; t < c; t += blockDim.x) s.dbeta[t] = 0.0f;
    __syncthreads();
    // The state decay Diag(e^{b_last}) S_0: db_last += e^{b_last} Σ_j dS_ij S_0,ij, S_0
    // read as stored (narrowed, FLA's h).
    if constexpr (D != Decay::none) {
      for (int i = threadIdx.x; i < K; i += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < V; ++j) acc = fmaf(dS[i * V + j], narrow<E>(Sn[i * V + j]), acc);
        s.rowsum[i] = acc * expf(s.b[last * Kg + (D == Decay::per_key ? i : 0)]);
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        if constexpr (D == Decay::scalar) {
          float acc = 0.0f;
          for (int i = 0; i < K; ++i) acc += s.rowsum[i];
          s.db[last] += acc;
        }
      }
      if constexpr (D == Decay::per_key)
        for (int i = threadIdx.x; i < K; i += blockDim.x) s.db[last * K + i] += s.rowsum[i];
      __syncthreads();
    }
    // d(W ⊙ e^{b_last − b}) = Δ dS_endᵀ, before dS is overwritten.
    gemm<false, true>(s.dwd, K, s.delta, V, s.dse, V, c, K, V, 1.0f, false);
    // dS_0 = Diag(e^{b_last}) dS + scale·(Q ⊙ e^b)ᵀ dO − Wyᵀ dΔ (FLA's dh).
    if constexpr (D != Decay::none)
      for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x)
        dS[e] *= expf(s.b[last * Kg + (D == Decay::per_key ? static_cast<int>(e / V) : 0)]);
    __syncthreads();
    gemm<true, false>(s.tmpKV, V, s.qd, K, s.dO, V, K, V, c, 1.0f, false);
    for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x) dS[e] = fmaf(a.scale, s.tmpKV[e], dS[e]);
    __syncthreads();
    gemm<true, false>(s.tmpKV, V, s.wy, K, s.ddelta, V, K, V, c, 1.0f, false);
    for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x) dS[e] -= s.tmpKV[e];
    __syncthreads();
    // The output's reads: d(Q ⊙ e^b) = scale·dO S_0ᵀ, dM = scale·dO Δᵀ (s ≤ t).
    gemm<false, true>(s.dqd, K, s.dO, V, s.s0, V, c, K, V, a.scale, false);
    gemm<false, true>(s.dscores, kC, s.dO, V, s.delta, V, c, c, V, a.scale, false);
    masked_products_backward<D>(s.q, s.w, s.b, Kg, c, K, false, s.dscores, s.dq, s.dw, s.db, s.tmpc);
    // The row decays: Q ⊙ e^b and W ⊙ e^{b_last − b}.
    for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
      const int t = e / K, d = e % K, col = D == Decay::per_key ? d : 0;
      const float eq = D == Decay::none ? 1.0f : expf(s.b[t * Kg + col]);
      const float ew = D == Decay::none ? 1.0f : expf(s.b[last * Kg + col] - s.b[t * Kg + col]);
      s.dq[e] = fmaf(s.dqd[e], eq, s.dq[e]);
      s.dw[e] = fmaf(s.dwd[e], ew, s.dw[e]);
      s.rowsum2[e] = s.dqd[e] * s.qd[e];           // db_t += d(Q⊙e^b) ⊙ (Q⊙e^b)
      s.rowsum2[c * K + e] = s.dwd[e] * s.wd[e];  // db_last += tw, db_t −= tw
    }
    __syncthreads();
    if constexpr (D != Decay::none) {
      for (int e = threadIdx.x; e < c * Kg; e += blockDim.x) {
        const int t = e / Kg, col = e % Kg;
        float acc = 0.0f;
        for (int d = (D == Decay::per_key ? col : 0); d < (D == Decay::per_key ? col + 1 : K); ++d)
          acc += s.rowsum2[t * K + d] - s.rowsum2[c * K + t * K + d];
        s.db[e] += acc;
      }
      __syncthreads();
      for (int col = threadIdx.x; col < Kg; col += blockDim.x) {
        float acc = 0.0f;
        for (int t = 0; t < c; ++t)
          for (int d = (D == Decay::per_key ? col : 0); d < (D == Decay::per_key ? col + 1 : K); ++d)
            acc += s.rowsum2[c * K + t * K + d];
        s.db[last * Kg + col] += acc;
      }
      __syncthreads();
    }
    // Δ = U − Wy S_0: dU = dΔ, dWy = −dΔ S_0ᵀ narrowed (FLA's dw).
    gemm<false, true>(s.dwy, K, s.ddelta, V, s.s0, V, c, K, V, 1.0f, false);
    for (int e = threadIdx.x; e < c * K; e += blockDim.x) s.dwy[e] = narrow<E>(-s.dwy[e]);
    __syncthreads();
    // dT = dU Yᵀ + dWy Xᵀ (strictly lower), dX = Tᵀ dWy, dY = Tᵀ dU, dA = −Tᵀ dT Tᵀ.
    gemm<false, true>(s.dt, kC, s.ddelta, V, s.bv, V, c, c, V, 1.0f, false);
    gemm<false, true>(s.dt, kC, s.dwy, K, s.bk, K, c, c, K, 1.0f, true);
    gemm<true, false>(s.dbk, K, s.T, kC, s.dwy, K, c, K, c, 1.0f, false);
    gemm<true, false>(s.dbv, V, s.T, kC, s.ddelta, V, c, V, c, 1.0f, false);
    for (int e = threadIdx.x; e < c * c; e += blockDim.x)
      if (e % c >= e / c) s.dt[(e / c) * kC + e % c] = 0.0f;
    __syncthreads();
    gemm<true, false>(s.tmpc, kC, s.T, kC, s.dt, kC, c, c, c, 1.0f, false);
    gemm<false, true>(s.da, kC, s.tmpc, kC, s.T, kC, c, c, c, 1.0f, false);
    for (int e = threadIdx.x; e < c * c; e += blockDim.x) {
      const int t = e / c, j = e % c;
      s.da[t * kC + j] = j < t ? -s.da[t * kC + j] : 0.0f;
    }
    __syncthreads();
    // X = Diag(β)(K ⊙ e^b), Y = Diag(β) V; A = Diag(β) G.
    for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
      const int t = e / K, d = e % K;
      const float f = D == Decay::none ? 1.0f : expf(s.b[t * Kg + (D == Decay::per_key ? d : 0)]);
      s.dk[e] = fmaf(s.beta[t] * f, s.dbk[e], s.dk[e]);
      s.rowsum2[e] = s.dbk[e] * s.bk[e];
    }
    for (int e = threadIdx.x; e < c * V; e += blockDim.x) s.dv[e] = fmaf(s.beta[e / V], s.dbv[e], s.dv[e]);
    for (int t = threadIdx.x; t < c; t += blockDim.x) {
      float acc = s.dbeta[t];
      for (int d = 0; d < K; ++d) acc = fmaf(s.dbk[t * K + d], s.kd[t * K + d], acc);
      for (int j = 0; j < V; ++j) acc = fmaf(s.dbv[t * V + j], s.v[t * V + j], acc);
      for (int j = 0; j < t; ++j) acc = fmaf(s.da[t * kC + j], s.G[t * kC + j], acc);
      s.dbeta[t] = acc;
    }
    __syncthreads();
    if constexpr (D != Decay::none)
      for (int e = threadIdx.x; e < c * Kg; e += blockDim.x) {
        const int t = e / Kg, col = e % Kg;
        float acc = 0.0f;
        for (int d = (D == Decay::per_key ? col : 0); d < (D == Decay::per_key ? col + 1 : K); ++d)
          acc += s.rowsum2[t * K + d];
        s.db[e] += acc;
      }
    for (int e = threadIdx.x; e < c * c; e += blockDim.x) s.da[(e / c) * kC + e % c] *= s.beta[e / c];
    __syncthreads();
    masked_products_backward<D>(s.k, s.w, s.b, Kg, c, K, true, s.da, s.dk, s.dw, s.db, s.tmpc);
    // The chunk's gradients, narrowed as written; dg the chunk-local reverse cumsum of db.
    for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
      const std::int64_t r = row0 + (e / K) * a.H;
      a.out.dq[r * K + e % K] = narrow<E>(s.dq[e]);
      a.out.dk[r * K + e % K] = narrow<E>(s.dk[e]);
      a.out.dw[r * K + e % K] = narrow<E>(s.dw[e]);
    }
    for (int e = threadIdx.x; e < c * V; e += blockDim.x)
      a.dv[(row0 + (e / V) * a.H) * V + e % V] = Elem<E>::from_float(s.dv[e]);
    for (int t = threadIdx.x; t < c; t += blockDim.x) a.out.dbeta[row0 + t * a.H] = narrow<E>(s.dbeta[t]);
    if constexpr (D != Decay::none)
      for (int col = threadIdx.x; col < Kg; col += blockDim.x) {
        float run = 0.0f;
        for (int t = last; t >= 0; --t) {
          run += s.db[t * Kg + col];
          a.out.dg[(row0 + t * a.H) * Kg + col] = run;
        }
      }
    __syncthreads();
  }
  if (a.dh0)
    for (std::size_t e = threadIdx.x; e < KV; e += blockDim.x) a.dh0[sbase + e] = dS[e];
}

template <class E, Decay D>
void launch(const DeltaBackwardArgs& x) {
  const DeltaArgs& f = x.fwd;
  auto stream = static_cast<cudaStream_t>(f.stream);
  const std::int64_t BH = static_cast<std::int64_t>(f.B) * f.H, rows = BH * f.T;
  const int nchunks = (f.T + kC - 1) / kC, Kg = D == Decay::per_key ? f.K : 1;
  const std::size_t n_states = BH * nchunks * static_cast<std::size_t>(f.K) * f.V;
  const std::size_t n_scratch = BH * scratch_floats(f.K, f.V), n_part = rows * f.K;
  const std::size_t total = n_states + n_scratch + 3 * n_part + rows * Kg + rows;
  float* ws = nullptr;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), total * sizeof(float), stream));
  ChunkArgs<E, D> a{};
  a.B = f.B, a.T = f.T, a.H = f.H, a.K = f.K, a.V = f.V;
  a.q = static_cast<const E*>(f.q), a.k = static_cast<const E*>(f.k), a.v = static_cast<const E*>(f.v);
  a.beta = static_cast<const E*>(f.beta), a.do_ = static_cast<const E*>(x.do_);
  a.g = f.g, a.h0 = f.h0, a.dht = x.dht, a.dh0 = x.dh0;
  a.states = ws, a.scratch = ws + n_states;
  float* p = a.scratch + n_scratch;
  a.out.dq = p, p += n_part;
  a.out.dk = p, p += n_part;
  a.out.dw = p, p += n_part;
  a.out.dg = p, p += rows * Kg;
  a.out.dbeta = p;
  a.dv = static_cast<E*>(x.dv);
  a.scale = f.scale, a.eps = f.kaczmarz_eps, a.kaczmarz = f.kaczmarz;
  try {
    chunk_backward<E, D><<<static_cast<unsigned>(BH), kThreads, 0, stream>>>(a);
    TTR_CUDA_CHECK_LAUNCH("chunk_backward");
    const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
    // dq is already scaled: scale 1 in finish.
    delta_backward::finish<E, D><<<blocks, 256, 0, stream>>>(
        rows, f.K, 1, a.k, static_cast<const E*>(x.q_raw), static_cast<const E*>(x.k_raw), a.beta, f.kaczmarz,
        f.kaczmarz_eps, x.l2_eps, 1.0f, a.out, static_cast<E*>(x.dq), static_cast<E*>(x.dk),
        static_cast<E*>(x.dbeta), x.dg);
    TTR_CUDA_CHECK_LAUNCH("finish");
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  TTR_CUDA_CHECK(cudaFreeAsync(ws, stream));
}

template <class E>
void launch_decay(const DeltaBackwardArgs& a) {
  switch (a.fwd.decay) {
    case Decay::none: return launch<E, Decay::none>(a);
    case Decay::scalar: return launch<E, Decay::scalar>(a);
    case Decay::per_key: return launch<E, Decay::per_key>(a);
  }
}

}  // namespace

void delta_chunk_backward_reference(const DeltaBackwardArgs& a) {
  validate(a);
  if (a.atk) throw std::invalid_argument("gpu delta_chunk_backward_reference: the preconditioned layers are not taken");
  if (a.fwd.dtype == DType::bf16) launch_decay<__nv_bfloat16>(a);
  else launch_decay<float>(a);
}

}  // namespace ttr::gpu
