// Chunk backward, stage 6 (grid chunks × B·H; FLA's prepare_wy_repr_bwd with the
// rest of dk, dβ and dg): the backward of the WY / UT transform of one chunk
// (reference/family/delta_chunk_backward.hpp). With X = Diag(β)(K ⊙ e^{b}) and
// Y = Diag(β) V as the forward narrows them (bk, bv), T the forward's narrowed
// inverse (I + A)⁻¹, A = Diag(β) G, G_ts = (K Wᵀ)_ts e^{b_t − b_s} on s < t (W the
// write keys: K itself, or the preconditioned layers' k̃ in Args::w: OWN_W):
//   dT  = dΔ bvᵀ + dWy bkᵀ on s < t      (dU = dΔ; dWy from stage 5)
//   dbv = Tᵀ dΔ:  dv = β ⊙ dbv,  dβ_t += Σ_j dbv_tj v_tj
//   dbk = Tᵀ dWy: dk = β e^{b} ⊙ dbk,  dβ_t += Σ_d dbk_td kd_td,  db_t += Σ_d dbk_td bk_td
//   dA  = −Tᵀ dT Tᵀ on s < t:  dβ_t += Σ_s dA_ts G_ts;  E = β_t dA_ts Γ_ts
//   dk += E W,  dw += Eᵀ K,  db_t += Σ_s E_ts (KWᵀ)_ts − Σ_t' E_t't (KWᵀ)_t't
// then the chunk's gradients: dk + dw (each narrowed, summed: `finish` adds them
// as the read and the write key's; OWN_W: each to its own partial), dβ narrowed,
// dg the chunk-local reverse
// cumulative sum of db (stage 5's partials first, in key-block order). dT and
// Tᵀ dT are fp32 in the reference: wide operands here (common.cuh).
#pragma once

#include "gpu/family/delta_chunk_backward/common.cuh"
#include "gpu/family/delta_chunk_backward/pairwise.cuh"
#include "gpu/family/delta_chunk_backward/wy_common.cuh"

