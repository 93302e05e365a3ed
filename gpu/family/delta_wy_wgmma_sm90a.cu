// Stage 6 of the bf16 chunk backward (delta_chunk_backward.cu) on Hopper's warpgroup
// MMA: the backward of the WY / UT transform of one chunk, the recurrence-free stage of
// chunk_bwd::wy (delta_chunk_backward/wy.cuh, whose header derives it; FLA's
// prepare_wy_repr_bwd with the rest of dk, dβ and dg):
//   dbv = Tᵀ dΔ → dv, dβ;  dT = dΔ bvᵀ + dWy bkᵀ on s < t;  dbk = Tᵀ dWy → dk, dβ, db;
//   dA = −(Tᵀ dT) Tᵀ on s < t → dβ;  E = β_t dA_ts Γ_ts;  dk += E W;  dw = dWk + Eᵀ K;
// the same narrowing points, the same wide (hi + lo bf16) operands for dT, Tᵀ dT and E,
// fp32 accumulation, the products issued as wgmma from swizzled shared-memory tiles
// (gpu/core/wgmma.cuh). Why: the mma.sync stage is latency-bound (ncu on the H100:
// 0.74 eligible of 3.84 warps a scheduler, 2.0× its floor; docs/gpu-delta-backward-speed.md)
// — chains of dependent `HMMA` with their `ldmatrix` per 16 × 16 unit — where here each
// product is a few asynchronous instructions of a warpgroup reading the tiles itself.
//
// Block: one chunk of one head, 256 threads = two warpgroups. Every product is 64 tokens
// tall (one m64), so the warpgroups split N (delta_wy_wgmma_layout.hpp): warpgroup h
// takes value / key columns 64h .. 64h + 63 and chunk columns 32h .. 32h + 31. Its
// warp w holds rows 16w .. 16w + 15, the rows of the mma.sync stage's warp strip, so the
// epilogues (masks, Γ, the mutants, the row and column sums) are that stage's. Triangular
// products run their full k range over stored zeros (T is stored with its zeros above
// the diagonal, dT and E are masked where written): sums of exact zeros, the same values.
// dw accumulates onto dWk inside the tensor core where the mma.sync stage adds the two
// afterwards: another fp32 summation order, inside the form's model like the tensor
// core's own. The CUDA mutants of wy are here too (gpu/core/mutant.cuh).
//
// Covers bf16, K = V = 128, no decay or a scalar gate, the write key k itself (not the
// preconditioned layers' k̃, nor KDA's per-key gate: those keep the mma.sync stage).
// Compiled for sm_90a alone; launched only on compute capability 9.0, where it is the
// default (TTR_GPU_WY=mma takes the mma.sync stage instead).
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpu/core/check.cuh"
#include "gpu/core/env_switch.hpp"
#include "gpu/core/launch.cuh"
#include "gpu/core/wgmma.cuh"
#include "gpu/family/delta_state_wgmma.hpp"
#include "gpu/family/delta_chunk_backward/wy_common.cuh"
#include "gpu/family/delta_wy_wgmma.hpp"
#include "gpu/family/delta_wy_wgmma_layout.hpp"

