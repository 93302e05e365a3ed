// Chunk backward, stage 4 (grid V/BV × B·H, sequential over the chunks, last
// first): the backward state pass (FLA's chunk_gated_delta_rule_bwd_dhu). The
// state gradient's V columns are independent, as the state's are in the forward
// (dΔ's column j reads only column j of dS_end, and dS_0's column j only dΔ's
// and dO's column j), so the block owns BV columns of dS for one head, SPLIT·K/16
// warps, warp w the rows 16(w mod K/16) .. +15 of the columns' part ⌊w / (K/16)⌋
// (of SPLIT) as mma accumulators for the whole pass. Two warps a strip (bf16 at
// K = V = 128, BV = 32: 16 warps) give the scheduler twice the warps to hide a
// chunk's latency chain with (ncu on 8: 0.42 eligible of 2 warps a scheduler).
// Per chunk, with dS = dS_end in fp32 (reference/family/delta_chunk_backward.hpp):
//   rowdot_i = Σ_j dS_ij S_0,ij          (fp32 × the stored, narrowed state: the gate
//                                         term db_last += e^{b_last} rowdot, summed by dqkwg)
//   dH = narrow(dS)                      (dS_end as an operand, stored: FLA's dh)
//   dΔ = narrow(scale·Mᵀ dO + (W ⊙ e^{b_last − b}) dH)       (stored: FLA's dv2)
//   dS ← Diag(e^{b_last}) dS + scale·(Q ⊙ e^{b})ᵀ dO − Wᵀ dΔ  (dS_0, the next chunk's dS_end)
// and at the end dh0 = dS. Barriers: two per chunk. The tiles of the next
// stages − 1 chunks load by cp.async while this one computes, so a chunk's
// loads have stages − 1 chunks of compute to land in: the pass has one block a
// multiprocessor, and its W, W ⊙ e^{b_last−b}, Q ⊙ e^b (a head's are 12 MB at
// T = 16384, the batch's beyond L2) come from HBM. Three stages where shared
// memory holds them (bf16 at K = V = 128: 215 424 bytes), else two, else one.
#pragma once

#include "gpu/family/delta_chunk_backward/common.cuh"