namespace ttr::gpu::chunk_bwd {

template <class E>
constexpr int wide_tiles() {
  return std::is_same_v<E, float> ? 1 : 2;
}

// Without per-key decay dT lives in the region too (that keeps the block at 98 816
// bytes of shared memory in bf16, K = V = 128: two blocks per multiprocessor, where
// 117 248 allowed one): dΔ at 0 and bv next, dWy at the region's end; dT (wide)
// goes over dΔ and bv once the products that read them are done, while dbk still
// reads dWy; then Tᵀ dT after dT, and E over dT (dead by then). Per key the
// region first holds dΔ, bv, dWy, then dA, G and the pairwise dk, dw in fp32, and
// dT is a tile of its own (Tᵀ dT goes over it).
template <class E, Decay D>
constexpr bool dT_in_region() {
  return D != Decay::per_key;
}
template <class E, Decay D>
__host__ __device__ inline std::size_t wy_region(const Shape& s) {
  const std::size_t p1 = 2 * tile_bytes<E>(kChunk, s.V) + tile_bytes<E>(kChunk, s.K);
  const std::size_t wide = wide_tiles<E>() * tile_bytes<E>(kChunk, kChunk);
  std::size_t p2 = D == Decay::per_key ? 2 * tile_bytes<float>(kChunk, kChunk) + 2 * tile_bytes<float>(kChunk, s.K)
                                       : 2 * wide;
  if (dT_in_region<E, D>() && wide + tile_bytes<E>(kChunk, s.K) > p2) p2 = wide + tile_bytes<E>(kChunk, s.K);
  return p1 > p2 ? p1 : p2;
}
// own_w: a tile of write keys beside the read keys.
template <class E, Decay D>
inline std::size_t wy_smem(const Shape& s, bool own_w) {
  const std::size_t dT = dT_in_region<E, D>() ? 0 : wide_tiles<E>() * tile_bytes<E>(kChunk, kChunk);
  return tile_bytes<E>(kChunk, kChunk) + (own_w ? 3 : 2) * tile_bytes<E>(kChunk, s.K) + dT + wy_region<E, D>(s) +
         tile_bytes<float>(1, 10 * kChunk);
}

// KV: K = V = KV known at compile time (0: the shape's, at run time). OWN_W: a
// write key of its own (a.w, in a tile beside k), a compile-time switch so that the
// layers whose write key is k keep their registers (run time, it spilled 16 more
// bytes in the scalar-gate bf16 kernel at K = V = 128).
// At most 128 registers a thread, so that two blocks fit a multiprocessor wherever
// their shared memory does (bf16, K = V = 128; the run-time-shape bf16 kernel took
// 130 and one block without the bound).
template <class E, Decay D, int KV = 0, bool OWN_W = false>
__global__ void __launch_bounds__(kThreads, 2) wy(Args<E> a, Work w) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int ldc = padded_ld<E>(kChunk), ldp = padded_ld<float>(kChunk);
  const Shape& s = a.s;
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0), K = KV ? KV : s.K, V = KV ? KV : s.V;
  const int ldk = padded_ld<E>(K), ldv = padded_ld<E>(V), ldf = padded_ld<float>(K);
  const Lane L = lane_of();
  const int m0 = 16 * (L.warp % 4), half = L.warp / 4, strip = L.warp % 4;
  SmemArena arena{smem};
  E* Tt = arena.take<E>(kChunk, kChunk);
  E* kt = arena.take<E>(kChunk, K);   // k as stored (the read keys)
  E* bkt = arena.take<E>(kChunk, K);  // bk = narrow(β narrow(k ⊙ e^{b}))
  E* wkt = OWN_W ? arena.take<E>(kChunk, K) : kt;  // the write keys
  constexpr bool dT_shared = dT_in_region<E, D>();
  constexpr int wt = wide_tiles<E>();
  const std::size_t tb = tile_bytes<E>(kChunk, kChunk);
  Wide<E> dTw{};
  if constexpr (!dT_shared) dTw = {arena.take<E>(kChunk, kChunk), wt == 2 ? arena.take<E>(kChunk, kChunk) : nullptr};
  unsigned char* region = arena.p;
  const std::size_t region_bytes = wy_region<E, D>(s);
  arena.p += region_bytes;
  if constexpr (dT_shared) dTw = {reinterpret_cast<E*>(region), wt == 2 ? reinterpret_cast<E*>(region + tb) : nullptr};
  float* bt = arena.take<float>(1, 10 * kChunk);  // β used [64], b [64], dβ [2][64], db rows [2][64], cols [4][64]
  float* bg = bt + kChunk;
  float* betap = bt + 2 * kChunk;
  float* rowp = bt + 4 * kChunk;
  float* colp = bt + 6 * kChunk;
  // Phase 1 in the region.
  E* dDt = reinterpret_cast<E*>(region);
  E* bvt = reinterpret_cast<E*>(region + tile_bytes<E>(kChunk, V));
  E* dWyt = reinterpret_cast<E*>(region + region_bytes - tile_bytes<E>(kChunk, K));

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0, rs = s.H;
  if (chunk_dropped(a, b, n)) return wy_zero_chunk<E, D, OWN_W>(a, row0, rs, c);
  const WyMutants mu = wy_mutants(a.mutant);
  // Two copy groups: what dbv = Tᵀ dΔ reads (T, dΔ, and v for dβ) lands first, and
  // the keys, dWy and the gates land while it runs.
  load_rows_async(Tt, ldc, static_cast<const E*>(w.fwd.Tn) + (static_cast<std::int64_t>(bh) * s.NT + n) * kChunk * kChunk,
                  kChunk, kChunk, kChunk, kChunk);
  load_rows_async(dDt, ldv, static_cast<const E*>(w.dD) + wrow * V, V, kChunk, c, V);
  load_rows_async(bvt, ldv, a.v + row0 * V, rs * V, kChunk, c, V);
  cp_async_commit();
  load_rows_async(kt, ldk, a.k + row0 * K, rs * K, kChunk, c, K);
  if constexpr (OWN_W) load_rows_async(wkt, ldk, a.w + row0 * K, rs * K, kChunk, c, K);
  load_rows_async(dWyt, ldk, static_cast<const E*>(w.dWy) + wrow * K, K, kChunk, c, K);
  if constexpr (D == Decay::scalar) load_flat_async(bg, w.fwd.G + wrow, kChunk);
  cp_async_commit();
  if (threadIdx.x < kChunk) {
    const int t = threadIdx.x;
    bt[t] = t < c ? beta_used(a, a.k + (row0 + t * rs) * K, Elem<E>::to_float(a.beta[row0 + t * rs])) : 0.0f;
  }
  cp_async_wait<1>();
  __syncthreads();

  float* dbg = D == Decay::per_key ? w.dbp + wrow * K : nullptr;  // per key: db accumulates in place
  float betar[2] = {0.0f, 0.0f};                                  // dβ, rows m0 + g, m0 + g + 8
  [[maybe_unused]] float dbr[2] = {0.0f, 0.0f};                  // scalar db rows
  // dbv = Tᵀ dΔ (Tᵀ upper triangular: k-steps before the strip are zeros) → dv, dβ.
  // v for dβ comes from its tile, still as loaded: read from global memory after
  // the dv stores (which may alias it, as far as the compiler knows) each pair
  // cost a round trip to memory in series.
  for (int i = 0; i < 4; ++i) {
    const int n0 = 16 * (half + 2 * i);
    if (n0 >= V) break;
    Unit acc;
    zero(acc);
    for (int s0 = m0; s0 < kChunk; s0 += 16) mma16<true, false>(acc, Tt, ldc, m0, dDt, ldv, n0, s0);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int t = m0 + L.g + 8 * hf, col = n0 + 8 * j + 2 * L.q;
        if (t >= c) continue;
        const float d0 = acc[j][2 * hf], d1 = acc[j][2 * hf + 1];
        st_pair(a.dv + (row0 + t * rs) * V + col, bt[t] * d0, bt[t] * d1);
        const float2 vv = ld_pair(bvt + t * ldv + col);
        betar[hf] = fmaf(d1, vv.y, fmaf(d0, vv.x, betar[hf]));
      }
  }
  cp_async_wait<0>();
  __syncthreads();  // the second group landed; every warp is done reading v as loaded
  const float* Gk = w.fwd.G + wrow * K;  // per-key gates [t][K] (global)
  auto gate = [&](int t, int d) {
    if constexpr (D == Decay::scalar) return bg[t];
    else if constexpr (D == Decay::per_key) return Gk[t * K + d];
    else return 0.0f;
  };
  // bk = narrow(β narrow(k ⊙ e^{b})) and bv = narrow(β v) (in place), as ut_transform.
  for (int i = 2 * threadIdx.x; i < kChunk * K; i += 2 * blockDim.x) {
    const int t = i / K, d = i % K;
    float2 x = ld_pair(kt + t * ldk + d);
    if constexpr (D != Decay::none) x.x = narrow<E>(x.x * expf(gate(t, d))), x.y = narrow<E>(x.y * expf(gate(t, d + 1)));
    st_pair(bkt + t * ldk + d, bt[t] * x.x, bt[t] * x.y);
  }
  for (int i = 2 * threadIdx.x; i < kChunk * V; i += 2 * blockDim.x) {
    const int t = i / V, j = i % V;
    const float2 x = ld_pair(bvt + t * ldv + j);
    st_pair(bvt + t * ldv + j, bt[t] * x.x, bt[t] * x.y);
  }
  __syncthreads();
  // dT = dΔ bvᵀ + dWy bkᵀ on s < t (units above the diagonal: zeros), kept in
  // registers until every warp is done reading dΔ and bv when dT goes over them.
  Unit dTacc[2];