namespace ttr::gpu::chunk_bwd {
namespace {

using namespace wy_wgmma;
using state_wgmma::key_tile;
using state_wgmma::keys_along_k;
using state_wgmma::kTileW;
using state_wgmma::score_tile;
using state_wgmma::scores_along_m;
constexpr int kKV = 128;
constexpr int kTileS = kChunk * kRowM;  // a 64 × 64 score tile, 8 KB
constexpr int kFloats = 10 * kChunk;    // β [64], b [64], dβ [2][64], db rows [2][64], columns [4][64]
// T, k, bk; the region (dΔ, bv, dWy; then dT, Tᵀ dT and E, each hi + lo); the floats.
constexpr int kRegion = 3 * kTileW;
constexpr std::size_t kSmem = 1024 + kTileS + 2 * kTileW + kRegion + kFloats * 4;

template <int TA, int TB>
__device__ __forceinline__ void mma64(float (&d)[32], std::uint64_t da, std::uint64_t db) {
  wgmma::mma_m64n64k16<TA, TB>(d, da, db, 1);
}
template <int TA, int TB>
__device__ __forceinline__ void mma32(float (&d)[16], std::uint64_t da, std::uint64_t db) {
  wgmma::mma_m64n32k16<TA, TB>(d, da, db, 1);
}
template <int R>
__device__ __forceinline__ void zero_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) d[i] = 0.0f;
}
__device__ __forceinline__ unsigned& word(unsigned char* tile, unsigned off) { return *reinterpret_cast<unsigned*>(tile + off); }
__device__ __forceinline__ float2 pair(const unsigned char* tile, unsigned off) {
  return mma::unpack_bf16(*reinterpret_cast<const unsigned*>(tile + off));
}
// A wide pair (hi, lo) into the hi and lo score tiles.
__device__ __forceinline__ void put_wide_s(unsigned char* hi, unsigned char* lo, unsigned off, float x0, float x1) {
  const unsigned h = mma::pack_bf16(x0, x1);
  const float2 hf = mma::unpack_bf16(h);
  word(hi, off) = h;
  word(lo, off) = mma::pack_bf16(x0 - hf.x, x1 - hf.y);
}

// Rows 0 .. 63 of a [rows][128] bf16 tensor (row r at src + r·stride) into a key tile,
// rows ≥ valid zeroed: a thread's 16-byte chunk tid % 16 of rows tid / 16 + 16i.
__device__ __forceinline__ void load_keys(unsigned char* dst, const bf16* src, std::int64_t stride, int valid) {
  const int r0 = threadIdx.x / 16, c16 = threadIdx.x % 16;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + 16 * i;
    unsigned char* d = dst + key_tile(r, c16 * 8);
    if (r < valid) cp_async16(d, src + r * stride + c16 * 8);
    else *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
  }
}

