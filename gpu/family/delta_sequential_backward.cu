// Fused-recurrent backward of the delta rule with decay: the GPU's own sequential
// backward, the adjoint recurrence of reference/family/delta_backward.hpp run
// token by token with the state and its adjoint in registers.
//
// Forward (delta_sequential.cu): S̄_t = D_t S_{t-1}, u_t = S̄_tᵀk_t, r_t = v_t − u_t,
// δ_t = β_t r_t, S_t = S̄_t + w_t δ_tᵀ, o_t = scale·S_tᵀq_t. Adjoint step, t = T..1
// (dS = ∂L/∂S_t on entry, dht at t = T):
//   dq_t = scale·S_t do_t;  dS += scale·q_t do_tᵀ;  dw_t = dS δ_t;  dδ_t = dSᵀw_t;
//   dβ_t = ⟨dδ_t, r_t⟩;  dv_t = β_t dδ_t;  du_t = −β_t dδ_t;
//   dk_t = S̄_t du_t;  dS̄ = dS + k_t du_tᵀ;  dg_t = Σ dS̄ ⊙ S̄_t (per key row for
//   per-key decay);  dS ← D_t dS̄;  dh0 = dS after t = 1.
//
// Three launches:
//  1. forward_sweep (grid V/16 × B·H, as the forward kernel): the forward's own
//     operations, so every S̄_t, r_t, δ_t is bit for bit the forward kernel's;
//     stores the state before every 64th token (fp32), r_t and δ_t (fp32), the β
//     the recurrence used (Kaczmarz: β/(‖k‖²+eps) narrowed, as the forward), and
//     the block's 16-column part of dq_t (S_t do_t needs nothing of the adjoint).
//  2. adjoint_sweep (same grid): segments of 64 tokens last to first; each is
//     re-stepped from its checkpoint with the stored δ (decay and write only),
//     its S̄_t kept in a per-thread workspace (each thread reads back only what
//     it wrote: no barrier needed), then the adjoint step runs t = t1−1..t0.
//     Sums over the state's columns (dk, dw, dβ, dg) are split by column block:
//     each block writes its 16-column partial, summed in a fixed order.
//     The preconditioned layers (w = k̃): the write key's partials dw go through
//     the preconditioner's adjoint (gpu/family/atk_backward.cu) before finish.
//  3. finish (a warp per token row; gpu/family/delta_backward_finish.cuh): the
//     column-block partials summed in block order (deterministic: no atomics,
//     so repeated runs are bit-identical), dk = dk_read + dk_write, then the
//     layer's chain rule (Kaczmarz, L2 norm of q and k) in fp32.
//
// Arithmetic: inputs and cotangent do as stored (bf16 or fp32), everything else
// fp32; dq, dk, dv, dβ rounded once to the dtype, dg and dh0 fp32. These are a
// subset of the chunk backward's narrowing points (docs/arithmetic-policies.md).
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/seqs.cuh"
#include "gpu/family/atk_backward.cuh"
#include "gpu/family/delta_backward_finish.cuh"

