// PGDN's diagonal preconditioner on the device (PDN §3.3, the equation after
// (8), and eq. (9) as FLA computes it): the chunkwise form of
// reference/family/atk_chunk.hpp. The second moment A is a decayed prefix sum per
// key coordinate, so inside a chunk with initial A_0 and cumulative log decay b_t
//
//   A_t = Σ_{s ≤ t} e^{b_t − b_s} β_atk,s (k_s ⊙ k_s) + e^{b_t} A_0,
//   r_t = log(A_t + eps) − c_h,  k̃_t = exp(−log(x) · r_t/(1 + |r_t|)) ⊙ k_t.
//
// One block per (b, h), a thread per coordinate d, chunks in order; the 64×64
// factors e^{b_t − b_s} are formed once per chunk in shared memory and read by
// every thread as a broadcast; each thread keeps its column β_s k_s,d² of the
// chunk in registers and sums s ascending, as the CPU form's product does (the
// s-loop is unrolled over the whole chunk and predicated, not the t-loop:
// compile time stays seconds).
// Everything fp32 (k ⊙ k of a bf16 key is exact in fp32); k̃ stored in the dtype.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"
#include "gpu/core/seqs.cuh"

namespace ttr::gpu {
namespace {

constexpr int kChunk = 64, kMaxK = 128;

template <class EK, class E>
__global__ void __launch_bounds__(kMaxK) atk_kernel(AtkArgs a) {
  __shared__ float decay[kChunk][kChunk + 1];
  __shared__ float b[kChunk], bet[kChunk];
  const int bh = blockIdx.x, bb = bh / a.H, h = bh % a.H, d = threadIdx.x, K = a.K;
  const EK* k = static_cast<const EK*>(a.k);
  E* kt = static_cast<E*>(a.k_tilde);
  const float center = a.center[h];
  float state = (d < K && a.A0) ? a.A0[static_cast<std::int64_t>(bh) * K + d] : 0.0f;
  const std::int64_t first = seq_start(a.cu_seqlens, bb, a.T);  // sequence bb's tokens (varlen)
  const int len = seq_len(a.cu_seqlens, bb, a.T);
  for (int t0 = 0; t0 < len; t0 += kChunk) {
    const int c = min(kChunk, len - t0);
    const std::int64_t row0 = (first + t0) * a.H + h;
    __syncthreads();  // the previous chunk's reads of decay, b, bet are done
    if (d < kChunk) {
      b[d] = d < c ? a.g_atk[row0 + static_cast<std::int64_t>(d) * a.H] : 0.0f;
      bet[d] = d < c ? a.beta_atk[row0 + static_cast<std::int64_t>(d) * a.H] : 0.0f;
    }
    __syncthreads();
    if (d == 0) {  // chunk-local cumulative log decay, in token order
      float acc = 0.0f;
      for (int t = 0; t < kChunk; ++t) b[t] = acc += b[t];
    }
    __syncthreads();
    for (int i = d; i < kChunk * kChunk; i += blockDim.x) {
      const int t = i / kChunk, s = i % kChunk;
      decay[t][s] = s <= t ? expf(b[t] - b[s]) : 0.0f;
    }
    __syncthreads();
    if (d >= K) continue;
    float k2[kChunk];
#pragma unroll
    for (int s = 0; s < kChunk; ++s) {
      const float kd = s < c ? Elem<EK>::to_float(k[(row0 + static_cast<std::int64_t>(s) * a.H) * K + d]) : 0.0f;
      k2[s] = bet[s] * (kd * kd);
    }
    for (int t = 0; t < c; ++t) {
      float m = 0.0f;
#pragma unroll
      for (int s = 0; s < kChunk; ++s)  // s ≤ t only, in order; unrolled so k2 stays in registers
        if (s <= t) m = fmaf(decay[t][s], k2[s], m);
      const float At = m + expf(b[t]) * state;
      const float r = logf(At + a.eps) - center;
      const float sq = r / (1.0f + fabsf(r));
      const std::int64_t i = (row0 + static_cast<std::int64_t>(t) * a.H) * K + d;
      kt[i] = Elem<E>::from_float(expf(-(a.log_x * sq)) * Elem<EK>::to_float(k[i]));
      if (t == c - 1) state = At;  // the chunk-boundary state
    }
  }
  if (d < K && a.A_final) a.A_final[static_cast<std::int64_t>(bh) * K + d] = state;
}

template <class EK>
void launch(const AtkArgs& a) {
  auto stream = static_cast<cudaStream_t>(a.stream);
  const unsigned threads = static_cast<unsigned>((a.K + 31) / 32 * 32 < kChunk ? kChunk : (a.K + 31) / 32 * 32);
  if (a.dtype == DType::bf16) atk_kernel<EK, __nv_bfloat16><<<a.B * a.H, threads, 0, stream>>>(a);
  else atk_kernel<EK, float><<<a.B * a.H, threads, 0, stream>>>(a);
  TTR_CUDA_CHECK_LAUNCH("atk_kernel");
}

}  // namespace

void atk_write_keys(const AtkArgs& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("gpu atk_write_keys: " + m); };
  if (a.B < 1 || a.T < 1 || a.H < 1) fail("B, T and H must be at least 1");
  if (a.K < 1 || a.K > kMaxK) fail("K = " + std::to_string(a.K) + " (need 1 ≤ K ≤ 128)");
  if (!a.k || !a.g_atk || !a.beta_atk || !a.center || !a.k_tilde) fail("k, g_atk, beta_atk, center and k_tilde are required");
  if (a.key_dtype == DType::bf16) launch<__nv_bfloat16>(a);
  else launch<float>(a);
}

}  // namespace ttr::gpu