template <Decay D>
__global__ void __launch_bounds__(kThreads, 2) wy_wgmma(Args<bf16> a, Work w) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (wgmma::smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char* Tt = smem;                 // T [s][t] as stored (zeros above the diagonal)
  unsigned char* kt = Tt + kTileS;          // k as stored (the read and the write keys)
  unsigned char* bkt = kt + kTileW;         // bk = narrow(β narrow(k ⊙ e^{b}))
  unsigned char* region = bkt + kTileW;     // phase 1: dΔ, bv, dWy; phase 2 below
  unsigned char* dDt = region;
  unsigned char* bvt = region + kTileW;
  unsigned char* dWyt = region + 2 * kTileW;
  unsigned char* dThi = region;             // dT over dΔ once dT = dΔ bvᵀ + dWy bkᵀ is formed
  unsigned char* dTlo = region + kTileS;
  unsigned char* tdhi = region + kTileW;    // Tᵀ dT over bv
  unsigned char* tdlo = region + kTileW + kTileS;
  unsigned char* Ehi = dThi;                // E over dT once Tᵀ dT is formed
  unsigned char* Elo = dTlo;
  float* bt = reinterpret_cast<float*>(region + kRegion);
  float* bg = bt + kChunk;
  float* betap = bt + 2 * kChunk;
  float* rowp = bt + 4 * kChunk;
  float* colp = bt + 6 * kChunk;

  const Shape& s = a.s;
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0), K = kKV, V = kKV;
  const Lane L = lane_of();
  const int wg = L.warp / 4, m0 = 16 * (L.warp % 4), strip = L.warp % 4;
  const int v0 = 64 * wg, s0 = 32 * wg;  // the warpgroup's 64 value / key columns, 32 chunk columns
  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0, rs = s.H;
  // Accumulator element i of an n64 (or n32) product: row m0 + g + 8(i%4 / 2), column
  // (the product's first) + 8(i / 4) + 2q + i % 2.
  auto row_of = [&](int i) { return m0 + L.g + 8 * ((i % 4) / 2); };
  auto col_of = [&](int i) { return 8 * (i / 4) + 2 * L.q + i % 2; };

  if (chunk_dropped(a, b, n)) return wy_zero_chunk<bf16, D, false>(a, row0, rs, c);
  const WyMutants mu = wy_mutants(a.mutant);

  // Two copy groups: what dbv = Tᵀ dΔ reads (T, dΔ, and v for dβ), then the keys, dWy
  // and the gates while it runs.
  {
    const bf16* Tg = static_cast<const bf16*>(w.fwd.Tn) + (static_cast<std::int64_t>(bh) * s.NT + n) * kChunk * kChunk;
    const int r0 = threadIdx.x / 8, c8 = threadIdx.x % 8;
#pragma unroll
    for (int i = 0; i < 2; ++i) cp_async16(Tt + score_tile(r0 + 32 * i, c8 * 8), Tg + (r0 + 32 * i) * kChunk + c8 * 8);
  }
  load_keys(dDt, static_cast<const bf16*>(w.dD) + wrow * V, V, c);
  load_keys(bvt, a.v + row0 * V, rs * V, c);
  cp_async_commit();
  load_keys(kt, a.k + row0 * K, rs * K, c);
  load_keys(dWyt, static_cast<const bf16*>(w.dWy) + wrow * K, K, c);
  if constexpr (D == Decay::scalar) load_flat_async(bg, w.fwd.G + wrow, kChunk);
  cp_async_commit();
  if (threadIdx.x < kChunk) {
    const int t = threadIdx.x;
    bt[t] = t < c ? beta_used(a, a.k + (row0 + t * rs) * K, Elem<bf16>::to_float(a.beta[row0 + t * rs])) : 0.0f;
  }
  cp_async_wait<1>();
  wgmma::fence_proxy_async();
  __syncthreads();

  float betar[2] = {0.0f, 0.0f};                  // dβ, rows m0 + g, m0 + g + 8
  [[maybe_unused]] float dbr[2] = {0.0f, 0.0f};  // scalar db rows
  auto gate = [&](int t) { return D == Decay::scalar ? bg[t] : 0.0f; };
  // dbv = Tᵀ dΔ (A[t][s] = T[s][t], M-major) → dv, dβ (v read from its tile as loaded).
  {
    float acc[32];
    zero_acc(acc);
    wgmma::fence_operand(acc);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) mma64<1, 1>(acc, wgmma::desc(Tt, scores_along_m(kk)), wgmma::desc(dDt, keys_along_n(wg, kk)));
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(acc);
#pragma unroll
    for (int i = 0; i < 32; i += 2) {
      const int t = row_of(i), col = v0 + col_of(i);
      if (t >= c) continue;
      st_pair(a.dv + (row0 + t * rs) * V + col, bt[t] * acc[i], bt[t] * acc[i + 1]);
      const float2 vv = pair(bvt, key_tile(t, col));
      betar[(i % 4) / 2] = fmaf(acc[i + 1], vv.y, fmaf(acc[i], vv.x, betar[(i % 4) / 2]));
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the second group landed; every warp is done reading v as loaded
  // bk = narrow(β narrow(k ⊙ e^{b})) and bv = narrow(β v) (in place), as ut_transform.
  for (int i = 2 * threadIdx.x; i < kChunk * kKV; i += 2 * kThreads) {
    const int t = i / kKV, d = i % kKV;
    const unsigned off = key_tile(t, d);
    float2 x = pair(kt, off);
    if constexpr (D != Decay::none) {
      const float e = expf(gate(t));
      x.x = narrow<bf16>(x.x * e), x.y = narrow<bf16>(x.y * e);
    }
    word(bkt, off) = mma::pack_bf16(bt[t] * x.x, bt[t] * x.y);
    const float2 y = pair(bvt, off);
    word(bvt, off) = mma::pack_bf16(bt[t] * y.x, bt[t] * y.y);
  }
  wgmma::fence_proxy_async();
  __syncthreads();

  // One group: dT (n32, chunk columns s0 ..: A = dΔ, dWy K-major, B = bvᵀ, bkᵀ) and
  // dbk = Tᵀ dWy (n64, key columns v0 ..), kept as dk.
  float dTacc[16], dk[32];
  zero_acc(dTacc);
  zero_acc(dk);
  wgmma::fence_operand(dTacc);
  wgmma::fence_operand(dk);
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kKV / 16; ++kk)
    mma32<0, 0>(dTacc, wgmma::desc(dDt, keys_along_k(kk)), wgmma::desc(bvt, keys_along_k_rows(wg, kk)));