namespace ttr::gpu::chunk_bwd {

// Per stage: W, WD, QD (64 × K), M (64 × 64), dO (64 × BV), the b_last gates.
template <class E, Decay D>
inline std::size_t dstate_stage_bytes(const Shape& s, int bv) {
  return 3 * tile_bytes<E>(kChunk, s.K) + tile_bytes<E>(kChunk, kChunk) + tile_bytes<E>(kChunk, bv) +
         tile_bytes<float>(1, D == Decay::per_key ? s.K : 4);
}
// split > 1: the partial row sums handed from one warp of a strip to the next.
template <class E, Decay D>
inline std::size_t dstate_smem(const Shape& s, int bv, int stages, int split = 1) {
  return tile_bytes<E>(s.K, bv) + tile_bytes<E>(kChunk, bv) + (split > 1 ? tile_bytes<float2>(s.K / 16, 32) : 0) +
         stages * dstate_stage_bytes<E, D>(s, bv);
}

// KV: K = V = KV known at compile time (0: the shape's, at run time). SPLIT (1 or 2):
// warps a 16-row strip of the state, each owning BV/SPLIT of the columns.
template <class E, Decay D, int BV, int KV = 0, int SPLIT = 1>
__global__ void __launch_bounds__(SPLIT* kThreads) dstate_pass(Args<E> a, Work w, int stages) {
  static_assert(SPLIT == 1 || SPLIT == 2, "one or two warps a strip");
  static_assert(BV % (16 * SPLIT) == 0, "whole 16-column units a warp");
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int NU = BV / 16 / SPLIT;  // 16-column units of a warp
  const Shape& s = a.s;
  const int tile = blockIdx.x, j0 = tile * BV, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int K = KV ? KV : s.K, V = KV ? KV : s.V, ldk = padded_ld<E>(K), ldb = padded_ld<E>(BV);
  constexpr int ldm = padded_ld<E>(kChunk);
  const Lane L = lane_of();
  const int warps = blockDim.x / 32, strip = L.warp % (K / 16), part = L.warp / (K / 16);
  const int r0 = 16 * strip + L.g, r1 = r0 + 8, c0 = part * 16 * NU;  // c0: this warp's first column
  const int gn = D == Decay::per_key ? K : 4;
  SmemArena arena{smem};
  E* dse = arena.take<E>(K, BV);      // dH of this chunk, the operand of (W ⊙ e^{b_last−b}) dH
  E* dDt = arena.take<E>(kChunk, BV);  // dΔ, the operand of Wᵀ dΔ
  // SPLIT = 2: the first part's fmaf chains of rowdot, per (strip, lane), continued by the second.
  [[maybe_unused]] float2* rdp = SPLIT > 1 ? arena.take<float2>(K / 16, 32) : nullptr;
  unsigned char* stage0 = arena.p;
  E* Wb0 = arena.take<E>(kChunk, K);
  E* WDb0 = arena.take<E>(kChunk, K);
  E* QDb0 = arena.take<E>(kChunk, K);
  E* Mb0 = arena.take<E>(kChunk, kChunk);
  E* dOb0 = arena.take<E>(kChunk, BV);
  float* gb0 = arena.take<float>(1, gn);
  const int stride = static_cast<int>(arena.p - stage0);  // bytes, a multiple of 128
  auto at = [&](auto* p0, int buf) {
    return reinterpret_cast<decltype(p0)>(reinterpret_cast<unsigned char*>(p0) + buf * stride);
  };
  const std::int64_t wbase = static_cast<std::int64_t>(bh) * s.Tp;
  const E* Wg = static_cast<const E*>(w.fwd.W) + wbase * K;
  const E* WDg = static_cast<const E*>(w.fwd.WD) + wbase * K;
  const E* QDg = static_cast<const E*>(w.QD) + wbase * K;
  const E* Mg = static_cast<const E*>(w.M) + wbase * kChunk;
  const float* Gg = w.fwd.G + wbase * s.Kg;
  const int len = s.len(b), NT = s.chunks(b);  // this sequence's chunks (varlen)
  // The buffer of chunk n: stages is 1, 2 or 3, so no run-time integer division (twice a chunk).
  auto buffer_of = [stages](int n) { return stages == 3 ? n % 3 : stages == 2 ? n & 1 : 0; };
  auto prefetch = [&](int n) {
    const int t0 = n * kChunk, c = min(kChunk, len - t0), buf = buffer_of(n);
    const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
    load_rows_async(at(Wb0, buf), ldk, Wg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
    load_rows_async(at(WDb0, buf), ldk, WDg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
    load_rows_async(at(QDb0, buf), ldk, QDg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
    load_rows_async(at(Mb0, buf), ldm, Mg + static_cast<std::int64_t>(t0) * kChunk, kChunk, kChunk, kChunk, kChunk);
    load_rows_async(at(dOb0, buf), ldb, a.do_ + row0 * V + j0, static_cast<std::int64_t>(s.H) * V, kChunk, c, BV);
    if constexpr (D == Decay::per_key) load_flat_async(at(gb0, buf), Gg + static_cast<std::int64_t>(t0 + kChunk - 1) * K, K);
    if constexpr (D == Decay::scalar) load_flat_async(at(gb0, buf), Gg + t0 + kChunk - 4, 4);
    cp_async_commit();
  };

  // dS = ∂L/∂S_T: dht as a 16-bit input (narrowed), or zero.
  const std::int64_t sbase = static_cast<std::int64_t>(bh) * K * V + j0;
  float dS[NU][2][4];
  // The stored chunk-initial state narrow(S_0), this lane's elements as raw pairs
  // (rows r0 and r1): loaded a chunk ahead and converted only where the row sums
  // read it, so that the loads have the chunk's compute to land in.
  [[maybe_unused]] RawPair<E> S0[NU][2][2];
  auto for_each = [&](auto&& f) {  // f(u, j, e, row, column in the tile)
#pragma unroll
    for (int u = 0; u < NU; ++u)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) f(u, j, e, e < 2 ? r0 : r1, c0 + 16 * u + 8 * j + 2 * L.q + e % 2);
  };
  // mutant dht-ignored: the pass starts from zero whatever dht holds.
  const bool use_dht = a.dht && !mutated(a.mutant, Mutant::dht_ignored);
  for_each([&](int u, int j, int e, int r, int col) {
    dS[u][j][e] = use_dht ? narrow<E>(a.dht[sbase + static_cast<std::int64_t>(r) * V + col]) : 0.0f;
  });
  const E* Hs = static_cast<const E*>(w.fwd.Hs) + static_cast<std::int64_t>(bh) * s.NT * K * V + j0;
  auto load_state = [&](int n) {  // chunk n's stored state, this lane's pairs
    if constexpr (D != Decay::none) {
      const E* Hn = Hs + static_cast<std::int64_t>(n) * K * V;
#pragma unroll
      for (int u = 0; u < NU; ++u)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int col = c0 + 16 * u + 8 * j + 2 * L.q;
          S0[u][j][0] = ld_pair_raw(Hn + static_cast<std::int64_t>(r0) * V + col);
          S0[u][j][1] = ld_pair_raw(Hn + static_cast<std::int64_t>(r1) * V + col);
        }
    }
  };
  E* dHg = static_cast<E*>(w.dH) + static_cast<std::int64_t>(bh) * s.NT * K * V + j0;
  E* dDg = static_cast<E*>(w.dD) + wbase * V + j0;
  float* rowdot = w.rowdot + (static_cast<std::int64_t>(bh) * s.NT * w.NVT + tile) * K;

  // mutant backward-last-partial-chunk-dropped: the pass starts at chunk ⌊T/64⌋ − 1,
  // dht entering it undecayed (the stages after leave the dropped chunk's rows 0).
  const int first = chunk_dropped(a, b, NT - 1) ? NT - 2 : NT - 1;
  // mutant dv-state-gradient-late: dΔ's state term reads the following chunk's dH
  // (zero for the last chunk), re-read from global where this lane stored it.
  const bool dv_late = mutated(a.mutant, Mutant::dv_state_gradient_late);
  // Three stages: one group committed per chunk ahead (empty past chunk 0), so that
  // waiting for all but the newest group is waiting for this chunk's.
  if (first >= 0) {
    prefetch(first);
    if (stages == 3) first > 0 ? prefetch(first - 1) : cp_async_commit();
    load_state(first);
  }
  // rowdot_i = Σ_j dS_ij S_0,ij over this tile's columns (in fp32), one fmaf chain a
  // lane over its columns in order (the second part continuing the first's), then over the quad.
  auto chain = [&](float& p0, float& p1) {
#pragma unroll
    for (int u = 0; u < NU; ++u)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float2 x0 = unpack_pair<E>(S0[u][j][0]), x1 = unpack_pair<E>(S0[u][j][1]);
        p0 = fmaf(dS[u][j][0], x0.x, p0), p0 = fmaf(dS[u][j][1], x0.y, p0);
        p1 = fmaf(dS[u][j][2], x1.x, p1), p1 = fmaf(dS[u][j][3], x1.y, p1);
      }
  };
  auto finish_rowdot = [&](int n, float p0, float p1) {
    p0 = quad_sum(p0), p1 = quad_sum(p1);
    if (L.q == 0) {
      rowdot[static_cast<std::int64_t>(n) * w.NVT * K + r0] = p0;
      rowdot[static_cast<std::int64_t>(n) * w.NVT * K + r1] = p1;
    }
    if (n > 0) load_state(n - 1);
  };
  for (int n = first; n >= 0; --n) {
    const int t0 = n * kChunk, buf = buffer_of(n);
    // The second part's chain waits for the first's partial sums (after the barrier below;
    // rdp is rewritten only after the next barrier, which the second part passes after reading it).
    if constexpr (D != Decay::none) {
      float p0 = 0.0f, p1 = 0.0f;
      if (part == 0) {
        chain(p0, p1);
        if constexpr (SPLIT == 1) finish_rowdot(n, p0, p1);
        else {
          rdp[strip * 32 + threadIdx.x % 32] = make_float2(p0, p1);
          if (n > 0) load_state(n - 1);
        }
      }
    }
    // dH = narrow(dS), here (dse was last read before the previous chunk's second
    // barrier), and stored from dse after the barrier, 16 bytes a lane (stored from
    // the accumulators, a quad of lanes writes half a sector per store).
    E* dHn = dHg + static_cast<std::int64_t>(n) * K * V;
#pragma unroll
    for (int u = 0; u < NU; ++u)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = c0 + 16 * u + 8 * j + 2 * L.q;
        if (dv_late) {  // dse holds chunk n + 1's dH: this chunk's goes out from the accumulators
          st_pair(dHn + static_cast<std::int64_t>(r0) * V + col, dS[u][j][0], dS[u][j][1]);
          st_pair(dHn + static_cast<std::int64_t>(r1) * V + col, dS[u][j][2], dS[u][j][3]);
          const E* later = dHn + static_cast<std::int64_t>(K) * V;  // chunk n + 1's, stored by this lane
          const float2 x0 = n + 1 < NT ? ld_pair(later + static_cast<std::int64_t>(r0) * V + col) : float2{};
          const float2 x1 = n + 1 < NT ? ld_pair(later + static_cast<std::int64_t>(r1) * V + col) : float2{};
          st_pair(dse + r0 * ldb + col, x0.x, x0.y);
          st_pair(dse + r1 * ldb + col, x1.x, x1.y);
        } else {
          st_pair(dse + r0 * ldb + col, dS[u][j][0], dS[u][j][1]);
          st_pair(dse + r1 * ldb + col, dS[u][j][2], dS[u][j][3]);
        }
      }
    if (stages == 3) cp_async_wait<1>();
    else cp_async_wait<0>();
    __syncthreads();  // chunk n's tiles and dH visible; chunk n + 1's buffer free
    if (stages == 3) n > 1 ? prefetch(n - 2) : cp_async_commit();
    if (stages == 2 && n > 0) prefetch(n - 1);
    if (!dv_late) store_rows(dHn, V, dse, ldb, K, BV);
    if constexpr (SPLIT > 1 && D != Decay::none)
      if (part == 1) {
        float2 p = rdp[strip * 32 + threadIdx.x % 32];
        chain(p.x, p.y);
        finish_rowdot(n, p.x, p.y);
      }
    const E* Wt = at(Wb0, buf);
    const E* WDt = at(WDb0, buf);
    const E* QDt = at(QDb0, buf);
    const E* Mt = at(Mb0, buf);
    const E* dOt = at(dOb0, buf);
    // dΔ = narrow(scale·Mᵀ dO + (W ⊙ e^{b_last − b}) dH), 64 × BV in 16 × 16 units.
    // Mᵀ is upper triangular: k-steps s0 < m0 are zeros.
    for (int uu = L.warp; uu < 4 * (BV / 16); uu += warps) {
      const int m0 = 16 * (uu % 4), n0 = 16 * (uu / 4);
      Unit acc;
      zero(acc);
      for (int s0 = m0; s0 < kChunk; s0 += 16) mma16<true, false>(acc, Mt, ldm, m0, dOt, ldb, n0, s0);
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] *= a.scale;
      for (int k0 = 0; k0 < K; k0 += 16) mma16<false, false>(acc, WDt, ldk, m0, dse, ldb, n0, k0);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int ta = m0 + L.g, tb = ta + 8, col = n0 + 8 * j + 2 * L.q;
        st_pair(dDt + ta * ldb + col, acc[j][0], acc[j][1]);
        st_pair(dDt + tb * ldb + col, acc[j][2], acc[j][3]);
      }
    }
    // dS ← Diag(e^{b_last}) dS + scale·(Q ⊙ e^{b})ᵀ dO (independent of dΔ).
    // mutant dh-pass-undecayed: the chunk's decay Diag(e^{b_last}) forgotten.
    if (D != Decay::none && !mutated(a.mutant, Mutant::dh_pass_undecayed)) {
      const float* gl = at(gb0, buf);
      const float f0 = expf(gl[D == Decay::per_key ? r0 : 3]), f1 = expf(gl[D == Decay::per_key ? r1 : 3]);
#pragma unroll
      for (int u = 0; u < NU; ++u)
#pragma unroll
        for (int j = 0; j < 2; ++j) dS[u][j][0] *= f0, dS[u][j][1] *= f0, dS[u][j][2] *= f1, dS[u][j][3] *= f1;
    }
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      Unit tmp;
      zero(tmp);
      for (int s0 = 0; s0 < kChunk; s0 += 16) mma16<true, false>(tmp, QDt, ldk, 16 * strip, dOt, ldb, c0 + 16 * u, s0);
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dS[u][j][e] = fmaf(a.scale, tmp[j][e], dS[u][j][e]);
    }
    __syncthreads();  // dΔ visible
    // dΔ to global memory from its tile (read here and by Wᵀ dΔ below; next written
    // after the following chunk's first barrier).
    store_rows(dDg + static_cast<std::int64_t>(t0) * V, V, dDt, ldb, kChunk, BV);
    // dS −= Wᵀ dΔ.
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      Unit tmp;
      zero(tmp);
      for (int s0 = 0; s0 < kChunk; s0 += 16) mma16<true, false>(tmp, Wt, ldk, 16 * strip, dDt, ldb, c0 + 16 * u, s0);
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) dS[u][j][e] -= tmp[j][e];
    }
    if (stages == 1 && n > 0) {
      __syncthreads();  // every warp is done with the single buffer
      prefetch(n - 1);
    }
  }
  // mutant dh0-not-written: zeros where dh0 belongs.
  const bool dh0_zero = mutated(a.mutant, Mutant::dh0_not_written);
  if (a.dh0)
    for_each([&](int u, int j, int e, int r, int col) {
      a.dh0[sbase + static_cast<std::int64_t>(r) * V + col] = dh0_zero ? 0.0f : dS[u][j][e];
    });
}

}  // namespace ttr::gpu::chunk_bwd
