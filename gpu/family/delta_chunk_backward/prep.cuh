// Chunk backward, stage 3 (grid chunks × B·H): the two operands of the output
// O = (Q ⊙ e^{b}) S_0 + M Δ that the backward state pass reads,
//   M  = narrow([Q Kᵀ ⊙ Γ]_{s ≤ t}),  Γ_ts = e^{b_t − b_s}   (the masked scores; K the write keys)
//   QD = narrow(Q ⊙ e^{b})                                     (the decayed queries)
// with the forward's operations (delta_chunk_bf16.cuh, output stage), so the
// same bits. Per-key decay forms M pair by pair (no e^{+b} factoring), as the
// reference (reference/family/chunk_common.hpp: masked_decayed_products).
#pragma once

#include "gpu/family/delta_chunk_backward/common.cuh"

namespace ttr::gpu::chunk_bwd {

template <class E>
inline std::size_t prep_smem(const Shape& s) {
  return 2 * tile_bytes<E>(kChunk, s.K) + tile_bytes<float>(1, kChunk * s.Kg);
}

template <class E, Decay D>
__global__ void __launch_bounds__(kThreads) prep(Args<E> a, Work w) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Shape& s = a.s;
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0), K = s.K, Kg = s.Kg, ldk = padded_ld<E>(K);
  const Lane L = lane_of();
  SmemArena arena{smem};
  E* qt = arena.take<E>(kChunk, K);
  E* kt = arena.take<E>(kChunk, K);
  float* bg = arena.take<float>(1, kChunk * Kg);  // flat [t][col]
  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0;
  load_rows_async(qt, ldk, a.q + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows_async(kt, ldk, a.w + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);  // write keys
  if constexpr (D != Decay::none) load_flat_async(bg, w.fwd.G + wrow * Kg, kChunk * Kg);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  // QD = narrow(Q ⊙ e^{b}), a bf16/fp32 pair per thread step.
  E* QD = static_cast<E*>(w.QD) + wrow * K;
  for (int i = 2 * threadIdx.x; i < kChunk * K; i += 2 * blockDim.x) {
    const int t = i / K, d = i % K;
    float2 x = ld_pair(qt + t * ldk + d);
    if constexpr (D == Decay::scalar) {
      const float f = expf(bg[t]);
      x.x *= f, x.y *= f;
    }
    if constexpr (D == Decay::per_key) x.x *= expf(bg[t * K + d]), x.y *= expf(bg[t * K + d + 1]);
    st_pair(QD + i, x.x, x.y);
  }
  // M: warp w the row strip 16(w % 4), column units w / 4 and w / 4 + 2; units
  // above the diagonal are zeros.
  E* M = static_cast<E*>(w.M) + wrow * kChunk;
  const int m0 = 16 * (L.warp % 4);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int n0 = 16 * (L.warp / 4 + 2 * i);
    Unit acc;
    zero(acc);
    if (D != Decay::per_key && n0 <= m0)
      for (int k0 = 0; k0 < K; k0 += 16) mma16<false, true>(acc, qt, ldk, m0, kt, ldk, n0, k0);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int hlf = 0; hlf < 2; ++hlf) {
        const int t = unit_row(L, m0, 2 * hlf), col = unit_col(L, n0, j, 0);
        float x[2];
#pragma unroll
        for (int o = 0; o < 2; ++o) {
          const int sc = col + o;
          float v = 0.0f;
          if (sc <= t) {
            if constexpr (D == Decay::per_key) {
              for (int d = 0; d < K; ++d)
                v = fmaf(Elem<E>::to_float(qt[t * ldk + d]) * Elem<E>::to_float(kt[sc * ldk + d]),
                         expf(bg[t * K + d] - bg[sc * K + d]), v);
            } else {
              v = acc[j][2 * hlf + o];
              if constexpr (D == Decay::scalar) v *= expf(bg[t] - bg[sc]);
            }
          }
          x[o] = v;
        }
        st_pair(M + t * kChunk + col, x[0], x[1]);
      }
  }
}

}  // namespace ttr::gpu::chunk_bwd
