// Chunk backward, stage 5 (grid key blocks × chunks × B·H; FLA's chunk_bwd_dqkwg):
// every gradient that reads the chunk-initial state S_0, dS_end or the output's
// score matrix, for the key columns d ∈ [kb0, kb0 + KB) of one chunk
// (reference/family/delta_chunk_backward.hpp, with Γ_ts = e^{b_t − b_s}):
//   d(Q ⊙ e^{b}) = scale·dO S_0ᵀ:   dq  = d(Q⊙e^b) ⊙ e^{b},       db_t += Σ_d d(Q⊙e^b) ⊙ (Q⊙e^b)
//   d(W ⊙ e^{b_last−b}) = Δ dHᵀ:    dw  = d(W⊙…) ⊙ e^{b_last−b},  db_t −= tw, db_last += Σ_t tw
//                                   (tw = d(W⊙…) ⊙ (W⊙…) summed over the keys)
//   dWy = narrow(−dΔ S_0ᵀ)          (stored, FLA's dw; the WY backward reads it)
//   dM = scale·dO Δᵀ on s ≤ t:      E2 = dM ⊙ Γ;  dq += E2 K;  dw += E2ᵀ Q;
//                                   db_t += Σ_s E2_ts (QKᵀ)_ts − Σ_t' E2_t't (QKᵀ)_t't
//   the state decay:                db_last += e^{b_last} Σ_i rowdot_i (stage 4's sums)
// Terms whose decay factor is e^0 (the last token's tw, the diagonal pairs s = t)
// enter db twice with opposite signs; they cancel exactly and are left out, so that
// a row whose dg is exactly 0 gets 0, not a rounding residue.
// K is the write key throughout (k, or the preconditioned layers' k̃).
// dq is final here (written narrowed); the write key's dw (fp32) and the gate
// partials go to the WY stage. The db_last terms are put on row 63: the chunk's
// padding rows carry zeros, so the reverse cumulative sum from row 63 equals the
// reference's from row c − 1. K blocks keep the tiles small (fp32 fits); with
// scalar decay each block's db is a partial over its keys (QKᵀ summed over them),
// added in block order by the WY stage. Per-key decay: dM's pairwise backward
// runs in fp32 loops (pairwise.cuh).
#pragma once

#include "gpu/family/delta_chunk_backward/common.cuh"
#include "gpu/family/delta_chunk_backward/pairwise.cuh"