#pragma unroll
  for (int kk = 0; kk < kKV / 16; ++kk)
    mma32<0, 0>(dTacc, wgmma::desc(dWyt, keys_along_k(kk)), wgmma::desc(bkt, keys_along_k_rows(wg, kk)));
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) mma64<1, 1>(dk, wgmma::desc(Tt, scores_along_m(kk)), wgmma::desc(dWyt, keys_along_n(wg, kk)));
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operand(dTacc);
  wgmma::fence_operand(dk);
  __syncthreads();  // every warpgroup is done reading dΔ and bv: dT goes over them
#pragma unroll
  for (int i = 0; i < 16; i += 2) {
    const int t = row_of(i), col = s0 + col_of(i);
    put_wide_s(dThi, dTlo, score_tile(t, col), col < t ? dTacc[i] : 0.0f, col + 1 < t ? dTacc[i + 1] : 0.0f);
  }
  // dbk → dk (kept), dβ, db.
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int t = row_of(i), d = v0 + col_of(i);
    const float ek = D == Decay::none ? 1.0f : expf(gate(t));
    const unsigned off = key_tile(t, d);
    const float kraw = __bfloat162float(*reinterpret_cast<const bf16*>(kt + off));
    const float kd = D == Decay::none ? kraw : narrow<bf16>(kraw * ek);
    const float x = dk[i];
    // mutants dk-wy-term-dropped (the term left out), dk-undecayed-key (e^{b_t} left out).
    dk[i] = mu.dk_wy_term ? (bt[t] * (mu.dk_decayed_key ? ek : 1.0f)) * x : 0.0f;
    betar[(i % 4) / 2] = fmaf(x, kd, betar[(i % 4) / 2]);
    if constexpr (D == Decay::scalar) dbr[(i % 4) / 2] += x * __bfloat162float(*reinterpret_cast<const bf16*>(bkt + off));
  }
  wgmma::fence_proxy_async();
  __syncthreads();  // dT visible

  // One group: Tᵀ dT (n32; A[t][r] = T[r][t] M-major, B = dT N-major, hi then lo) and
  // kk = K Wᵀ (n32). Mutant ut-adjoint-transposed: T dTᵀ (A = T K-major, B = dTᵀ).
  float tacc[16], kkacc[16];
  zero_acc(tacc);
  zero_acc(kkacc);
  wgmma::fence_operand(tacc);
  wgmma::fence_operand(kkacc);
  wgmma::fence();
  if (mu.ut_transposed) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      mma32<0, 0>(tacc, wgmma::desc(Tt, scores_along_k(kk)), wgmma::desc(dThi, scores_along_k(kk, wg)));
      mma32<0, 0>(tacc, wgmma::desc(Tt, scores_along_k(kk)), wgmma::desc(dTlo, scores_along_k(kk, wg)));
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      mma32<1, 1>(tacc, wgmma::desc(Tt, scores_along_m(kk)), wgmma::desc(dThi, scores_along_n(wg, kk)));
      mma32<1, 1>(tacc, wgmma::desc(Tt, scores_along_m(kk)), wgmma::desc(dTlo, scores_along_n(wg, kk)));
    }
  }
#pragma unroll
  for (int kk = 0; kk < kKV / 16; ++kk)
    mma32<0, 0>(kkacc, wgmma::desc(kt, keys_along_k(kk)), wgmma::desc(kt, keys_along_k_rows(wg, kk)));
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operand(tacc);
  wgmma::fence_operand(kkacc);