#pragma unroll
  for (int i2 = 0; i2 < 2; ++i2) {
    const int n0 = 16 * (half + 2 * i2);
    zero(dTacc[i2]);
    if (n0 <= m0) {
      for (int j0 = 0; j0 < V; j0 += 16) mma16<false, true>(dTacc[i2], dDt, ldv, m0, bvt, ldv, n0, j0);
      for (int d0 = 0; d0 < K; d0 += 16) mma16<false, true>(dTacc[i2], dWyt, ldk, m0, bkt, ldk, n0, d0);
    }
  }
  if constexpr (dT_shared) __syncthreads();
#pragma unroll
  for (int i2 = 0; i2 < 2; ++i2) {
    const int n0 = 16 * (half + 2 * i2);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int t = m0 + L.g + 8 * hf, col = n0 + 8 * j + 2 * L.q;
        put_wide(dTw, t * ldc + col, col < t ? dTacc[i2][j][2 * hf] : 0.0f, col + 1 < t ? dTacc[i2][j][2 * hf + 1] : 0.0f);
      }
  }
  // dbk = Tᵀ dWy → dk (kept), dβ, db.
  float dk[4][2][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int n0 = 16 * (half + 2 * i);
    zero(dk[i]);
    if (n0 >= K) continue;
    Unit acc;
    zero(acc);
    for (int s0 = m0; s0 < kChunk; s0 += 16) mma16<true, false>(acc, Tt, ldc, m0, dWyt, ldk, n0, s0);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = unit_row(L, m0, e), d = unit_col(L, n0, j, e);
        const float ek = D == Decay::none ? 1.0f : expf(gate(t, d));
        const float kraw = Elem<E>::to_float(kt[t * ldk + d]);
        const float kd = D == Decay::none ? kraw : narrow<E>(kraw * ek);
        // mutants dk-wy-term-dropped (the term left out), dk-undecayed-key (e^{b_t} left out).
        dk[i][j][e] = mu.dk_wy_term ? (bt[t] * (mu.dk_decayed_key ? ek : 1.0f)) * acc[j][e] : 0.0f;
        betar[e / 2] = fmaf(acc[j][e], kd, betar[e / 2]);
        if constexpr (D != Decay::none) {
          const float term = acc[j][e] * Elem<E>::to_float(bkt[t * ldk + d]);
          if constexpr (D == Decay::scalar) dbr[e / 2] += term;
          else dbg[t * K + d] += term;
        }
      }
  }
  __syncthreads();  // phase 1 done: the region takes Tᵀ dT and E

  // Phase 2 in the region: Tᵀ dT and E as wide tiles; per key dA, G and the
  // pairwise dk, dw in fp32 (Tᵀ dT then goes over dT).
  Wide<E> tmpw{}, Ew{};
  [[maybe_unused]] float *dAt = nullptr, *Gt = nullptr, *dXp = nullptr, *dYp = nullptr;
  if constexpr (D != Decay::per_key) {  // Tᵀ dT after dT; E over dT once Tᵀ dT is formed
    tmpw = {reinterpret_cast<E*>(region + wt * tb), wt == 2 ? reinterpret_cast<E*>(region + 3 * tb) : nullptr};
    Ew = dTw;
  } else {
    const std::size_t tf = tile_bytes<float>(kChunk, kChunk), tk = tile_bytes<float>(kChunk, K);
    dAt = reinterpret_cast<float*>(region);
    Gt = reinterpret_cast<float*>(region + tf);
    dXp = reinterpret_cast<float*>(region + 2 * tf);
    dYp = reinterpret_cast<float*>(region + 2 * tf + tk);
  }
  // Tᵀ dT (needs r ≥ t and r > s: k-steps from max(m0, n0)), then dA = −(Tᵀ dT) Tᵀ.
  // mutant ut-adjoint-transposed: T dTᵀ, then dA = −(T dTᵀ) T (full k ranges).
  Unit tacc[2];