namespace ttr::gpu::chunk_bwd {

// Key block width: 64 for bf16 (two blocks per head at K = 128), 32 for fp32
// (whose tiles are twice as wide in bytes).
template <class E>
constexpr int dqkwg_kb() {
  return std::is_same_v<E, float> ? 32 : 64;
}

// The region first holding S_0 and dH (K block × V), then the products of dM.
template <class E, Decay D>
__host__ __device__ inline std::size_t dqkwg_region(const Shape& s) {
  constexpr int KB = dqkwg_kb<E>();
  const std::size_t states = 2 * tile_bytes<E>(KB, s.V);
  const std::size_t wide = (std::is_same_v<E, float> ? 1 : 2) * tile_bytes<E>(kChunk, kChunk);
  const std::size_t pk = tile_bytes<float>(kChunk, kChunk) + 2 * tile_bytes<float>(kChunk, KB);
  const std::size_t later = D == Decay::per_key ? pk : wide;
  return states > later ? states : later;
}
template <class E, Decay D>
inline std::size_t dqkwg_smem(const Shape& s) {
  constexpr int KB = dqkwg_kb<E>();
  std::size_t b = 3 * tile_bytes<E>(kChunk, s.V) + dqkwg_region<E, D>(s) + 2 * tile_bytes<E>(kChunk, KB) +
                  tile_bytes<float>(1, kChunk) + tile_bytes<float>(1, 6 * kChunk + 16);
  if (D == Decay::per_key) b += tile_bytes<float>(kChunk, KB) + tile_bytes<float>(4, KB);
  return b;
}

// KV: K = V = KV known at compile time (0: the shape's, at run time).
template <class E, Decay D, int KV = 0>
__global__ void __launch_bounds__(kThreads) dqkwg(Args<E> a, Work w) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int KB = dqkwg_kb<E>(), NI = KB / 32;  // 64 × KB output: NI units per warp
  constexpr int ldq = padded_ld<E>(KB), ldc = padded_ld<E>(kChunk), ldp = padded_ld<float>(kChunk);
  constexpr int ldf = padded_ld<float>(KB);
  const Shape& s = a.s;
  const int K = KV ? KV : s.K, V = KV ? KV : s.V;
  const int kbi = blockIdx.x, kb0 = kbi * KB, kw = min(KB, K - kb0);
  const int n = blockIdx.y, bh = blockIdx.z, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0), ldv = padded_ld<E>(V);
  const Lane L = lane_of();
  const int m0 = 16 * (L.warp % 4), half = L.warp / 4, strip = L.warp % 4;
  SmemArena arena{smem};
  E* dOt = arena.take<E>(kChunk, V);
  E* Dt = arena.take<E>(kChunk, V);   // Δ
  E* dDt = arena.take<E>(kChunk, V);  // dΔ
  unsigned char* region = arena.p;
  arena.p += dqkwg_region<E, D>(s);
  E* s0t = reinterpret_cast<E*>(region);  // narrow(S_0) rows kb0.., all V
  E* dHt = reinterpret_cast<E*>(region + tile_bytes<E>(KB, V));
  E* qt = arena.take<E>(kChunk, KB);
  E* kt = arena.take<E>(kChunk, KB);
  float* bg = arena.take<float>(1, kChunk);           // scalar gates b_t
  float* red = arena.take<float>(1, 6 * kChunk + 16);  // rowp[2][64], colp[4][64], lastp[8], state term
  float* rowp = red;
  float* colp = red + 2 * kChunk;
  float* lastp = red + 6 * kChunk;
  float* dbt = nullptr;  // per key: db [64][KB] and the db_last column partials [4][KB]
  float* colpk = nullptr;
  if constexpr (D == Decay::per_key) dbt = arena.take<float>(kChunk, KB), colpk = arena.take<float>(4, KB);

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0;
  if (chunk_dropped(a, b, n)) {  // mutant: outside the floor(T/64) grid, dq stays 0
    for (int e = threadIdx.x; e < c * kw; e += blockDim.x)
      put_grad(a.dq_out, a.out.dq, (row0 + (e / kw) * static_cast<std::int64_t>(s.H)) * K + kb0 + e % kw, 0.0f);
    return;
  }
  const std::int64_t chunk_state = (static_cast<std::int64_t>(bh) * s.NT + n) * K * V;
  const std::int64_t rs = static_cast<std::int64_t>(s.H);
  load_rows_async(dOt, ldv, a.do_ + row0 * V, rs * V, kChunk, c, V);
  load_rows_async(Dt, ldv, static_cast<const E*>(w.fwd.D) + wrow * V, V, kChunk, c, V);
  load_rows_async(dDt, ldv, static_cast<const E*>(w.dD) + wrow * V, V, kChunk, c, V);
  load_rows_async(dHt, ldv, static_cast<const E*>(w.dH) + chunk_state + static_cast<std::int64_t>(kb0) * V, V, kw, kw, V);
  load_rows_async(qt, ldq, a.q + row0 * K + kb0, rs * K, kChunk, c, kw);
  load_rows_async(kt, ldq, a.w + row0 * K + kb0, rs * K, kChunk, c, kw);  // the write keys
  // narrow(S_0), as the state pass stored it.
  load_rows_async(s0t, ldv, static_cast<const E*>(w.fwd.Hs) + chunk_state + static_cast<std::int64_t>(kb0) * V, V, kw, kw,
                  V);
  if constexpr (D == Decay::scalar) load_flat_async(bg, w.fwd.G + wrow, kChunk);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const float* Gk = w.fwd.G + wrow * K;  // per-key gates [t][K] (global)
  auto gate = [&](int t, int d) {        // b_t (scalar) or b_td (per key), d the key index
    if constexpr (D == Decay::scalar) return bg[t];
    else if constexpr (D == Decay::per_key) return Gk[t * K + d];
    else return 0.0f;
  };
  // The mutants read here (gpu/core/mutant.cuh; reference/family/delta_chunk_backward.hpp).
  const bool dg_query_term = !mutated(a.mutant, Mutant::dg_query_term_dropped);
  const bool exp_unmasked = mutated(a.mutant, Mutant::backward_gate_exp_unmasked);
  const bool first_intra_dropped = mutated(a.mutant, Mutant::dq_first_token_intra_dropped);
  const float dq_factor = mutated(a.mutant, Mutant::dq_scale_twice)     ? a.scale
                          : mutated(a.mutant, Mutant::dq_scale_missing) ? 1.0f / a.scale
                                                                        : 1.0f;
  float dq[NI][2][4], dw[NI][2][4];
  [[maybe_unused]] float dbr[2] = {0.0f, 0.0f}, twsum = 0.0f;  // scalar: rows m0+g, m0+g+8; Σ tw
  [[maybe_unused]] float twcol[NI][2][2] = {};                 // per key: Σ_t tw per column