#pragma unroll
  for (int i = 0; i < 16; i += 2) put_wide_s(tdhi, tdlo, score_tile(row_of(i), s0 + col_of(i)), tacc[i], tacc[i + 1]);
  wgmma::fence_proxy_async();
  __syncthreads();  // Tᵀ dT visible; dT read by every warpgroup

  // dA = −(Tᵀ dT) Tᵀ (A = Tᵀ dT K-major, hi then lo; B[r][s] = T[s][r], K-major).
  // Mutant: (T dTᵀ) T (B[r][s] = T[r][s], N-major).
  float acc[16];
  zero_acc(acc);
  wgmma::fence_operand(acc);
  wgmma::fence();
  if (mu.ut_transposed) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      mma32<0, 1>(acc, wgmma::desc(tdhi, scores_along_k(kk)), wgmma::desc(Tt, scores_along_n(wg, kk)));
      mma32<0, 1>(acc, wgmma::desc(tdlo, scores_along_k(kk)), wgmma::desc(Tt, scores_along_n(wg, kk)));
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      mma32<0, 0>(acc, wgmma::desc(tdhi, scores_along_k(kk)), wgmma::desc(Tt, scores_along_k(kk, wg)));
      mma32<0, 0>(acc, wgmma::desc(tdlo, scores_along_k(kk)), wgmma::desc(Tt, scores_along_k(kk, wg)));
    }
  }
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operand(acc);
  // E = β_t dA_ts Γ_ts over dT (read by every warpgroup before the last barrier).
  [[maybe_unused]] float pcol[4][2] = {};  // scalar: Σ over the unit's rows of E (KWᵀ), columns 8j + 2q (+1)
#pragma unroll
  for (int i = 0; i < 16; i += 2) {
    const int t = row_of(i);
    float x[2];
#pragma unroll
    for (int o = 0; o < 2; ++o) {
      const int sc = s0 + col_of(i) + o;
      // mutant wy-backward-offblock-dropped: dA kept on the 16 × 16 diagonal blocks only.
      const float da = sc < t && (mu.offblock || t / 16 == sc / 16) ? -acc[i + o] : 0.0f;
      // Γ on the strictly causal pairs only (above the diagonal e^{b_t − b_s} can
      // overflow, and inf·0 is NaN: mutant backward-gate-exp-unmasked).
      const float gam = D != Decay::scalar ? 1.0f : sc < t || mu.exp_unmasked ? expf(bg[t] - bg[sc]) : 0.0f;
      const float G = sc < t ? kkacc[i + o] * gam : 0.0f;
      betar[(i % 4) / 2] = fmaf(da, G, betar[(i % 4) / 2]);
      x[o] = bt[t] * da * gam;  // E = β_t dA_ts Γ_ts
      if constexpr (D == Decay::scalar) {
        const float p = x[o] * kkacc[i + o];
        dbr[(i % 4) / 2] += p;
        pcol[i / 4][o] += p;
      }
    }
    put_wide_s(Ehi, Elo, score_tile(t, s0 + col_of(i)), x[0], x[1]);
  }
  if constexpr (D == Decay::scalar)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int o = 0; o < 2; ++o) {
        const float v = group_sum(pcol[j][o]);
        if (L.g == 0) colp[strip * kChunk + s0 + 8 * j + 2 * L.q + o] = v;
      }
  // dw starts from dWk (the write key's gradient from the output's reads), this
  // thread's pairs, loaded while E is shared.
  const float* dWk = w.dWk + wrow * K;
  float dw[32];
