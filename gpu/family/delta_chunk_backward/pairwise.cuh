// Per-key decay (KDA) in the chunk backward: the pairwise products
// P_ts = Σ_d X_td Y_sd e^{b_td − b_sd} over the causal pairs cannot be factored
// into a matrix product without e^{+b} (which overflows), so, as the forward and
// the reference (reference/family/chunk_common.hpp, masked_decayed_products and
// its backward in delta_chunk_backward.hpp), they run pair by pair in fp32, a
// thread per output element. X, Y: 64-row E tiles; b: the chunk's cumulative
// gates in global memory, [t][K] fp32.
#pragma once

#include "gpu/family/delta_chunk_backward/common.cuh"

namespace ttr::gpu::chunk_bwd {

__device__ inline bool causal(int t, int s, bool strict) { return s < t || (!strict && s == t); }

// out_ts = P_ts on the causal pairs, 0 elsewhere (fp32, leading dimension ldo).
template <class E>
__device__ void pairwise_products(const E* X, const E* Y, int ld, const float* b, int K, bool strict, float* out,
                                  int ldo) {
  for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
    const int t = i / kChunk, s = i % kChunk;
    float acc = 0.0f;
    if (causal(t, s, strict))
      for (int d = 0; d < K; ++d)
        acc = fmaf(Elem<E>::to_float(X[t * ld + d]) * Elem<E>::to_float(Y[s * ld + d]), expf(b[t * K + d] - b[s * K + d]),
                   acc);
    out[t * ldo + s] = acc;
  }
}

// Given dP (fp32, zero off the causal pairs), for the key columns d = kb0 + i,
// i < kw (X, Y tiles hold those columns at i): with e = e^{b_td − b_sd},
//   dX_ti += Σ_s dP_ts e Y_si,  dY_ti += Σ_t' dP_t't e' X_t'i,
//   db_ti += Σ_s dP_ts e X_ti Y_si − Σ_t' dP_t't e' X_t'i Y_ti   (e' = e^{b_t'd − b_td})
// into fp32 tiles dX, dY of leading dimension ldf and db of leading dimension
// lddb (shared or global memory). The diagonal pair s = t (strict = false) has
// e = 1 and its two db terms are the same product: they cancel exactly and are not
// formed (formed, the second fmaf would return the first's rounding error, a
// residue where db is exactly 0: one token from a zero state; GKA's gates had that
// defect, docs/gpu-gka.md). Ends with a barrier. `unmasked`: the mutant
// backward-gate-exp-unmasked, e formed for every pair and the causal mask applied
// by multiplying (inf·0 = NaN once a chunk's gates sum past exp's range).
template <class E>
__device__ void pairwise_backward(const E* X, const E* Y, int ld, const float* b, int K, int kb0, int kw, bool strict,
                                  const float* dP, int ldp, float* dX, float* dY, int ldf, float* db, int lddb,
                                  bool unmasked = false) {
  for (int e = threadIdx.x; e < kChunk * kw; e += blockDim.x) {
    const int t = e / kw, i = e % kw, d = kb0 + i;
    const float xt = Elem<E>::to_float(X[t * ld + i]), yt = Elem<E>::to_float(Y[t * ld + i]), bt = b[t * K + d];
    float ax = 0.0f, ay = 0.0f, ab = 0.0f;
    for (int s = 0; s < kChunk; ++s) {
      const float bs = b[s * K + d];
      if (unmasked) {
        const float m1 = causal(t, s, strict) ? 1.0f : 0.0f, m2 = causal(s, t, strict) ? 1.0f : 0.0f;
        const float de1 = dP[t * ldp + s] * expf(bt - bs) * m1, de2 = dP[s * ldp + t] * expf(bs - bt) * m2;
        const float ys = Elem<E>::to_float(Y[s * ld + i]), xs = Elem<E>::to_float(X[s * ld + i]);
        ax = fmaf(de1, ys, ax), ab += de1 * xt * ys;
        ay = fmaf(de2, xs, ay), ab -= de2 * xs * yt;
        continue;
      }
      if (causal(t, s, strict)) {
        const float de = dP[t * ldp + s] * expf(bt - bs), ys = Elem<E>::to_float(Y[s * ld + i]);
        ax = fmaf(de, ys, ax);
        if (s != t) ab += de * xt * ys;
      }
      if (causal(s, t, strict)) {
        const float de = dP[s * ldp + t] * expf(bs - bt), xs = Elem<E>::to_float(X[s * ld + i]);
        ay = fmaf(de, xs, ay);
        if (s != t) ab -= de * xs * yt;
      }
    }
    dX[t * ldf + i] += ax;
    dY[t * ldf + i] += ay;
    db[t * lddb + i] += ab;
  }
  __syncthreads();
}

}  // namespace ttr::gpu::chunk_bwd