namespace ttr::gpu {
namespace {

constexpr int kCols = 16, kGroups = 16, kThreads = kCols * kGroups, kMaxRows = 128 / kGroups, kSeg = 64;

__device__ inline float sum16(float x) {
  for (int o = 8; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Workspace of one call (fp32). nseg = ⌈T/64⌉; NB = V/16 column blocks.
struct Work {
  float* ckpt;      // [BH, nseg, K, V]: S before tokens 0, 64, 128, …
  float* r;         // [B,T,H,V]: v − u
  float* delta;     // [B,T,H,V]: β(v − u)
  float* beta;      // [B,T,H]: the β the recurrence used
  float* dq;        // [NB, B,T,H, K]: Σ_{j in block} S_t,ij do_t,j
  float* dk;        // [NB, B,T,H, K]: Σ_j S̄_t,ij du_j
  float* dw;        // [NB, B,T,H, K]: Σ_j dS_ij δ_j
  float* dg;        // [NB, B,T,H, Kg]: Σ_j dS̄_ij S̄_ij (Kg = K per key, 1 scalar)
  float* dbeta;     // [NB, B,T,H]
  float* sbar;      // [NB·BH, 64, kMaxRows, 256]: S̄_t of the segment at hand
  float* dk_atk;    // [B,T,H, K]: the preconditioner's part of dk (atk only)
};

template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) forward_sweep(int B, int T, int H, int K, int V, const E* __restrict__ q,
                                                           const E* __restrict__ k, const E* __restrict__ w,
                                                           const E* __restrict__ v, const E* __restrict__ beta,
                                                           const float* __restrict__ g, const float* h0,
                                                           const E* __restrict__ do_, bool kaczmarz, float eps,
                                                           const std::int64_t* __restrict__ cu, std::int64_t rowsTotal,
                                                           Work work) {
  __shared__ float ks[128], ws[128], ds[128], vs[kCols], dos[kCols], bs;
  __shared__ float red[kCols][128];
  const int lane16 = threadIdx.x % kGroups, col = threadIdx.x / kGroups;
  const int j = blockIdx.x * kCols + col, bh = blockIdx.y, b = bh / H, h = bh % H;
  // Sequence b: its tokens (varlen: cu); T the longest, which sizes the checkpoints.
  const int rows = K / kGroups, nseg = (T + kSeg - 1) / kSeg, len = seq_len(cu, b, T);
  const std::int64_t first = seq_start(cu, b, T);
  float S[kMaxRows];
  const std::int64_t sbase = static_cast<std::int64_t>(bh) * K * V;
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r)
    S[r] = (r < rows && h0) ? h0[sbase + static_cast<std::int64_t>(r * kGroups + lane16) * V + j] : 0.0f;
  for (int t = 0; t < len; ++t) {
    const std::int64_t row = (first + t) * H + h;
    if (t % kSeg == 0) {
      float* c = work.ckpt + (static_cast<std::int64_t>(bh) * nseg + t / kSeg) * K * V;
#pragma unroll
      for (int r = 0; r < kMaxRows; ++r)
        if (r < rows) c[static_cast<std::int64_t>(r * kGroups + lane16) * V + j] = S[r];
    }
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
      ks[i] = Elem<E>::to_float(k[row * K + i]);
      ws[i] = Elem<E>::to_float((w ? w : k)[row * K + i]);
      if constexpr (D == Decay::per_key) ds[i] = expf(g[row * K + i]);
    }
    if (threadIdx.x < kCols) {
      vs[threadIdx.x] = Elem<E>::to_float(v[row * V + blockIdx.x * kCols + threadIdx.x]);
      dos[threadIdx.x] = Elem<E>::to_float(do_[row * V + blockIdx.x * kCols + threadIdx.x]);
    }
    if (threadIdx.x == 0) {
      if constexpr (D == Decay::scalar) ds[0] = expf(g[row]);
      bs = Elem<E>::to_float(beta[row]);
    }
    __syncthreads();
    float beta_t = bs;
    if (kaczmarz) {  // as the forward kernel: fp32 from the key as stored, stored in E
      float kk = 0.0f;
      for (int d = 0; d < K; ++d) kk += ks[d] * ks[d];
      beta_t = narrow<E>(beta_t / (kk + eps));
    }
    float u = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r)
      if (r < rows) {
        const int i = r * kGroups + lane16;
        if constexpr (D == Decay::scalar) S[r] *= ds[0];
        if constexpr (D == Decay::per_key) S[r] *= ds[i];
        u = fmaf(S[r], ks[i], u);
      }
    const float rr = vs[col] - sum16(u);
    const float delta = beta_t * rr;
    if (lane16 == 0) work.r[row * V + j] = rr, work.delta[row * V + j] = delta;
    if (blockIdx.x == 0 && threadIdx.x == 0) work.beta[row] = beta_t;
    const float dot = dos[col];
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r)
      if (r < rows) {
        const int i = r * kGroups + lane16;
        S[r] = fmaf(ws[i], delta, S[r]);
        red[col][i] = S[r] * dot;
      }
    __syncthreads();
    // dq_t's part of this block's columns, summed j ascending.
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
      float acc = 0.0f;
      for (int c = 0; c < kCols; ++c) acc += red[c][i];
      work.dq[(blockIdx.x * rowsTotal + row) * K + i] = acc;
    }
    // ks/ws/red are rewritten next token: everyone is past their reads.
    __syncthreads();
  }
}