#pragma unroll
  for (int i = 0; i < NI; ++i) {
    const int n0 = 16 * (half + 2 * i);
    zero(dq[i]), zero(dw[i]);
    if (n0 >= kw) continue;
    // d(Q ⊙ e^b) = scale·dO S_0ᵀ → dq, db.
    Unit acc;
    zero(acc);
    for (int j0 = 0; j0 < V; j0 += 16) mma16<false, true>(acc, dOt, ldv, m0, s0t, ldv, n0, j0);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = unit_row(L, m0, e), i_ = unit_col(L, n0, j, e);
        const float dqd = a.scale * acc[j][e];
        const float eq = D == Decay::none ? 1.0f : expf(gate(t, kb0 + i_));
        dq[i][j][e] = dqd * eq;
        if constexpr (D != Decay::none) {
          const float qd = narrow<E>(Elem<E>::to_float(qt[t * ldq + i_]) * eq);
          // mutant dg-query-term-dropped: the query decay's q·dq term left out of db.
          if constexpr (D == Decay::scalar) {
            if (dg_query_term) dbr[e / 2] = fmaf(dqd, qd, dbr[e / 2]);
          } else {
            dbt[t * ldf + i_] = dg_query_term ? dqd * qd : 0.0f;
          }
        }
      }
    // d(W ⊙ e^{b_last − b}) = Δ dHᵀ → dw, db.
    zero(acc);
    for (int j0 = 0; j0 < V; j0 += 16) mma16<false, true>(acc, Dt, ldv, m0, dHt, ldv, n0, j0);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = unit_row(L, m0, e), i_ = unit_col(L, n0, j, e);
        const float ew = D == Decay::none ? 1.0f : expf(gate(kChunk - 1, kb0 + i_) - gate(t, kb0 + i_));
        dw[i][j][e] = acc[j][e] * ew;
        // The chunk's last token: e^{b_last − b_t} = 1, so its two db terms (−tw on
        // its row, +tw on the last) cancel exactly and are not formed; summed in
        // different orders (quad_sum, warp_sum) they left a rounding residue where dg
        // is exactly 0 (one token from a zero state).
        if constexpr (D != Decay::none) {
          const float tw = t == c - 1 ? 0.0f : acc[j][e] * narrow<E>(Elem<E>::to_float(kt[t * ldq + i_]) * ew);
          if constexpr (D == Decay::scalar) {
            dbr[e / 2] -= tw;
            twsum += tw;
          } else {
            dbt[t * ldf + i_] -= tw;
            twcol[i][j][e % 2] += tw;
          }
        }
      }
    // dWy = narrow(−dΔ S_0ᵀ), stored for the WY stage.
    zero(acc);
    for (int j0 = 0; j0 < V; j0 += 16) mma16<false, true>(acc, dDt, ldv, m0, s0t, ldv, n0, j0);
    E* dWy = static_cast<E*>(w.dWy) + wrow * K + kb0;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int ta = m0 + L.g, col = n0 + 8 * j + 2 * L.q;
      st_pair(dWy + static_cast<std::int64_t>(ta) * K + col, -acc[j][0], -acc[j][1]);
      st_pair(dWy + static_cast<std::int64_t>(ta + 8) * K + col, -acc[j][2], -acc[j][3]);
    }
  }
  __syncthreads();  // S_0 and dH no longer read: the region takes dM's products

  // dM = scale·dO Δᵀ on s ≤ t (units above the diagonal are zeros).
  const Wide<E> E2{reinterpret_cast<E*>(region), reinterpret_cast<E*>(region + tile_bytes<E>(kChunk, kChunk))};
  float* dPt = reinterpret_cast<float*>(region);  // per key: dM in fp32
  float* dXp = reinterpret_cast<float*>(region + tile_bytes<float>(kChunk, kChunk));
  float* dYp = reinterpret_cast<float*>(region + tile_bytes<float>(kChunk, kChunk) + tile_bytes<float>(kChunk, KB));
