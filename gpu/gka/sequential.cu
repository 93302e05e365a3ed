// Recurrent forward of Gated KalmaNet: one token at a time, the sequential form
// of reference/gka/sequential.hpp with solver = chebyshev — the GPU's own
// sequential reference for the chunk kernel (gpu/gka/chunk.cu).
//
//   H_t = γ_t H_{t−1} + β_t k_t k_tᵀ,  S_t = γ_t S_{t−1} + β_t k_t v_tᵀ       (GKA eq. (CH))
//   λ_t = a‖H_t‖_F (eq. (4)) or fixed;  x_t: `iters` Chebyshev steps (Alg. 1) on (H_t + λ_t I) x = scale·q_t
//   q̃_t = scale·q_t + α_t (x_t − scale·q_t) (α absent: x_t);  o_t = S_tᵀ q̃_t
//
// Arithmetic: inputs as stored (bf16 or fp32), everything else fp32 (H and S
// never leave shared memory), o rounded once to the dtype — a subset of the
// chunk form's narrowing points (docs/arithmetic-policies.md).
//
// One block per (b, h); H (K×K) and S (K×V) in shared memory. Each Chebyshev
// step is one matrix-vector product, a warp per row of H (lanes over columns,
// shuffle sum), and the warp that finishes row i updates ξ_i at once: the
// iterates rotate through three buffers, so one barrier per step suffices
// (step i writes ξ_{i+1} while every warp reads ξ_i, and ξ_{i−1} only at its
// own rows).
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/launch.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/seqs.cuh"

