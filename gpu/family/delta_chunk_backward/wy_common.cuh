// What the two wy stages share (delta_chunk_backward/wy.cuh on mma.sync, and
// delta_wy_wgmma_sm90a.cu on Hopper's warpgroup MMA): the catalogued bugs they read,
// the gradients of a chunk the floor(T/64) grid leaves out, and the scalar gate's dg.
#pragma once

#include "gpu/family/delta_chunk_backward/common.cuh"

namespace ttr::gpu::chunk_bwd {

// The mutants read in wy (gpu/core/mutant.cuh; reference/family/delta_chunk_backward.hpp).
struct WyMutants {
  bool dk_wy_term, dk_decayed_key, ut_transposed, offblock, exp_unmasked, dg_exclusive;
  float dbeta_sign;
};
__device__ inline WyMutants wy_mutants(Mutant m) {
  return {!mutated(m, Mutant::dk_wy_term_dropped),
          !mutated(m, Mutant::dk_undecayed_key),
          mutated(m, Mutant::ut_adjoint_transposed),
          !mutated(m, Mutant::wy_backward_offblock_dropped),
          mutated(m, Mutant::backward_gate_exp_unmasked),
          mutated(m, Mutant::dg_revcumsum_exclusive),
          mutated(m, Mutant::dbeta_sign_flipped) ? -1.0f : 1.0f};
}

// Mutant backward-last-partial-chunk-dropped: outside the floor(T/64) grid the
// chunk's c rows of gradients stay 0 (row0: its first token's row, rs: the row stride).
template <class E, Decay D, bool OWN_W>
__device__ inline void wy_zero_chunk(const Args<E>& a, std::int64_t row0, std::int64_t rs, int c) {
  const int K = a.s.K, V = a.s.V;
  for (int e = threadIdx.x; e < c * V; e += blockDim.x) a.dv[(row0 + (e / V) * rs) * V + e % V] = Elem<E>::from_float(0.0f);
  for (int e = threadIdx.x; e < c * K; e += blockDim.x) {
    put_grad(a.dk_out, a.out.dk, (row0 + (e / K) * rs) * K + e % K, 0.0f);
    if constexpr (OWN_W) a.out.dw[(row0 + (e / K) * rs) * K + e % K] = 0.0f;
  }
  if constexpr (D != Decay::none)  // (no dg output without decay)
    for (int e = threadIdx.x; e < c * a.s.Kg; e += blockDim.x) a.out.dg[(row0 + (e / a.s.Kg) * rs) * a.s.Kg + e % a.s.Kg] = 0.0f;
  for (int t = threadIdx.x; t < c; t += blockDim.x) put_grad(a.dbeta_out, a.out.dbeta, row0 + t * rs, 0.0f);
}

// The scalar gate's dg: the chunk-local reverse cumulative sum of db, stage 5's
// partials (w.dbp, in key-block order) first, then the row sums rowp [2][64] less the
// column sums colp [4][64]; dbrow [64] scratch. Ends with thread 0 writing dg.
template <class E>
__device__ inline void wy_scalar_dg(const Args<E>& a, const Work& w, int bh, int t0, std::int64_t row0, std::int64_t rs,
                                    int c, const float* rowp, const float* colp, float* dbrow, bool dg_exclusive) {
  const Shape& s = a.s;
  __syncthreads();
  if (threadIdx.x < kChunk) {
    const int t = threadIdx.x;
    float x = 0.0f;
    for (int kbi = 0; kbi < w.NKB; ++kbi) x += w.dbp[(static_cast<std::int64_t>(kbi) * s.B * s.H + bh) * s.Tp + t0 + t];
    x += rowp[t] + rowp[kChunk + t];
    x -= colp[t] + colp[kChunk + t] + colp[2 * kChunk + t] + colp[3 * kChunk + t];
    dbrow[t] = x;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float run = 0.0f;
    for (int t = kChunk - 1; t >= 0; --t) {  // mutant dg-revcumsum-exclusive: written before adding
      if (dg_exclusive && t < c) a.out.dg[row0 + t * rs] = run;
      run += dbrow[t];
      if (!dg_exclusive && t < c) a.out.dg[row0 + t * rs] = run;
    }
  }
}

}  // namespace ttr::gpu::chunk_bwd