#pragma unroll
  for (int i2 = 0; i2 < 2; ++i2) {
    const int n0 = 16 * (half + 2 * i2);
    Unit acc, qk;
    zero(acc), zero(qk);
    if (n0 <= m0) {
      for (int j0 = 0; j0 < V; j0 += 16) mma16<false, true>(acc, dOt, ldv, m0, Dt, ldv, n0, j0);
      if constexpr (D == Decay::scalar)
        for (int d0 = 0; d0 < kw; d0 += 16) mma16<false, true>(qk, qt, ldq, m0, kt, ldq, n0, d0);
    }
    [[maybe_unused]] float pcol[2][2] = {};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int t = m0 + L.g + 8 * hf, col = n0 + 8 * j + 2 * L.q;
        float x[2];
#pragma unroll
        for (int o = 0; o < 2; ++o) {
          // E2 = dM ⊙ Γ (per key: dM), Γ formed on the causal pairs only: above the
          // diagonal b_t − b_s > 0 and e^{b_t − b_s} overflows once a chunk's gates sum
          // below −88.7, where inf·0 would be NaN (mutant backward-gate-exp-unmasked).
          const bool causal_pair = col + o <= t;
          const float dm = causal_pair ? a.scale * acc[j][2 * hf + o] : 0.0f;
          x[o] = D != Decay::scalar               ? dm
                 : causal_pair || exp_unmasked ? dm * expf(bg[t] - bg[col + o])
                                                  : 0.0f;
          if constexpr (D == Decay::scalar) {
            // The diagonal pair (Γ_tt = 1): its row and column terms cancel exactly.
            const float pair = col + o == t ? 0.0f : x[o] * qk[j][2 * hf + o];
            dbr[hf] += pair;
            pcol[j][o] += pair;
          }
        }
        if constexpr (D == Decay::per_key) st_pair(dPt + t * ldp + col, x[0], x[1]);
        else put_wide(E2, t * ldc + col, x[0], x[1]);
      }
    if constexpr (D == Decay::scalar)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int o = 0; o < 2; ++o) {
          const float v = group_sum(pcol[j][o]);
          if (L.g == 0) colp[strip * kChunk + n0 + 8 * j + 2 * L.q + o] = v;
        }
  }
  if constexpr (D == Decay::per_key) {
    for (int i = threadIdx.x; i < kChunk * ldf; i += blockDim.x) dXp[i] = 0.0f, dYp[i] = 0.0f;
  }
  __syncthreads();  // E2 (dM) visible
  // mutant dq-first-token-intra-dropped: row 0 of the chunk keeps dq's inter-chunk
  // part only (the lanes holding it, warps 0 and 4, g = 0, keep a copy).
  [[maybe_unused]] float dq_row0[NI][2][2];
  if constexpr (D != Decay::per_key) {
    // dq += E2 K (E2 lower triangular: k-steps past the strip are zeros); dw += E2ᵀ Q.
#pragma unroll
    for (int i = 0; i < NI; ++i) {
      const int n0 = 16 * (half + 2 * i);
      if (n0 >= kw) continue;
      if (first_intra_dropped)
#pragma unroll
        for (int j = 0; j < 2; ++j) dq_row0[i][j][0] = dq[i][j][0], dq_row0[i][j][1] = dq[i][j][1];
      for (int s0 = 0; s0 <= m0; s0 += 16) mma16_wa<false, false>(dq[i], E2, ldc, m0, kt, ldq, n0, s0);
      for (int s0 = m0; s0 < kChunk; s0 += 16) mma16_wa<true, false>(dw[i], E2, ldc, m0, qt, ldq, n0, s0);
      if (first_intra_dropped && m0 + L.g == 0)
#pragma unroll
        for (int j = 0; j < 2; ++j) dq[i][j][0] = dq_row0[i][j][0], dq[i][j][1] = dq_row0[i][j][1];
    }
  } else {
    pairwise_backward(qt, kt, ldq, Gk, K, kb0, kw, false, dPt, ldp, dXp, dYp, ldf, dbt, ldf, exp_unmasked);
  }

  // dq (final, narrowed: the reference writes it in the dtype), the write key's dw.
  float* dWk = w.dWk + wrow * K + kb0;