#pragma unroll
  for (int i2 = 0; i2 < 2; ++i2) {
    const int n0 = 16 * (half + 2 * i2);
    zero(tacc[i2]);
    if (mu.ut_transposed)
      for (int r0 = 0; r0 < kChunk; r0 += 16) mma16_wb<false, true>(tacc[i2], Tt, ldc, m0, dTw, ldc, n0, r0);
    else
      for (int r0 = max(m0, n0); r0 < kChunk; r0 += 16) mma16_wb<true, false>(tacc[i2], Tt, ldc, m0, dTw, ldc, n0, r0);
  }
  if constexpr (D == Decay::per_key) __syncthreads();  // every warp is done reading dT
  const Wide<E> tdt = D == Decay::per_key ? dTw : tmpw;
#pragma unroll
  for (int i2 = 0; i2 < 2; ++i2) {
    const int n0 = 16 * (half + 2 * i2);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf)
        put_wide(tdt, (m0 + L.g + 8 * hf) * ldc + n0 + 8 * j + 2 * L.q, tacc[i2][j][2 * hf], tacc[i2][j][2 * hf + 1]);
  }
  __syncthreads();  // Tᵀ dT visible
#pragma unroll
  for (int i2 = 0; i2 < 2; ++i2) {
    const int n0 = 16 * (half + 2 * i2);
    Unit acc, kk;
    zero(acc), zero(kk);
    if (n0 <= m0) {
      // (Tᵀ dT) Tᵀ: B(r, s) = T_sr, zero for r > s: k-steps up to the unit's columns.
      if (mu.ut_transposed)
        for (int r0 = 0; r0 < kChunk; r0 += 16) mma16_wa<false, false>(acc, tdt, ldc, m0, Tt, ldc, n0, r0);
      else
        for (int r0 = 0; r0 <= n0; r0 += 16) mma16_wa<false, true>(acc, tdt, ldc, m0, Tt, ldc, n0, r0);
      if constexpr (D != Decay::per_key)
        for (int d0 = 0; d0 < K; d0 += 16) mma16<false, true>(kk, kt, ldk, m0, wkt, ldk, n0, d0);
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
          const int sc = col + o;
          // mutant wy-backward-offblock-dropped: dA kept on the 16 × 16 diagonal blocks only.
          const float da = sc < t && (mu.offblock || t / 16 == sc / 16) ? -acc[j][2 * hf + o] : 0.0f;
          if constexpr (D == Decay::per_key) {
            x[o] = da;
          } else {
            // Γ on the strictly causal pairs only (above the diagonal e^{b_t − b_s}
            // can overflow, and inf·0 is NaN: mutant backward-gate-exp-unmasked).
            const float gam = D != Decay::scalar ? 1.0f : sc < t || mu.exp_unmasked ? expf(bg[t] - bg[sc]) : 0.0f;
            const float G = sc < t ? kk[j][2 * hf + o] * gam : 0.0f;
            betar[hf] = fmaf(da, G, betar[hf]);
            x[o] = bt[t] * da * gam;  // E = β_t dA_ts Γ_ts
            if constexpr (D == Decay::scalar) {
              const float pair = x[o] * kk[j][2 * hf + o];
              dbr[hf] += pair;
              pcol[j][o] += pair;
            }
          }
        }
        if constexpr (D == Decay::per_key) st_pair(dAt + t * ldp + col, x[0], x[1]);
        else put_wide(Ew, t * ldc + col, x[0], x[1]);
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
  [[maybe_unused]] float* betak = rowp;  // per key: dβ's Σ_s dA_ts G_ts per row (rowp is unused per key)
  if constexpr (D == Decay::per_key) {
    __syncthreads();  // dA visible
    pairwise_products(kt, wkt, ldk, Gk, K, true, Gt, ldp);
    for (int i = threadIdx.x; i < kChunk * ldf; i += blockDim.x) dXp[i] = 0.0f, dYp[i] = 0.0f;
    __syncthreads();
    if (threadIdx.x < kChunk) {  // dβ_t += Σ_s dA_ts G_ts, then dA ← β_t dA (the row's own entries)
      const int t = threadIdx.x;
      float x = 0.0f;
      for (int sc = 0; sc < t; ++sc) x = fmaf(dAt[t * ldp + sc], Gt[t * ldp + sc], x);
      betak[t] = x;
      for (int sc = 0; sc < t; ++sc) dAt[t * ldp + sc] *= bt[t];
    }
    __syncthreads();
    pairwise_backward(kt, wkt, ldk, Gk, K, 0, K, true, dAt, ldp, dXp, dYp, ldf, dbg, K, mu.exp_unmasked);
  } else {
    __syncthreads();  // E visible
  }

  // dk += E W (E strictly lower: k-steps up to the strip), dw = dWk + Eᵀ K; written
  // as narrow(dk) + narrow(dw), the read and the write key's gradients (OWN_W: apart).
  const float* dWk = w.dWk + wrow * K;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int n0 = 16 * (half + 2 * i);
    if (n0 >= K) continue;
    // This unit's dWk pairs, loaded before its products: read after the stores of
    // the previous unit (which may alias them, as far as the compiler knows), each
    // was a round trip to memory in series.
    float2 dwk[2][2];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int t = m0 + L.g + 8 * hf, d = n0 + 8 * j + 2 * L.q;
        dwk[j][hf] = t < c ? *reinterpret_cast<const float2*>(dWk + t * K + d) : make_float2(0.0f, 0.0f);
      }
    Unit dw2;
    zero(dw2);
    if constexpr (D != Decay::per_key) {
      for (int s0 = 0; s0 <= m0; s0 += 16) mma16_wa<false, false>(dk[i], Ew, ldc, m0, wkt, ldk, n0, s0);
      for (int s0 = m0; s0 < kChunk; s0 += 16) mma16_wa<true, false>(dw2, Ew, ldc, m0, kt, ldk, n0, s0);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = unit_row(L, m0, e), d = unit_col(L, n0, j, e);
        if (t >= c) continue;
        float dkv = dk[i][j][e], dwv = (e % 2 ? dwk[j][e / 2].y : dwk[j][e / 2].x) + dw2[j][e];
        if constexpr (D == Decay::per_key) dkv += dXp[t * ldf + d], dwv += dYp[t * ldf + d];
        const std::int64_t at = (row0 + t * rs) * K + d;
        if constexpr (OWN_W) a.out.dk[at] = narrow<E>(dkv), a.out.dw[at] = narrow<E>(dwv);
        else put_grad(a.dk_out, a.out.dk, at, narrow<E>(dkv) + narrow<E>(dwv));
      }
  }
  // dβ, narrowed (finish applies Kaczmarz's chain rule to it).
  {
    const float r0 = quad_sum(betar[0]), r1 = quad_sum(betar[1]);
    if (L.q == 0) betap[half * kChunk + m0 + L.g] = r0, betap[half * kChunk + m0 + L.g + 8] = r1;
  }
  if constexpr (D == Decay::scalar) {
    const float r0 = quad_sum(dbr[0]), r1 = quad_sum(dbr[1]);
    if (L.q == 0) rowp[half * kChunk + m0 + L.g] = r0, rowp[half * kChunk + m0 + L.g + 8] = r1;
  }
  __syncthreads();
  if (threadIdx.x < c) {
    const int t = threadIdx.x;
    float x = betap[t] + betap[kChunk + t];
    if constexpr (D == Decay::per_key) x += betak[t];
    put_grad(a.dbeta_out, a.out.dbeta, row0 + t * rs, narrow<E>(mu.dbeta_sign * x));  // mutant dbeta-sign-flipped: −1
  }
  // dg: the chunk-local reverse cumulative sum of db (stage 5's partials first).
  if constexpr (D == Decay::scalar)  // betap reused: dβ is written
    wy_scalar_dg(a, w, bh, t0, row0, rs, c, rowp, colp, betap, mu.dg_exclusive);
  if constexpr (D == Decay::per_key) {
    // (pairwise_backward ended with a barrier: db is complete in dbp.)
    for (int d = threadIdx.x; d < K; d += blockDim.x) {
      float run = 0.0f;
      for (int t = kChunk - 1; t >= 0; --t) {
        if (mu.dg_exclusive && t < c) a.out.dg[(row0 + t * rs) * K + d] = run;
        run += dbg[t * K + d];
        if (!mu.dg_exclusive && t < c) a.out.dg[(row0 + t * rs) * K + d] = run;
      }
    }
  }
}

}  // namespace ttr::gpu::chunk_bwd