template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) adjoint_sweep(int B, int T, int H, int K, int V, const E* __restrict__ q,
                                                           const E* __restrict__ k, const E* __restrict__ w,
                                                           const float* __restrict__ g, const E* __restrict__ do_,
                                                           const float* dht, float* dh0, float scale, E* __restrict__ dv,
                                                           const std::int64_t* __restrict__ cu, std::int64_t rowsTotal,
                                                           Work work) {
  __shared__ float qs[128], ks[128], ws[128], ds[128];
  __shared__ float red_dk[kCols][128], red_dw[kCols][128], red_dg[kCols][128], red_db[kCols], red_dgs[kCols];
  const int lane16 = threadIdx.x % kGroups, col = threadIdx.x / kGroups;
  const int j = blockIdx.x * kCols + col, bh = blockIdx.y, b = bh / H, h = bh % H;
  const int rows = K / kGroups, nseg = (T + kSeg - 1) / kSeg, len = seq_len(cu, b, T);
  const std::int64_t first = seq_start(cu, b, T), sbase = static_cast<std::int64_t>(bh) * K * V;
  float* sbar = work.sbar + (static_cast<std::int64_t>(bh) * gridDim.x + blockIdx.x) * kSeg * kMaxRows * kThreads;
  auto sbar_at = [&](int s, int r) -> float& { return sbar[(s * kMaxRows + r) * kThreads + threadIdx.x]; };
  float S[kMaxRows], dS[kMaxRows];
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r)
    dS[r] = (r < rows && dht) ? dht[sbase + static_cast<std::int64_t>(r * kGroups + lane16) * V + j] : 0.0f;
  // Loads the decay of token t into ds (the caller synchronises).
  auto load_decay = [&](std::int64_t row) {
    if constexpr (D == Decay::per_key)
      for (int i = threadIdx.x; i < K; i += blockDim.x) ds[i] = expf(g[row * K + i]);
    if constexpr (D == Decay::scalar)
      if (threadIdx.x == 0) ds[0] = expf(g[row]);
  };
  for (int seg = nseg - 1; seg >= 0; --seg) {
    const int t0 = seg * kSeg, t1 = min(len, t0 + kSeg);
    if (t0 >= len) continue;  // past this sequence's end (varlen): no checkpoint there
    // Re-step the segment from its checkpoint with the stored δ: S̄_t = D S, S += w δᵀ.
    const float* c = work.ckpt + (static_cast<std::int64_t>(bh) * nseg + seg) * K * V;
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r)
      S[r] = r < rows ? c[static_cast<std::int64_t>(r * kGroups + lane16) * V + j] : 0.0f;
    for (int t = t0; t < t1; ++t) {
      const std::int64_t row = (first + t) * H + h;
      for (int i = threadIdx.x; i < K; i += blockDim.x) ws[i] = Elem<E>::to_float((w ? w : k)[row * K + i]);
      load_decay(row);
      __syncthreads();
      const float delta = work.delta[row * V + j];
#pragma unroll
      for (int r = 0; r < kMaxRows; ++r)
        if (r < rows) {
          const int i = r * kGroups + lane16;
          if constexpr (D == Decay::scalar) S[r] *= ds[0];
          if constexpr (D == Decay::per_key) S[r] *= ds[i];
          sbar_at(t - t0, r) = S[r];
          S[r] = fmaf(ws[i], delta, S[r]);
        }
      __syncthreads();
    }
    for (int t = t1 - 1; t >= t0; --t) {
      const std::int64_t row = (first + t) * H + h;
      for (int i = threadIdx.x; i < K; i += blockDim.x) {
        qs[i] = Elem<E>::to_float(q[row * K + i]);
        ks[i] = Elem<E>::to_float(k[row * K + i]);
        ws[i] = Elem<E>::to_float((w ? w : k)[row * K + i]);
      }
      load_decay(row);
      __syncthreads();
      const float dot = Elem<E>::to_float(do_[row * V + j]);
      const float delta = work.delta[row * V + j], rr = work.r[row * V + j], beta_t = work.beta[row];
      // The read and the write: dS += scale·q doᵀ; dw = dS δ; dδ = dSᵀ w.
      float acc = 0.0f;
#pragma unroll
      for (int r = 0; r < kMaxRows; ++r)
        if (r < rows) {
          const int i = r * kGroups + lane16;
          dS[r] = fmaf(scale * qs[i], dot, dS[r]);
          red_dw[col][i] = dS[r] * delta;
          acc = fmaf(ws[i], dS[r], acc);
        }
      const float ddelta = sum16(acc);
      // δ = β (v − u).
      const float du = -(beta_t * ddelta);
      if (lane16 == 0) {
        red_db[col] = ddelta * rr;
        dv[row * V + j] = Elem<E>::from_float(beta_t * ddelta);
      }
      // The read-back u = S̄ᵀk and the decay S̄ = D S_{t−1}.
      [[maybe_unused]] float dgs = 0.0f;
#pragma unroll
      for (int r = 0; r < kMaxRows; ++r)
        if (r < rows) {
          const int i = r * kGroups + lane16;
          const float sb = sbar_at(t - t0, r);
          red_dk[col][i] = sb * du;
          dS[r] = fmaf(ks[i], du, dS[r]);
          if constexpr (D != Decay::none) {
            const float e = dS[r] * sb;
            if constexpr (D == Decay::per_key) red_dg[col][i] = e;
            else dgs += e;
            if constexpr (D == Decay::scalar) dS[r] *= ds[0];
            if constexpr (D == Decay::per_key) dS[r] *= ds[i];
          }
        }
      if constexpr (D == Decay::scalar) {
        dgs = sum16(dgs);
        if (lane16 == 0) red_dgs[col] = dgs;
      }
      __syncthreads();
      // This block's column partials, summed j ascending.
      for (int i = threadIdx.x; i < K; i += blockDim.x) {
        float sk = 0.0f, sw = 0.0f;
        for (int c2 = 0; c2 < kCols; ++c2) sk += red_dk[c2][i], sw += red_dw[c2][i];
        const std::int64_t at = (blockIdx.x * rowsTotal + row) * K + i;
        work.dk[at] = sk, work.dw[at] = sw;
        if constexpr (D == Decay::per_key) {
          float sg = 0.0f;
          for (int c2 = 0; c2 < kCols; ++c2) sg += red_dg[c2][i];
          work.dg[(blockIdx.x * rowsTotal + row) * K + i] = sg;
        }
      }
      if (threadIdx.x == 0) {
        float sb = 0.0f;
        for (int c2 = 0; c2 < kCols; ++c2) sb += red_db[c2];
        work.dbeta[blockIdx.x * rowsTotal + row] = sb;
        if constexpr (D == Decay::scalar) {
          float sg = 0.0f;
          for (int c2 = 0; c2 < kCols; ++c2) sg += red_dgs[c2];
          work.dg[blockIdx.x * rowsTotal + row] = sg;
        }
      }
      __syncthreads();
    }
  }
  if (dh0) {
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r)
      if (r < rows) dh0[sbase + static_cast<std::int64_t>(r * kGroups + lane16) * V + j] = dS[r];
  }
}