#pragma unroll
  for (int i = 0; i < 32; i += 2) {
    const int t = row_of(i);
    const float2 x = t < c ? *reinterpret_cast<const float2*>(dWk + t * K + v0 + col_of(i)) : make_float2(0.0f, 0.0f);
    dw[i] = x.x, dw[i + 1] = x.y;
  }
  wgmma::fence_proxy_async();
  __syncthreads();  // E visible

  // dk += E W (A = E K-major, B = W N-major), dw += Eᵀ K (A[t][s] = E[s][t] M-major).
  wgmma::fence_operand(dk);
  wgmma::fence_operand(dw);
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    mma64<0, 1>(dk, wgmma::desc(Ehi, scores_along_k(kk)), wgmma::desc(kt, keys_along_n(wg, kk)));
    mma64<0, 1>(dk, wgmma::desc(Elo, scores_along_k(kk)), wgmma::desc(kt, keys_along_n(wg, kk)));
  }
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    mma64<1, 1>(dw, wgmma::desc(Ehi, scores_along_m(kk)), wgmma::desc(kt, keys_along_n(wg, kk)));
    mma64<1, 1>(dw, wgmma::desc(Elo, scores_along_m(kk)), wgmma::desc(kt, keys_along_n(wg, kk)));
  }
  wgmma::commit();
  // dβ's and db's row sums meanwhile (the barrier below orders them).
  {
    const float r0 = quad_sum(betar[0]), r1 = quad_sum(betar[1]);
    if (L.q == 0) betap[wg * kChunk + m0 + L.g] = r0, betap[wg * kChunk + m0 + L.g + 8] = r1;
  }
  if constexpr (D == Decay::scalar) {
    const float r0 = quad_sum(dbr[0]), r1 = quad_sum(dbr[1]);
    if (L.q == 0) rowp[wg * kChunk + m0 + L.g] = r0, rowp[wg * kChunk + m0 + L.g + 8] = r1;
  }
  wgmma::wait<0>();
  wgmma::fence_operand(dk);
  wgmma::fence_operand(dw);
  // The read and the write key's gradients, each narrowed, summed.
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int t = row_of(i);
    if (t >= c) continue;
    put_grad(a.dk_out, a.out.dk, (row0 + t * rs) * K + v0 + col_of(i), narrow<bf16>(dk[i]) + narrow<bf16>(dw[i]));
  }
  __syncthreads();
  if (threadIdx.x < c) {
    const int t = threadIdx.x;
    put_grad(a.dbeta_out, a.out.dbeta, row0 + t * rs, narrow<bf16>(mu.dbeta_sign * (betap[t] + betap[kChunk + t])));
  }
  // dg: the chunk-local reverse cumulative sum of db (stage 5's partials first).
  if constexpr (D == Decay::scalar)  // betap reused: dβ is written
    wy_scalar_dg(a, w, bh, t0, row0, rs, c, rowp, colp, betap, mu.dg_exclusive);
#else
  __trap();  // not an sm_90a build of this kernel: the launcher never gets here
#endif
}

template <Decay D>
void launch(const Args<bf16>& a, const Work& w, unsigned BH, cudaStream_t stream) {
  auto* kernel = wy_wgmma<D>;
  allow_smem(kernel, kSmem, "the Hopper wy stage");
  kernel<<<dim3(a.s.NT, BH), kThreads, kSmem, stream>>>(a, w);
  TTR_CUDA_CHECK_LAUNCH("wy_wgmma");
}

}  // namespace

bool hopper_wy_chosen(Decay d, int K, int V, bool own_w) {
  // The default where it applies (TTR_GPU_WY unset, empty or "wgmma"); "mma" names the
  // mma.sync stage, which every other shape takes. Any other value is refused, not
  // taken for a default: a misspelt switch must not time the stage it meant to avoid.
  const std::string t = env_switch("TTR_GPU_WY", {"wgmma", "mma"}, "wgmma (the default) or mma");
  return t != "mma" && d != Decay::per_key && K == kKV && V == kKV && !own_w && hopper_state_pass_available();
}

void launch_hopper_wy(Decay d, const Args<bf16>& a, const Work& w, unsigned BH, cudaStream_t stream) {
  switch (d) {
    case Decay::none: return launch<Decay::none>(a, w, BH, stream);
    case Decay::scalar: return launch<Decay::scalar>(a, w, BH, stream);
    case Decay::per_key: break;  // hopper_wy_chosen refuses it
  }
  throw std::invalid_argument("the Hopper wy stage has no per-key gate");
}

}  // namespace ttr::gpu::chunk_bwd