namespace ttr::gpu {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

template <class E>
__global__ void __launch_bounds__(kThreads) gka_recurrent_kernel(GkaArgs a) {
  extern __shared__ __align__(16) float sm[];
  const int K = a.K, V = a.V, bh = blockIdx.x, b = bh / a.H, h = bh % a.H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* Hm = sm;              // K×K
  float* Sm = Hm + K * K;      // K×V
  float* kv = Sm + K * V;      // k_t
  float* vv = kv + K;          // v_t
  float* sq = vv + V;          // scale·q_t
  float* xb[3] = {sq + K, sq + 2 * K, sq + 3 * K};
  float* red = sq + 4 * K;     // kWarps partial sums
  float* sc = red + kWarps;    // γ, β, α, λ, ‖H‖_F
  const E* q = static_cast<const E*>(a.q);
  const E* k = static_cast<const E*>(a.k);
  const E* v = static_cast<const E*>(a.v);
  const std::int64_t hbase = static_cast<std::int64_t>(bh) * K * K, sbase = static_cast<std::int64_t>(bh) * K * V;
  for (int i = threadIdx.x; i < K * K; i += blockDim.x) Hm[i] = a.hkk0 ? a.hkk0[hbase + i] : 0.0f;
  for (int i = threadIdx.x; i < K * V; i += blockDim.x) Sm[i] = a.h0 ? a.h0[sbase + i] : 0.0f;
  const std::int64_t first = seq_start(a.cu_seqlens, b, a.T);  // sequence b's tokens (varlen)
  const int len = seq_len(a.cu_seqlens, b, a.T);
  for (int t = 0; t < len; ++t) {
    const std::int64_t row = (first + t) * a.H + h;
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
      kv[i] = Elem<E>::to_float(k[row * K + i]);
      sq[i] = a.scale * Elem<E>::to_float(q[row * K + i]);
    }
    for (int j = threadIdx.x; j < V; j += blockDim.x) vv[j] = Elem<E>::to_float(v[row * V + j]);
    if (threadIdx.x == 0) {
      sc[0] = expf(a.g[row]);
      sc[1] = a.beta ? a.beta[row] : 1.0f;
      sc[2] = a.alpha ? a.alpha[row] : 0.0f;
    }
    __syncthreads();
    // eq. (CH): decay, then the weighted outer products; ‖H_t‖²_F on the way.
    const float gam = sc[0], bet = sc[1];
    float part = 0.0f;
    for (int i = warp; i < K; i += kWarps) {
      const float wk = bet * kv[i];
      for (int j = lane; j < K; j += 32) {
        const float e = fmaf(wk, kv[j], Hm[i * K + j] * gam);
        Hm[i * K + j] = e;
        part = fmaf(e, e, part);
      }
      for (int j = lane; j < V; j += 32) Sm[i * V + j] = fmaf(wk, vv[j], Sm[i * V + j] * gam);
    }
    for (int o = 16; o > 0; o /= 2) part += __shfl_xor_sync(0xffffffffu, part, o);
    if (lane == 0) red[warp] = part;
    __syncthreads();
    if (threadIdx.x == 0) {
      float s2 = 0.0f;
      for (int w = 0; w < kWarps; ++w) s2 += red[w];
      sc[4] = sqrtf(s2);
      sc[3] = a.fixed_lambda ? a.lambda_value : a.a * sc[4];
    }
    __syncthreads();
    // Alg. 1 with L = ‖H_t‖_F + λ_t, μ = λ_t; where λ_t = 0 (H_t = 0) x_t = 0.
    const float lam = sc[3], fro = sc[4];
    const bool live = lam != 0.0f;
    const float L = fro + lam, mu = lam, rho = (L - mu) / (L + mu), rho2 = rho * rho;
    const float c0 = live ? 2.0f / (L + mu) : 0.0f;
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
      xb[0][i] = 0.0f;       // ξ_{−1}
      xb[1][i] = c0 * sq[i]; // ξ_0
    }
    __syncthreads();
    int prev = 0, cur = 1;
    float omega = a.omega0;
    for (int it = 1; live && it <= a.iters; ++it) {
      const float w = 4.0f / (4.0f - rho2 * omega);  // ω_i = 4/(4 − ρ²ω_{i−1})
      omega = w;
      const float ci = 2.0f * w / (L + mu);
      const int next = 3 - prev - cur;
      const float* x = xb[cur];
      for (int i = warp; i < K; i += kWarps) {
        float acc = 0.0f;
        for (int j = lane; j < K; j += 32) acc = fmaf(Hm[i * K + j], x[j], acc);
        for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) {
          const float ax = acc + lam * x[i];
          xb[next][i] = x[i] - ci * (ax - sq[i]) + (w - 1.0f) * (x[i] - xb[prev][i]);  // step + momentum
        }
      }
      __syncthreads();
      prev = cur;
      cur = next;
    }
    // α-connection, then o_t = S_tᵀ q̃_t (each thread one column, rows in order).
    float* qt = xb[3 - prev - cur];
    for (int i = threadIdx.x; i < K; i += blockDim.x)
      qt[i] = a.alpha ? sq[i] + sc[2] * (xb[cur][i] - sq[i]) : xb[cur][i];
    __syncthreads();
    E* o = static_cast<E*>(a.o);
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
      float acc = 0.0f;
      for (int i = 0; i < K; ++i) acc = fmaf(qt[i], Sm[i * V + j], acc);
      o[row * V + j] = Elem<E>::from_float(acc);
    }
    if (threadIdx.x == 0) {
      if (a.lambda) a.lambda[row] = lam;
      if (a.fro) a.fro[row] = fro;
    }
    __syncthreads();
  }
  if (a.hkk)
    for (int i = threadIdx.x; i < K * K; i += blockDim.x) a.hkk[hbase + i] = Hm[i];
  if (a.ht)
    for (int i = threadIdx.x; i < K * V; i += blockDim.x) a.ht[sbase + i] = Sm[i];
}

template <class E>
void launch(const GkaArgs& a) {
  const std::size_t bytes = (static_cast<std::size_t>(a.K) * (a.K + a.V) + 5 * a.K + a.V + kWarps + 8) * sizeof(float);
  allow_smem(gka_recurrent_kernel<E>, bytes, "gpu gka recurrent");
  gka_recurrent_kernel<E><<<a.B * a.H, kThreads, bytes, static_cast<cudaStream_t>(a.stream)>>>(a);
  TTR_CUDA_CHECK_LAUNCH("gka_recurrent_kernel");
}

}  // namespace

void gka_sequential_forward(const GkaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) launch<__nv_bfloat16>(a);
  else launch<float>(a);
}

}  // namespace ttr::gpu