template <class E, Decay D>
void launch(const DeltaBackwardArgs& a) {
  const DeltaArgs& f = a.fwd;
  auto stream = static_cast<cudaStream_t>(f.stream);
  // Token rows: B·T·H, or the packed tokens' under varlen (B sequences, T the longest).
  const std::int64_t BH = static_cast<std::int64_t>(f.B) * f.H,
                     rowsTotal = f.cu_seqlens ? f.packed_tokens * f.H : BH * f.T;
  const int NB = f.V / kCols, nseg = (f.T + kSeg - 1) / kSeg, Kg = D == Decay::per_key ? f.K : 1;
  const std::size_t n_ckpt = BH * nseg * f.K * f.V, n_rv = rowsTotal * f.V, n_part = NB * rowsTotal * f.K;
  const std::size_t n_dg = D == Decay::none ? 0 : NB * rowsTotal * Kg, n_sbar = NB * BH * kSeg * kMaxRows * kThreads;
  auto align = [](std::size_t n) { return (n + 63) / 64 * 64; };  // floats: 256 bytes
  const std::size_t n_atk = a.atk ? rowsTotal * f.K : 0;
  const std::size_t total = align(n_ckpt) + 2 * align(n_rv) + align(rowsTotal) + 3 * align(n_part) + align(n_dg) +
                            align(NB * rowsTotal) + align(n_sbar) + align(n_atk);
  float* ws = nullptr;
  TTR_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ws), total * sizeof(float), stream));
  Work work{};
  std::size_t off = 0;
  auto take = [&](std::size_t n) { float* p = ws + off; off += align(n); return p; };
  work.ckpt = take(n_ckpt), work.r = take(n_rv), work.delta = take(n_rv), work.beta = take(rowsTotal);
  work.dq = take(n_part), work.dk = take(n_part), work.dw = take(n_part), work.dg = take(n_dg);
  work.dbeta = take(NB * rowsTotal), work.sbar = take(n_sbar), work.dk_atk = take(n_atk);
  const E* q = static_cast<const E*>(f.q);
  const E* k = static_cast<const E*>(f.k);
  const E* w = static_cast<const E*>(f.w);
  try {
    const dim3 grid(NB, static_cast<unsigned>(BH));
    forward_sweep<E, D><<<grid, kThreads, 0, stream>>>(f.B, f.T, f.H, f.K, f.V, q, k, w, static_cast<const E*>(f.v),
                                                       static_cast<const E*>(f.beta), f.g, f.h0,
                                                       static_cast<const E*>(a.do_), f.kaczmarz, f.kaczmarz_eps,
                                                       f.cu_seqlens, rowsTotal, work);
    TTR_CUDA_CHECK_LAUNCH("forward_sweep");
    adjoint_sweep<E, D><<<grid, kThreads, 0, stream>>>(f.B, f.T, f.H, f.K, f.V, q, k, w, f.g,
                                                       static_cast<const E*>(a.do_), a.dht, a.dh0, f.scale,
                                                       static_cast<E*>(a.dv), f.cu_seqlens, rowsTotal, work);
    TTR_CUDA_CHECK_LAUNCH("adjoint_sweep");
    const unsigned blocks = static_cast<unsigned>((rowsTotal + 7) / 8);
    delta_backward::DeltaGradPartials parts{work.dq, work.dk, work.dw, work.dg, work.dbeta};
    if (a.atk) {  // the preconditioned layers: dk̃ through the preconditioner's adjoint
      atk::backward(*a.atk, work.dw, NB, rowsTotal, f.dtype, work.dk_atk, stream);
      parts.dw = nullptr, parts.dk_extra = work.dk_atk;
    }
    if (blocks > 0)  // none when every sequence of a varlen batch is empty
    delta_backward::finish<E, D><<<blocks, 256, 0, stream>>>(rowsTotal, f.K, NB, k, static_cast<const E*>(a.q_raw),
                                             static_cast<const E*>(a.k_raw), static_cast<const E*>(f.beta),
                                             f.kaczmarz, f.kaczmarz_eps, a.l2_eps, f.scale, parts,
                                             static_cast<E*>(a.dq), static_cast<E*>(a.dk),
                                             static_cast<E*>(a.dbeta), a.dg);
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

void delta_sequential_backward(const DeltaBackwardArgs& a) {
  validate(a);
  if (a.fwd.dtype == DType::bf16) launch_decay<__nv_bfloat16>(a);
  else launch_decay<float>(a);
}

}  // namespace ttr::gpu
