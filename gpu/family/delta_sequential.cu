// Fused-recurrent forward of the delta rule with decay: one token at a time, the
// sequential recurrence of reference/family/delta.hpp, state in registers —
// the GPU's own sequential form, against which the chunk kernels are compared.
//
//   S̄_t = Diag(d_t) S_{t-1};  δ_t = β_t (v_t − S̄_tᵀ k_t);  S_t = S̄_t + w_t δ_tᵀ;  o_t = scale · S_tᵀ q_t
//
// Arithmetic: inputs as stored (bf16 or fp32), everything else fp32 (the state
// never leaves registers), o rounded once to the dtype: a subset of the chunk
// form's narrowing points (docs/arithmetic-policies.md), so the chunk form's
// error model bounds it as well.
//
// Block = 16 state columns × 16 row groups (256 threads); each warp holds two
// columns, its 16 lanes per column own K/16 rows each (rows r·16 + lane), and
// the two column sums per token (S̄ᵀk and Sᵀq) are warp-shuffle reductions.
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/seqs.cuh"

namespace ttr::gpu {
namespace {

constexpr int kCols = 16, kGroups = 16, kMaxRows = 128 / kGroups;

__device__ inline float sum16(float x) {
  for (int o = 8; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <class E, Decay D>
__global__ void __launch_bounds__(kCols * kGroups) recurrent_kernel(int B, int T, int H, int K, int V,
                                                                     const E* __restrict__ q, const E* __restrict__ k,
                                                                     const E* __restrict__ w, const E* __restrict__ v,
                                                                     const E* __restrict__ beta,
                                                                     const float* __restrict__ g, const float* h0,
                                                                     float* ht, E* __restrict__ o, float scale,
                                                                     bool kaczmarz, float eps,
                                                                     const std::int64_t* __restrict__ cu) {
  __shared__ float ks[128], ws[128], qs[128], ds[128], vs[kCols], bs;
  const int lane16 = threadIdx.x % kGroups, col = threadIdx.x / kGroups;
  const int j = blockIdx.x * kCols + col, bh = blockIdx.y, b = bh / H, h = bh % H;
  const int rows = K / kGroups;
  float S[kMaxRows];
  const std::int64_t sbase = static_cast<std::int64_t>(bh) * K * V;
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r)
    S[r] = (r < rows && h0) ? h0[sbase + static_cast<std::int64_t>(r * kGroups + lane16) * V + j] : 0.0f;
  const std::int64_t first = seq_start(cu, b, T);  // sequence b's tokens (varlen: cu)
  const int len = seq_len(cu, b, T);
  for (int t = 0; t < len; ++t) {
    const std::int64_t row = (first + t) * H + h;
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
      ks[i] = Elem<E>::to_float(k[row * K + i]);
      ws[i] = Elem<E>::to_float((w ? w : k)[row * K + i]);
      qs[i] = Elem<E>::to_float(q[row * K + i]);
      if constexpr (D == Decay::per_key) ds[i] = expf(g[row * K + i]);
    }
    if (threadIdx.x < kCols) vs[threadIdx.x] = Elem<E>::to_float(v[row * V + blockIdx.x * kCols + threadIdx.x]);
    if (threadIdx.x == 0) {
      if constexpr (D == Decay::scalar) ds[0] = expf(g[row]);
      bs = Elem<E>::to_float(beta[row]);
    }
    __syncthreads();
    float beta_t = bs;
    if (kaczmarz) {  // KLA-Z eq. (3), computed as in the chunk kernel (fp32, stored in E)
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
    const float delta = beta_t * (vs[col] - sum16(u));
    float y = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r)
      if (r < rows) {
        const int i = r * kGroups + lane16;
        S[r] = fmaf(ws[i], delta, S[r]);
        y = fmaf(S[r], qs[i], y);
      }
    y = sum16(y);
    if (lane16 == 0) o[row * V + j] = Elem<E>::from_float(scale * y);
    __syncthreads();
  }
  if (ht) {
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r)
      if (r < rows) ht[sbase + static_cast<std::int64_t>(r * kGroups + lane16) * V + j] = S[r];
  }
}

template <class E, Decay D>
void launch(const DeltaArgs& a) {
  const dim3 grid(a.V / kCols, static_cast<unsigned>(a.B * a.H));
  recurrent_kernel<E, D><<<grid, kCols * kGroups, 0, static_cast<cudaStream_t>(a.stream)>>>(
      a.B, a.T, a.H, a.K, a.V, static_cast<const E*>(a.q), static_cast<const E*>(a.k), static_cast<const E*>(a.w),
      static_cast<const E*>(a.v), static_cast<const E*>(a.beta), a.g, a.h0, a.ht, static_cast<E*>(a.o), a.scale,
      a.kaczmarz, a.kaczmarz_eps, a.cu_seqlens);
  TTR_CUDA_CHECK_LAUNCH("recurrent_kernel");
}

template <class E>
void launch_decay(const DeltaArgs& a) {
  switch (a.decay) {
    case Decay::none: return launch<E, Decay::none>(a);
    case Decay::scalar: return launch<E, Decay::scalar>(a);
    case Decay::per_key: return launch<E, Decay::per_key>(a);
  }
}

}  // namespace

void delta_sequential_forward(const DeltaArgs& a) {
  validate(a);
  if (a.dtype == DType::bf16) launch_decay<__nv_bfloat16>(a);
  else launch_decay<float>(a);
}

}  // namespace ttr::gpu