#pragma unroll
  for (int i = 0; i < NI; ++i) {
    const int n0 = 16 * (half + 2 * i);
    if (n0 >= kw) continue;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = unit_row(L, m0, e), i_ = unit_col(L, n0, j, e);
        float q_ = dq[i][j][e], w_ = dw[i][j][e];
        if constexpr (D == Decay::per_key) {
          if (!(first_intra_dropped && t == 0)) q_ += dXp[t * ldf + i_];
          w_ += dYp[t * ldf + i_];
        }
        if (dq_factor != 1.0f) q_ *= dq_factor;  // mutants dq-scale-twice, dq-scale-missing
        if (t < c) put_grad(a.dq_out, a.out.dq, (row0 + t * rs) * K + kb0 + i_, narrow<E>(q_));
        dWk[static_cast<std::int64_t>(t) * K + i_] = w_;
      }
  }
  if constexpr (D == Decay::none) return;

  // The gate partials. State decay: e^{b_last} Σ_i rowdot_i over this block's keys
  // (per key: per column), the tile sums in tile order.
  const float* rowdot = w.rowdot + (static_cast<std::int64_t>(bh) * s.NT + n) * w.NVT * K;
  auto state_sum = [&](int d) {
    float x = 0.0f;
    for (int tile = 0; tile < w.NVT; ++tile) x += rowdot[tile * K + d];
    return x;
  };
  if constexpr (D == Decay::scalar) {
    const float r0 = quad_sum(dbr[0]), r1 = quad_sum(dbr[1]), tws = warp_sum(twsum);
    if (L.q == 0) rowp[half * kChunk + m0 + L.g] = r0, rowp[half * kChunk + m0 + L.g + 8] = r1;
    if (threadIdx.x % 32 == 0) lastp[L.warp] = tws;
    if (L.warp == 0) {
      float x = 0.0f;
      for (int i = threadIdx.x; i < kw; i += 32) x += state_sum(kb0 + i);
      x = warp_sum(x);
      if (threadIdx.x == 0) lastp[8] = expf(bg[kChunk - 1]) * x;
    }
    __syncthreads();
    if (threadIdx.x < kChunk) {
      const int t = threadIdx.x;
      float v = rowp[t] + rowp[kChunk + t] - (colp[t] + colp[kChunk + t] + colp[2 * kChunk + t] + colp[3 * kChunk + t]);
      if (t == kChunk - 1) {
        float last = 0.0f;
        for (int i = 0; i < 8; ++i) last += lastp[i];
        v += last + lastp[8];
      }
      w.dbp[(static_cast<std::int64_t>(kbi) * s.B * s.H + bh) * s.Tp + t0 + t] = v;
    }
  } else {
    // Per key: the Σ_t tw column sums per strip, then row 63 gets them and the state term.
#pragma unroll
    for (int i = 0; i < NI; ++i) {
      const int n0 = 16 * (half + 2 * i);
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int o = 0; o < 2; ++o) {
          const float v = group_sum(twcol[i][j][o]);
          if (L.g == 0 && n0 < kw) colpk[strip * KB + n0 + 8 * j + 2 * L.q + o] = v;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kw; i += blockDim.x)
      dbt[(kChunk - 1) * ldf + i] += (colpk[i] + colpk[KB + i] + colpk[2 * KB + i] + colpk[3 * KB + i]) +
                                     expf(Gk[(kChunk - 1) * K + kb0 + i]) * state_sum(kb0 + i);
    __syncthreads();
    float* dbp = w.dbp + wrow * K + kb0;
    for (int e = threadIdx.x; e < kChunk * kw; e += blockDim.x)
      dbp[static_cast<std::int64_t>(e / kw) * K + e % kw] = dbt[(e / kw) * ldf + e % kw];
  }
}

}  // namespace ttr::gpu::chunk_bwd
