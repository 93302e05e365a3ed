// The bf16 chunk forward's three stages on raw mma.sync fragments
// (gpu/core/mma_sync.cuh): the same algorithm, the same narrowing points and
// fp32 accumulation as the generic kernels in delta_chunk_fp32.cuh (which remain the
// fp32 path, FMA only), arranged for speed:
//   * products accumulate in registers and are masked, decayed and narrowed
//     there, then stored as bf16 pairs: no fp32 staging tiles, no passes with
//     run-time index division;
//   * the state pass keeps the running fp32 state S in the accumulator
//     fragments of S += wᵀΔ across all chunks (each warp owns 16 state rows), so
//     a step is two barriers and no fp32 shared-memory traffic;
//   * triangular operands (the UT inverse T, the causal scores) skip the
//     16-wide k-steps that are exactly zero;
//   * the output stage covers all of V per (chunk, head): Q wᵀ once.
// Included by delta_chunk.cu inside ttr::gpu::(anonymous), after Shape/Work.

namespace bf16k {

using mma::bf16;
using mma::load_a;
using mma::load_a_trans;
using mma::load_b1;
using mma::load_b2;
using mma::load_b2_trans;
using mma::mma_bf16;
using mma::pack_bf16;
using mma::unpack_bf16;

__device__ inline void st2(bf16* p, unsigned x) { *reinterpret_cast<unsigned*>(p) = x; }
__device__ inline unsigned ld2(const bf16* p) { return *reinterpret_cast<const unsigned*>(p); }

// ---------------------------------------------------------------- stage 1
// KV (here and below): K = V = KV known at compile time (0: the shape's, at run time).
// GIVEN_T: work.Tn holds the chunk's narrowed inverse already (Work::t_given): loaded
// with the tiles instead of forming A and inverting it; W, U are the same bits.
template <Decay D, int KV = 0, bool GIVEN_T = false>
__global__ void __launch_bounds__(kThreads) ut_transform(Shape s, const bf16* __restrict__ k,
                                                         const bf16* __restrict__ w, const bf16* __restrict__ v,
                                                         const bf16* __restrict__ beta, const float* __restrict__ g,
                                                         bool kaczmarz, float eps, Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0);
  const int K = KV ? KV : s.K, V = KV ? KV : s.V, ldk = padded_ld<bf16>(K), ldv = padded_ld<bf16>(V);
  constexpr int ldc = padded_ld<bf16>(kChunk), lda = padded_ld<float>(kChunk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, qd = lane % 4;
  SmemArena arena{smem};
  bf16* kt = arena.take<bf16>(kChunk, K);
  bf16* wt = w ? arena.take<bf16>(kChunk, K) : kt;
  bf16* vt = arena.take<bf16>(kChunk, V);
  bf16* tn = arena.take<bf16>(kChunk, kChunk);
  float* A = GIVEN_T ? nullptr : arena.take<float>(kChunk, kChunk);  // (GIVEN_T: 17 KB less, more blocks)
  float* bg = arena.take<float>(kChunk, s.Kg);
  float* bt = arena.take<float>(1, kChunk);
  float* eb = arena.take<float>(1, kChunk);
  const int ldg = padded_ld<float>(s.Kg);

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;  // (b, t0, h)
  load_rows_async(kt, ldk, k + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  if (w) load_rows_async(wt, ldk, w + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows_async(vt, ldv, v + row0 * V, static_cast<std::int64_t>(s.H) * V, kChunk, c, V);
  if constexpr (GIVEN_T)
    load_rows_async(tn, ldc, static_cast<const bf16*>(work.Tn) + (static_cast<std::int64_t>(bh) * s.NT + n) * kChunk * kChunk,
                    kChunk, kChunk, kChunk, kChunk);
  cp_async_commit();
  if (threadIdx.x < kChunk) {
    const int t = threadIdx.x;
    bt[t] = t < c ? __bfloat162float(beta[row0 + static_cast<std::int64_t>(t) * s.H]) : 0.0f;
  }
  // b_t = Σ_{s ≤ t} g_s in fp32, in token order (cumulative_gates); padding adds 0.
  for (int i = threadIdx.x; i < kChunk * s.Kg; i += blockDim.x) {
    const int t = i / s.Kg, d = i % s.Kg;
    bg[t * ldg + d] = (D != Decay::none && t < c) ? g[(row0 + static_cast<std::int64_t>(t) * s.H) * s.Kg + d] : 0.0f;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < s.Kg; d += blockDim.x) {
    float acc = 0.0f;
    for (int t = 0; t < kChunk; ++t) bg[t * ldg + d] = acc += bg[t * ldg + d];
  }
  cp_async_wait<0>();
  __syncthreads();
  if (D == Decay::scalar && threadIdx.x < kChunk) eb[threadIdx.x] = expf(bg[threadIdx.x * ldg]);
  // Kaczmarz (KLA-Z eq. (3)): β̃ = β/(‖k‖² + eps) in fp32 from the stored key, stored in E.
  if (kaczmarz && threadIdx.x < c) {
    const int t = threadIdx.x;
    float kk = 0.0f;
    for (int d = 0; d < K; ++d) {
      const float x = __bfloat162float(kt[t * ldk + d]);
      kk += x * x;
    }
    bt[t] = narrow<bf16>(bt[t] / (kk + eps));
  }
  __syncthreads();
  // A = tril(Diag(β) [K Wᵀ ⊙ Γ], −1) in fp32. Warp: rows 16m.., columns 32·half..;
  // tiles wholly above the diagonal are zeros.
  if constexpr (!GIVEN_T) {
    const int m0 = 16 * (warp % 4), c0 = 32 * (warp / 4);
    float acc[4][4] = {};
    if (D != Decay::per_key && c0 < m0 + 16) {
      for (int k0 = 0; k0 < K; k0 += 16) {
        unsigned a[4], bb[4];
        load_a(a, kt, ldk, m0, k0);
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          load_b2_trans(bb, wt, ldk, c0 + 16 * p, k0);
          mma_bf16(acc[2 * p], a, bb);
          mma_bf16(acc[2 * p + 1], a, bb + 2);
        }
      }
    }
#pragma unroll
    for (int je = 0; je < 16; ++je) {
      const int j = je / 4, e = je % 4;
      {
        const int t = m0 + gq + 8 * (e / 2), col = c0 + 8 * j + 2 * qd + e % 2;
        float a = 0.0f;
        if (col < t) {
          if constexpr (D == Decay::per_key) {
            for (int d = 0; d < K; ++d)
              a = fmaf(__bfloat162float(kt[t * ldk + d]) * __bfloat162float(wt[col * ldk + d]),
                       expf(bg[t * ldg + d] - bg[col * ldg + d]), a);
          } else {
            a = acc[j][e];
            if constexpr (D == Decay::scalar) a *= expf(bg[t * ldg] - bg[col * ldg]);
          }
          a *= bt[t];
        }
        A[t * lda + col] = a;
      }
    }
  }
  // The write keys decayed to the chunk end, narrow(w ⊙ e^{b_last − b_t}), for the
  // state pass; β ⊙ V over the v tile. A warp per row, a bf16 pair per lane.
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0;
  {
    bf16* WDg = static_cast<bf16*>(work.WD) + wrow * K;
    const float* blast = bg + (kChunk - 1) * ldg;
    for (int t = warp; t < kChunk; t += kThreads / 32) {
      for (int d = 2 * lane; d < K; d += 64) {
        float2 x = unpack_bf16(ld2(wt + t * ldk + d));
        if constexpr (D == Decay::scalar) {
          const float f = expf(blast[0] - bg[t * ldg]);
          x.x *= f, x.y *= f;
        }
        if constexpr (D == Decay::per_key) {
          x.x *= expf(blast[d] - bg[t * ldg + d]);
          x.y *= expf(blast[d + 1] - bg[t * ldg + d + 1]);
        }
        st2(WDg + static_cast<std::int64_t>(t) * K + d, pack_bf16(x.x, x.y));
      }
      for (int j = 2 * lane; j < V; j += 64) {
        const float2 x = unpack_bf16(ld2(vt + t * ldv + j));
        st2(vt + t * ldv + j, pack_bf16(bt[t] * x.x, bt[t] * x.y));
      }
    }
  }
  __syncthreads();  // A complete; kt and wt no longer read as they are
  // β ⊙ K ⊙ e^{b}: the decayed key narrowed, then β times it narrowed, over kt.
  for (int t = warp; t < kChunk; t += kThreads / 32)
    for (int d = 2 * lane; d < K; d += 64) {
      float2 x = unpack_bf16(ld2(kt + t * ldk + d));
      if constexpr (D == Decay::scalar) x = unpack_bf16(pack_bf16(x.x * eb[t], x.y * eb[t]));
      if constexpr (D == Decay::per_key)
        x = unpack_bf16(pack_bf16(x.x * expf(bg[t * ldg + d]), x.y * expf(bg[t * ldg + d + 1])));
      st2(kt + t * ldk + d, pack_bf16(bt[t] * x.x, bt[t] * x.y));
    }
  // T = (I + A)⁻¹ (delta_chunk.cu: unit_lower_inverse), stored narrowed (FLA's solve_tril).
  // The backward (delta_chunk_stages.cuh) also takes it from here.
  if constexpr (!GIVEN_T)
    unit_lower_inverse(A, lda, [&](int t, int j, float x) { tn[t * ldc + j] = __float2bfloat16_rn(x); });
  __syncthreads();
  // Kept for the backward from the tile, 16 bytes a thread (stored as the inverse
  // formed it, 2 bytes an entry, it was 64 scattered stores a thread).
  if constexpr (!GIVEN_T)
    if (work.Tn)
      store_rows(static_cast<bf16*>(work.Tn) + (static_cast<std::int64_t>(bh) * s.NT + n) * kChunk * kChunk, kChunk, tn,
                 ldc, kChunk, kChunk);
  // W = T (β ⊙ K ⊙ e^{b}),  U = T (β ⊙ V), stored narrowed (FLA's w, u). T is unit
  // lower triangular: k-steps past the warp's row strip are exact zeros.
  {
    const int m0 = 16 * (warp % 4), half = warp / 4;
    bf16* Wg = static_cast<bf16*>(work.W) + wrow * K;
    bf16* Ug = static_cast<bf16*>(work.U) + wrow * V;
    auto product = [&](const bf16* X, int ldx, int N, bf16* out) {
      const int pairs = N / 16;
      float acc[4][2][4] = {};
      for (int s0 = 0; s0 <= m0; s0 += 16) {
        unsigned a[4];
        load_a(a, tn, ldc, m0, s0);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int p = half + 2 * i;
          if (p < pairs) {
            unsigned bb[4];
            load_b2(bb, X, ldx, s0, 16 * p);
            mma_bf16(acc[i][0], a, bb);
            mma_bf16(acc[i][1], a, bb + 2);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int p = half + 2 * i;
        if (p < pairs) {
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) {
            const int col = 16 * p + 8 * jj + 2 * qd, ta = m0 + gq;
            st2(out + static_cast<std::int64_t>(ta) * N + col, pack_bf16(acc[i][jj][0], acc[i][jj][1]));
            st2(out + static_cast<std::int64_t>(ta + 8) * N + col, pack_bf16(acc[i][jj][2], acc[i][jj][3]));
          }
        }
      }
    };
    product(kt, ldk, K, Wg);
    product(vt, ldv, V, Ug);
  }
  float* Gg = work.G + wrow * s.Kg;
  for (int i = threadIdx.x; i < kChunk * s.Kg; i += blockDim.x) Gg[i] = bg[(i / s.Kg) * ldg + i % s.Kg];
}

inline std::size_t ut_smem(const Shape& s, bool separate_w, bool given_t = false) {
  return tile_bytes<bf16>(kChunk, s.K) * (separate_w ? 2 : 1) + tile_bytes<bf16>(kChunk, s.V) +
         tile_bytes<bf16>(kChunk, kChunk) + (given_t ? 0 : tile_bytes<float>(kChunk, kChunk)) +
         tile_bytes<float>(kChunk, s.Kg) + 2 * tile_bytes<float>(1, kChunk);
}

// ---------------------------------------------------------------- stage 2
// Block: BV state columns of one head, SPLIT·K/16 warps, warp w owning state rows
// 16(w mod K/16) .. +15 of the columns' part ⌊w / (K/16)⌋ (of SPLIT) as mma
// accumulators (S never leaves registers until ht). Every element's arithmetic is
// the same sequence of mma steps whatever BV and SPLIT, so the tilings give the same
// bits (CudaDelta.StatePassTilingsGiveTheSameBits). SPLIT = 2 at BV = 32: a block
// reads the chunk's W tiles once for 32 columns (half the L2 traffic of BV = 16,
// which bounds the pass: docs/gpu-delta-backward-speed-2026-12-06.md) with the per-warp work of
// BV = 16. CLUSTER: the column blocks of a head run as one thread-block cluster and
// share the chunk's W and W ⊙ e^{b_last−b} tiles, each block fetching 64/size of their
// rows for all (gpu/core/cluster.cuh): the L2 reads of W fall by the cluster's size.
// `stages` buffers of the per-chunk inputs (2 or 3: chunk n + 1, or n + 1 and n + 2,
// load while n computes; the clusters take 2).
template <Decay D, int BV, int KV = 0, int SPLIT = 1, bool CLUSTER = false>
__global__ void __launch_bounds__(SPLIT* kThreads) state_pass(Shape s, const float* __restrict__ h0,
                                                              float* __restrict__ ht, Work work, int stages) {
  static_assert(SPLIT == 1 || SPLIT == 2, "one or two warps a strip");
  static_assert(BV % (16 * SPLIT) == 0, "whole 16-column units a warp");
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int NT8 = BV / 8, NW8 = NT8 / SPLIT, ldb = padded_ld<bf16>(BV);  // NW8: a warp's 8-column tiles
  const int j0 = blockIdx.x * BV, bh = blockIdx.y;
  const int K = KV ? KV : s.K, V = KV ? KV : s.V, ldk = padded_ld<bf16>(K);
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = threadIdx.x % 32, gq = lane / 4, qd = lane % 4;
  // (SPLIT = 1: the block is one warp a strip, so no division)
  const int strip = SPLIT == 1 ? warp : warp % (K / 16);
  const int c0 = SPLIT == 1 ? 0 : (warp / (K / 16)) * (BV / SPLIT);  // this warp's first column
  const int r0 = 16 * strip + gq, r1 = r0 + 8;
  // Gates per chunk: only b_last is needed (scalar: the aligned last 4 floats).
  const int gn = D == Decay::per_key ? K : 4;
  SmemArena arena{smem};
  bf16* hs = arena.take<bf16>(K, BV);
  bf16* Dt = arena.take<bf16>(kChunk, BV);
  // CLUSTER: one mbarrier a buffer, completing when the W tiles of its chunk have landed.
  [[maybe_unused]] std::uint64_t* full = CLUSTER ? arena.take<std::uint64_t>(1, 2) : nullptr;
  // `stages` buffers of the per-chunk inputs, loaded by cp.async ahead of their chunk,
  // addressed as base + buf · stride (no pointer arrays: they would live in local
  // memory under a run-time index).
  unsigned char* stage0 = arena.p;
  bf16* Wb0 = arena.take<bf16>(kChunk, K);
  bf16* wb0 = arena.take<bf16>(kChunk, K);
  bf16* Ub0 = arena.take<bf16>(kChunk, BV);
  float* gb0 = arena.take<float>(1, gn);
  const int stride = static_cast<int>(arena.p - stage0);  // bytes; a multiple of 128
  auto at = [&](auto* p0, int buf) {
    return reinterpret_cast<decltype(p0)>(reinterpret_cast<unsigned char*>(p0) + buf * stride);
  };

  const std::int64_t sbase = static_cast<std::int64_t>(bh) * K * V;
  float S[NW8][4];
#pragma unroll
  for (int nt = 0; nt < NW8; ++nt) {
    const int col = j0 + c0 + 8 * nt + 2 * qd;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      S[nt][e] = h0 ? h0[sbase + static_cast<std::int64_t>(e < 2 ? r0 : r1) * V + col + e % 2] : 0.0f;
  }
  const bf16* Wg = static_cast<const bf16*>(work.W) + static_cast<std::int64_t>(bh) * s.Tp * K;
  const bf16* Ug = static_cast<const bf16*>(work.U) + static_cast<std::int64_t>(bh) * s.Tp * V + j0;
  const float* Gg = work.G + static_cast<std::int64_t>(bh) * s.Tp * s.Kg;
  const bf16* WDg = static_cast<const bf16*>(work.WD) + static_cast<std::int64_t>(bh) * s.Tp * K;
  const std::int64_t hbase = static_cast<std::int64_t>(bh) * s.NT * K * V + j0;
  bf16* Dg = static_cast<bf16*>(work.D) + static_cast<std::int64_t>(bh) * s.Tp * V + j0;
  // CLUSTER: this block's share of each W tile's rows, and the blocks it multicasts to.
  [[maybe_unused]] const int share = CLUSTER ? kChunk / static_cast<int>(cluster::size()) : kChunk;
  [[maybe_unused]] const int first_row = CLUSTER ? static_cast<int>(cluster::rank()) * share : 0;
  [[maybe_unused]] const auto everyone = static_cast<std::uint16_t>(CLUSTER ? (1u << cluster::size()) - 1 : 1);
  // The buffer of chunk n: stages is 2 or 3, so no run-time integer division (twice a chunk).
  auto buffer_of = [stages](int n) { return stages == 3 ? n % 3 : n & 1; };
  auto prefetch = [&](int n) {
    const int t0 = n * kChunk, buf = buffer_of(n);
    if constexpr (CLUSTER) {
      // Armed with both tiles' bytes here; the rows land from every block of the cluster.
      if (threadIdx.x == 0) cluster::arrive_expect_bytes(full + buf, 2u * kChunk * K * sizeof(bf16));
      for (int i = threadIdx.x; i < 2 * share; i += blockDim.x) {
        const int r = first_row + i % share;
        const bf16* src = (i < share ? Wg : WDg) + static_cast<std::int64_t>(t0 + r) * K;
        cluster::copy_multicast(at(i < share ? Wb0 : wb0, buf) + r * ldk, src, K * sizeof(bf16), full + buf, everyone);
      }
    } else {
      load_rows_async(at(Wb0, buf), ldk, Wg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
      load_rows_async(at(wb0, buf), ldk, WDg + static_cast<std::int64_t>(t0) * K, K, kChunk, kChunk, K);
    }
    load_rows_async(at(Ub0, buf), ldb, Ug + static_cast<std::int64_t>(t0) * V, V, kChunk, kChunk, BV);
    if constexpr (D == Decay::per_key) load_flat_async(at(gb0, buf), Gg + static_cast<std::int64_t>(t0 + kChunk - 1) * K, K);
    if constexpr (D == Decay::scalar) load_flat_async(at(gb0, buf), Gg + t0 + kChunk - 4, 4);
    cp_async_commit();
  };
  const int len = s.len(bh / s.H), NT = s.chunks(bh / s.H);  // this sequence's chunks (varlen; a cluster's blocks share it)
  // CLUSTER: a buffer is refilled only once every block has read it (chunk n − 1's
  // arrive, chunk n's wait before prefetch(n + 1)); the arrive before the loop stands
  // for the second buffer's first fill, the wait after it pairs the last arrive.
  if constexpr (CLUSTER) {
    if (threadIdx.x == 0) cluster::mbarrier_init(full, 1), cluster::mbarrier_init(full + 1, 1), cluster::fence_mbarrier_init();
    cluster::sync();  // every block's mbarriers initialised before any copy signals them
  }
  // Three stages: one group committed per chunk ahead (empty past the last), so that
  // waiting for all but the newest group is waiting for this chunk's.
  if (NT > 0) prefetch(0);
  if (stages == 3) NT > 1 ? prefetch(1) : cp_async_commit();
  if constexpr (CLUSTER) cluster::arrive();
  for (int n = 0; n < NT; ++n) {
    const int t0 = n * kChunk, c = min(kChunk, len - t0), buf = buffer_of(n);
    // h_n = narrow(S): the chunk-initial state as an operand, here, and stored from
    // this tile after the barrier. (hs was last read by the previous step's Δ
    // product, before its second barrier.)
    const std::int64_t hn = hbase + static_cast<std::int64_t>(n) * K * V;
#pragma unroll
    for (int nt = 0; nt < NW8; ++nt) {
      const int col = c0 + 8 * nt + 2 * qd;
      st2(hs + r0 * ldb + col, pack_bf16(S[nt][0], S[nt][1]));
      st2(hs + r1 * ldb + col, pack_bf16(S[nt][2], S[nt][3]));
    }
    if (stages == 3) cp_async_wait<1>();
    else cp_async_wait<0>();
    if constexpr (CLUSTER) cluster::wait_phase(full + buf, (n >> 1) & 1);
    __syncthreads();  // chunk n's tiles and h_n visible; chunk n − 1's buffers free
    if constexpr (CLUSTER) cluster::wait();  // … in every block of the cluster
    if (stages == 3) n + 2 < NT ? prefetch(n + 2) : cp_async_commit();
    else if (n + 1 < NT) prefetch(n + 1);
    // narrow(S) to global memory, 16 bytes a lane from the tile: stored by each lane
    // from its accumulators instead, 4 bytes at a time (half a 32-byte sector per
    // quad and store), the backward's bf16 copy cost its recomputing pass +85 %
    // (H100, docs/gpu-delta-backward-speed-history.md).
    store_rows(static_cast<bf16*>(work.Hs) + hn, V, hs, ldb, K, BV);
    // Δ = narrow(U − W h_n). Where the block has at least as many 16 × 16 output units
    // as warps (32 columns and 8 warps: one each), a warp takes 16 rows × 16 columns: one
    // A fragment and one B fragment of two n-tiles a step feed two independent mma, where
    // two 16 × 8 units one after the other were a chain of 2K/16 dependent mma and twice
    // the A loads (ncu, H100: the pass waits on those chains; docs/gpu-delta-backward-speed.md).
    // Each element gets the same mma steps either way, so the same bits.
    const bf16* Wt = at(Wb0, buf);
    const bf16* Ut = at(Ub0, buf);
    auto delta_out = [&](const float (&acc)[4], int m0, int n0) {
      const int ta = m0 + gq, tb = ta + 8, col = n0 + 2 * qd;
      const float2 ua = unpack_bf16(ld2(Ut + ta * ldb + col)), ub = unpack_bf16(ld2(Ut + tb * ldb + col));
      st2(Dt + ta * ldb + col, pack_bf16(ua.x - acc[0], ua.y - acc[1]));
      st2(Dt + tb * ldb + col, pack_bf16(ub.x - acc[2], ub.y - acc[3]));
    };
    if (NT8 % 2 == 0 && 2 * NT8 >= warps) {
      for (int u = warp; u < 2 * NT8; u += warps) {
        const int m0 = (u / (NT8 / 2)) * 16, n0 = (u % (NT8 / 2)) * 16;
        float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
        for (int k0 = 0; k0 < K; k0 += 16) {
          unsigned a[4], bb[4];
          load_a(a, Wt, ldk, m0, k0);
          load_b2(bb, hs, ldb, k0, n0);
          mma_bf16(acc[0], a, bb);
          mma_bf16(acc[1], a, bb + 2);
        }
        delta_out(acc[0], m0, n0);
        delta_out(acc[1], m0, n0 + 8);
      }
    } else {
      for (int u = warp; u < 4 * NT8; u += warps) {
        const int m0 = (u / NT8) * 16, n0 = (u % NT8) * 8;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int k0 = 0; k0 < K; k0 += 16) {
          unsigned a[4], bb[2];
          load_a(a, Wt, ldk, m0, k0);
          load_b1(bb, hs, ldb, k0, n0);
          mma_bf16(acc, a, bb);
        }
        delta_out(acc, m0, n0);
      }
    }
    __syncthreads();  // Δ visible
    // Δ's valid rows to global memory from the tile (read here and by the update
    // below; next written after the following chunk's first barrier).
    store_rows(Dg + static_cast<std::int64_t>(t0) * V, V, Dt, ldb, c, BV);
    // S ← Diag(e^{b_last}) S + (w ⊙ e^{b_last − b})ᵀ Δ (decayed write keys from stage 1).
    if constexpr (D != Decay::none) {
      const float* gl = at(gb0, buf);
      const float f0 = expf(gl[D == Decay::per_key ? r0 : 3]), f1 = expf(gl[D == Decay::per_key ? r1 : 3]);
#pragma unroll
      for (int nt = 0; nt < NW8; ++nt) S[nt][0] *= f0, S[nt][1] *= f0, S[nt][2] *= f1, S[nt][3] *= f1;
    }
    const bf16* wt = at(wb0, buf);
#pragma unroll
    for (int s0 = 0; s0 < kChunk; s0 += 16) {
      unsigned a[4];
      load_a_trans(a, wt, ldk, 16 * strip, s0);
#pragma unroll
      for (int p = 0; p < NW8 / 2; ++p) {
        unsigned bb[4];
        load_b2(bb, Dt, ldb, s0, c0 + 16 * p);
        mma_bf16(S[2 * p], a, bb);
        mma_bf16(S[2 * p + 1], a, bb + 2);
      }
    }
    if constexpr (CLUSTER) cluster::arrive();  // this block is done with chunk n's buffer
  }
  if constexpr (CLUSTER) cluster::wait();
  if (ht) {
#pragma unroll
    for (int nt = 0; nt < NW8; ++nt) {
      const int col = j0 + c0 + 8 * nt + 2 * qd;
      *reinterpret_cast<float2*>(ht + sbase + static_cast<std::int64_t>(r0) * V + col) = make_float2(S[nt][0], S[nt][1]);
      *reinterpret_cast<float2*>(ht + sbase + static_cast<std::int64_t>(r1) * V + col) = make_float2(S[nt][2], S[nt][3]);
    }
  }
}

template <Decay D>
std::size_t state_smem(const Shape& s, int bv, bool cluster = false, int stages = 2) {
  return tile_bytes<bf16>(s.K, bv) + tile_bytes<bf16>(kChunk, bv) + (cluster ? tile_bytes<std::uint64_t>(1, 2) : 0) +
         stages * (2 * tile_bytes<bf16>(kChunk, s.K) + tile_bytes<bf16>(kChunk, bv) +
                   tile_bytes<float>(1, D == Decay::per_key ? s.K : 4));
}

// ---------------------------------------------------------------- stage 3
// Block: one chunk of one head, all V columns; warp w: rows 16·(w % 4).., half w / 4.
template <Decay D, int KV = 0>
__global__ void __launch_bounds__(kThreads) output(Shape s, const bf16* __restrict__ q,
                                                   const bf16* __restrict__ wkey, float scale, bf16* __restrict__ o,
                                                   Work work) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int n = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int t0 = n * kChunk, len = s.len(b);
  if (t0 >= len) return;  // past this sequence's end (varlen)
  const int c = min(kChunk, len - t0);
  const int K = KV ? KV : s.K, V = KV ? KV : s.V, ldk = padded_ld<bf16>(K), ldv = padded_ld<bf16>(V), Kg = s.Kg;
  constexpr int ldc = padded_ld<bf16>(kChunk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, qd = lane % 4;
  const int m0 = 16 * (warp % 4), half = warp / 4, ta = m0 + gq, tb = ta + 8;
  SmemArena arena{smem};
  bf16* qt = arena.take<bf16>(kChunk, K);
  bf16* wt = arena.take<bf16>(kChunk, K);
  bf16* hs = arena.take<bf16>(K, V);
  bf16* Dt = arena.take<bf16>(kChunk, V);
  bf16* sc = arena.take<bf16>(kChunk, kChunk);
  float* bg = arena.take<float>(1, kChunk * Kg);  // flat [t][d]

  const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
  const std::int64_t wrow = static_cast<std::int64_t>(bh) * s.Tp + t0;
  load_rows_async(qt, ldk, q + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  load_rows_async(wt, ldk, wkey + row0 * K, static_cast<std::int64_t>(s.H) * K, kChunk, c, K);
  if constexpr (D != Decay::none) load_flat_async(bg, work.G + wrow * Kg, kChunk * Kg);
  cp_async_commit();
  load_rows_async(hs, ldv, static_cast<const bf16*>(work.Hs) + (static_cast<std::int64_t>(bh) * s.NT + n) * K * V, V,
                  K, K, V);
  load_rows_async(Dt, ldv, static_cast<const bf16*>(work.D) + wrow * V, V, kChunk, c, V);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  // Scores [Q wᵀ ⊙ Γ]_{s ≤ t}, narrowed (the masked score matrix as an operand).
  if constexpr (D != Decay::per_key) {
    const int c0 = 32 * half;
    if (c0 < m0 + 16) {
      float acc[4][4] = {};
      for (int k0 = 0; k0 < K; k0 += 16) {
        unsigned a[4], bb[4];
        load_a(a, qt, ldk, m0, k0);
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          load_b2_trans(bb, wt, ldk, c0 + 16 * p, k0);
          mma_bf16(acc[2 * p], a, bb);
          mma_bf16(acc[2 * p + 1], a, bb + 2);
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float x[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int t = e < 2 ? ta : tb, col = c0 + 8 * j + 2 * qd + e % 2;
          float a = 0.0f;
          if (col <= t) {
            a = acc[j][e];
            if constexpr (D == Decay::scalar) a *= expf(bg[t] - bg[col]);
          }
          x[e] = a;
        }
        const int col = c0 + 8 * j + 2 * qd;
        st2(sc + ta * ldc + col, pack_bf16(x[0], x[1]));
        st2(sc + tb * ldc + col, pack_bf16(x[2], x[3]));
      }
    }
  } else {
    for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
      const int t = i / kChunk, j = i % kChunk;
      float a = 0.0f;
      if (j <= t)
        for (int d = 0; d < K; ++d)
          a = fmaf(__bfloat162float(qt[t * ldk + d]) * __bfloat162float(wt[j * ldk + d]),
                   expf(bg[t * Kg + d] - bg[j * Kg + d]), a);
      sc[t * ldc + j] = __float2bfloat16_rn(a);
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  // O = (Q ⊙ e^{b}) h_n + scores Δ in one fp32 accumulator; Q ⊙ e^{b} is narrowed
  // in the fragment (rows ta, tb of the strip).
  const int pairs = V / 16;
  float acc[4][2][4] = {};
  float ea = 1.0f, eb = 1.0f;
  if constexpr (D == Decay::scalar) ea = expf(bg[ta]), eb = expf(bg[tb]);
  for (int k0 = 0; k0 < K; k0 += 16) {
    unsigned a[4];
    load_a(a, qt, ldk, m0, k0);
    if constexpr (D != Decay::none) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int t = r % 2 ? tb : ta, d = k0 + 2 * qd + 8 * (r / 2);
        float2 x = unpack_bf16(a[r]);
        if constexpr (D == Decay::scalar) {
          const float f = r % 2 ? eb : ea;
          x.x *= f, x.y *= f;
        } else {
          x.x *= expf(bg[t * Kg + d]), x.y *= expf(bg[t * Kg + d + 1]);
        }
        a[r] = pack_bf16(x.x, x.y);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int p = half + 2 * i;
      if (p < pairs) {
        unsigned bb[4];
        load_b2(bb, hs, ldv, k0, 16 * p);
        mma_bf16(acc[i][0], a, bb);
        mma_bf16(acc[i][1], a, bb + 2);
      }
    }
  }
  for (int s0 = 0; s0 <= m0; s0 += 16) {
    unsigned a[4];
    load_a(a, sc, ldc, m0, s0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int p = half + 2 * i;
      if (p < pairs) {
        unsigned bb[4];
        load_b2(bb, Dt, ldv, s0, 16 * p);
        mma_bf16(acc[i][0], a, bb);
        mma_bf16(acc[i][1], a, bb + 2);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int p = half + 2 * i;
    if (p < pairs) {
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        const int col = 16 * p + 8 * jj + 2 * qd;
        if (ta < c)
          st2(o + (row0 + static_cast<std::int64_t>(ta) * s.H) * V + col,
              pack_bf16(scale * acc[i][jj][0], scale * acc[i][jj][1]));
        if (tb < c)
          st2(o + (row0 + static_cast<std::int64_t>(tb) * s.H) * V + col,
              pack_bf16(scale * acc[i][jj][2], scale * acc[i][jj][3]));
      }
    }
  }
}

inline std::size_t output_smem(const Shape& s) {
  return 2 * tile_bytes<bf16>(kChunk, s.K) + tile_bytes<bf16>(s.K, s.V) + tile_bytes<bf16>(kChunk, s.V) +
         tile_bytes<bf16>(kChunk, kChunk) + tile_bytes<float>(1, kChunk * s.Kg);
}

}  // namespace bf16k
