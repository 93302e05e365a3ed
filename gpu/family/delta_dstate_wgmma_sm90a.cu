// Stage 4 of the bf16 chunk backward (delta_chunk_backward.cu) on Hopper's warpgroup
// MMA: the recurrence of chunk_bwd::dstate_pass (delta_chunk_backward/state_pass.cuh),
// last chunk first, with dS = dS_end in fp32 (reference/family/delta_chunk_backward.hpp):
//   rowdot_i = Σ_j dS_ij S_0,ij          (the gate term's row sums, summed by dqkwg)
//   dH = narrow(dS)                      (stored: FLA's dh)
//   dΔ = narrow(scale·Mᵀ dO + (W ⊙ e^{b_last − b}) dH)        (stored: FLA's dv2)
//   dS ← Diag(e^{b_last}) dS + scale·(Q ⊙ e^{b})ᵀ dO − Wᵀ dΔ
// and dh0 = dS at the end; the same narrowing points, fp32 accumulation, the products
// issued by one warpgroup as wgmma from swizzled shared-memory tiles (gpu/core/wgmma.cuh;
// why: delta_state_wgmma_sm90a.cu, and ncu's reading of dstate_pass,
// docs/gpu-delta-backward-speed.md). −Wᵀ dΔ accumulates straight into dS (the `wgmma`
// scale −1 on A) where the mma.sync pass forms it apart and subtracts: another fp32
// summation order, inside the form's model like the tensor core's own.
//
// Block: 32 columns of dS for one head (K = 128), 128 threads; dS is two m64n32
// accumulators (keys 0–63, 64–127). A chunk: rowdot and dH → dse from the
// accumulators; barrier; [Mᵀ dO → acc, (Q ⊙ e^b)ᵀ dO → tmp] as one wgmma group, dH
// stored meanwhile; acc·scale, dS decayed + scale·tmp; acc += WD dH; dΔ → Dt; barrier;
// dS += −Wᵀ dΔ, dΔ stored meanwhile. Three buffers of the chunk inputs (W, WD, QD, M,
// dO, the gates), cp.async into the swizzled layout two chunks ahead. The CUDA
// mutants of dstate_pass are here too (gpu/core/mutant.cuh).
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/core/check.cuh"
#include "gpu/core/launch.cuh"
#include "gpu/core/wgmma.cuh"
#include "gpu/family/delta_dstate_wgmma.hpp"
#include "gpu/family/delta_state_wgmma_layout.hpp"

namespace ttr::gpu::chunk_bwd {
namespace {

using namespace state_wgmma;  // the tile layouts and operands (delta_state_wgmma_layout.hpp)
constexpr int kThreadsW = 128;
constexpr int kTileM = kChunk * kRowM;  // the 64 × 64 scores
constexpr int kTileO = kChunk * kRowB;
// One buffer: W, WD, QD, M, dO, the gates (K floats at most), 1024-aligned.
constexpr int kStage = (3 * kTileW + kTileM + kTileO + kK * 4 + 1023) / 1024 * 1024;
constexpr int kStages = 3;
constexpr int kTileH = kK * kRowB, kTileD = kChunk * kRowB;
constexpr std::size_t kSmem = 1024 + kStages * kStage + kTileH + kTileD;

template <int SA, int TA, int TB>
__device__ __forceinline__ void mma(float (&d)[16], std::uint64_t da, std::uint64_t db) {
  wgmma::mma_m64n32k16<TA, TB, SA>(d, da, db, 1);
}

template <Decay D>
__global__ void __launch_bounds__(kThreadsW, 1) dstate_pass_wgmma(Args<bf16> a, Work w) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (wgmma::smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char* dse = smem + kStages * kStage;  // dH, [key][col]
  unsigned char* Dt = dse + kTileH;              // dΔ, [token][col]
  const Shape& s = a.s;
  const int V = s.V, tile = blockIdx.x, j0 = tile * kBV, bh = blockIdx.y, b = bh / s.H, h = bh % s.H;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gq = lane / 4, qd = lane % 4;
  auto key_of = [&](int mt, int i) { return 64 * mt + 16 * warp + gq + (i % 4 >= 2 ? 8 : 0); };
  auto col_of = [&](int i) { return 8 * (i / 4) + 2 * qd + i % 2; };  // within the tile
  const std::int64_t wbase = static_cast<std::int64_t>(bh) * s.Tp;
  const bf16* Wg = static_cast<const bf16*>(w.fwd.W) + wbase * kK;
  const bf16* WDg = static_cast<const bf16*>(w.fwd.WD) + wbase * kK;
  const bf16* QDg = static_cast<const bf16*>(w.QD) + wbase * kK;
  const bf16* Mg = static_cast<const bf16*>(w.M) + wbase * kChunk;
  const float* Gg = w.fwd.G + wbase * s.Kg;
  const int len = s.len(b), NT = s.chunks(b);

  // Copies: a thread's 16-byte chunk c16 of rows tid/16 + 8i of a 64 × 128 key tile, of
  // rows tid/8 + 16i of the scores; the rows of each differ by multiples of 8, so the
  // swizzled chunk is one per thread.
  const int wrow = tid / 16, c16 = tid % 16, mrow = tid / 8, c8 = tid % 8;
  const unsigned wdst = key_tile(wrow, c16 * 8), mdst = score_tile(mrow, c8 * 8);  // + 8i (16i) rows: + 8i (16i) rows' bytes
  auto prefetch = [&](int n) {
    unsigned char* st = smem + (n % kStages) * kStage;
    const int t0 = n * kChunk, c = min(kChunk, len - t0);
    const std::int64_t krow = static_cast<std::int64_t>(t0 + wrow) * kK + c16 * 8;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      cp_async16(st + wdst + i * 8 * kRowW, Wg + krow + i * 8 * kK);
      cp_async16(st + kTileW + wdst + i * 8 * kRowW, WDg + krow + i * 8 * kK);
      cp_async16(st + 2 * kTileW + wdst + i * 8 * kRowW, QDg + krow + i * 8 * kK);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      cp_async16(st + 3 * kTileW + mdst + i * 16 * kRowM, Mg + static_cast<std::int64_t>(t0 + mrow + 16 * i) * kChunk + c8 * 8);
    // dO [B, T, H, V] (or the packed tokens): rows past the sequence are zero.
    unsigned char* dOt = st + 3 * kTileW + kTileM;
    const std::int64_t row0 = (s.start(b) + t0) * s.H + h;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int v = tid + i * kThreadsW, r = v / 4, cc = v % 4;
      unsigned char* dst = dOt + col_tile(r, cc * 8);
      if (r < c) cp_async16(dst, a.do_ + (row0 + static_cast<std::int64_t>(r) * s.H) * V + j0 + cc * 8);
      else *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
    float* g = reinterpret_cast<float*>(dOt + kTileO);
    if constexpr (D == Decay::per_key) load_flat_async(g, Gg + static_cast<std::int64_t>(t0 + kChunk - 1) * kK, kK);
    if constexpr (D == Decay::scalar) load_flat_async(g, Gg + t0 + kChunk - 4, 4);
    cp_async_commit();
  };

  const std::int64_t sbase = static_cast<std::int64_t>(bh) * kK * V + j0;
  // mutant dht-ignored: the pass starts from zero whatever dht holds.
  const bool use_dht = a.dht && !mutated(a.mutant, Mutant::dht_ignored);
  float dS[2][16];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int i = 0; i < 16; ++i)
      dS[mt][i] = use_dht ? narrow<bf16>(a.dht[sbase + static_cast<std::int64_t>(key_of(mt, i)) * V + col_of(i)]) : 0.0f;
  // The stored chunk-initial state narrow(S_0), this thread's pairs, loaded a chunk ahead.
  const bf16* Hs = static_cast<const bf16*>(w.fwd.Hs) + static_cast<std::int64_t>(bh) * s.NT * kK * V + j0;
  [[maybe_unused]] unsigned S0[2][8];
  auto load_state = [&](int n) {
    if constexpr (D != Decay::none) {
      const bf16* Hn = Hs + static_cast<std::int64_t>(n) * kK * V;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int i = 0; i < 16; i += 2)
          S0[mt][i / 2] = ld_pair_raw(Hn + static_cast<std::int64_t>(key_of(mt, i)) * V + col_of(i));
    }
  };
  bf16* dHg = static_cast<bf16*>(w.dH) + static_cast<std::int64_t>(bh) * s.NT * kK * V + j0;
  bf16* dDg = static_cast<bf16*>(w.dD) + wbase * V + j0;
  float* rowdot = w.rowdot + (static_cast<std::int64_t>(bh) * s.NT * w.NVT + tile) * kK;
  // mutant backward-last-partial-chunk-dropped: the pass starts at chunk ⌊T/64⌋ − 1.
  const int first = chunk_dropped(a, b, NT - 1) ? NT - 2 : NT - 1;
  // mutant dv-state-gradient-late: dΔ's state term reads the following chunk's dH.
  const bool dv_late = mutated(a.mutant, Mutant::dv_state_gradient_late);
  if (first >= 0) {
    prefetch(first);
    first > 0 ? prefetch(first - 1) : cp_async_commit();
    load_state(first);
  }
  for (int n = first; n >= 0; --n) {
    const int t0 = n * kChunk;
    unsigned char* st = smem + (n % kStages) * kStage;
    // rowdot over the tile's 32 columns: this thread's 8 of each row, then its quad's.
    if constexpr (D != Decay::none) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        float p0 = 0.0f, p1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 x0 = mma::unpack_bf16(S0[mt][2 * j]), x1 = mma::unpack_bf16(S0[mt][2 * j + 1]);
          p0 = fmaf(dS[mt][4 * j], x0.x, p0), p0 = fmaf(dS[mt][4 * j + 1], x0.y, p0);
          p1 = fmaf(dS[mt][4 * j + 2], x1.x, p1), p1 = fmaf(dS[mt][4 * j + 3], x1.y, p1);
        }
        p0 = quad_sum(p0), p1 = quad_sum(p1);
        if (qd == 0) {
          rowdot[static_cast<std::int64_t>(n) * w.NVT * kK + key_of(mt, 0)] = p0;
          rowdot[static_cast<std::int64_t>(n) * w.NVT * kK + key_of(mt, 2)] = p1;
        }
      }
      if (n > 0) load_state(n - 1);
    }
    // dH = narrow(dS) into dse (last read by the previous chunk's second group, waited for).
    bf16* dHn = dHg + static_cast<std::int64_t>(n) * kK * V;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int i = 0; i < 16; i += 2) {
        const int key = key_of(mt, i), col = col_of(i);
        unsigned* t = reinterpret_cast<unsigned*>(dse + col_tile(key, col));
        if (dv_late) {  // dse holds chunk n + 1's dH (stored before the last barrier); this one's from the accumulators
          st_pair(dHn + static_cast<std::int64_t>(key) * V + col, dS[mt][i], dS[mt][i + 1]);
          const bf16* later = dHn + static_cast<std::int64_t>(kK) * V + static_cast<std::int64_t>(key) * V + col;
          *t = n + 1 < NT ? *reinterpret_cast<const unsigned*>(later) : 0u;
        } else {
          *t = mma::pack_bf16(dS[mt][i], dS[mt][i + 1]);
        }
      }
    cp_async_wait<1>();
    wgmma::fence_proxy_async();
    __syncthreads();  // chunk n's tiles and dH visible; chunk n + 1's buffer free
    n > 1 ? prefetch(n - 2) : cp_async_commit();
    const unsigned char* Wt = st;
    const unsigned char* WDt = st + kTileW;
    const unsigned char* QDt = st + 2 * kTileW;
    const unsigned char* Mt = st + 3 * kTileW;
    const unsigned char* dOt = Mt + kTileM;
    // Group 1: acc = Mᵀ dO (M-major scores), tmp = (Q ⊙ e^b)ᵀ dO (M-major keys).
    float acc[16], tmp[2][16];
#pragma unroll
    for (int i = 0; i < 16; ++i) acc[i] = tmp[0][i] = tmp[1][i] = 0.0f;
    wgmma::fence_operand(acc);
    wgmma::fence_operand(tmp[0]);
    wgmma::fence_operand(tmp[1]);
    wgmma::fence();
    // One accumulator after another (interleaved, ptxas waited between them).
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk)
      mma<1, 1, 1>(acc, wgmma::desc(Mt, scores_along_m(kk)), wgmma::desc(dOt, cols_along_n(kk)));
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int kk = 0; kk < kChunk / 16; ++kk)
        mma<1, 1, 1>(tmp[mt], wgmma::desc(QDt, keys_along_m(mt, kk)), wgmma::desc(dOt, cols_along_n(kk)));
    wgmma::commit();
    if (!dv_late)  // dH to global memory from dse while the products run
      for (int v = tid; v < kK * kRowB / 16; v += kThreadsW) {
        const int r = v / (kRowB / 16), cc = v % (kRowB / 16);
        *reinterpret_cast<uint4*>(dHn + static_cast<std::int64_t>(r) * V + cc * 8) =
            *reinterpret_cast<const uint4*>(dse + col_tile(r, cc * 8));
      }
    wgmma::wait<0>();
    wgmma::fence_operand(acc);
    wgmma::fence_operand(tmp[0]);
    wgmma::fence_operand(tmp[1]);
    // dS ← Diag(e^{b_last}) dS + scale·tmp. mutant dh-pass-undecayed: the decay forgotten.
    if (D != Decay::none && !mutated(a.mutant, Mutant::dh_pass_undecayed)) {
      const float* gl = reinterpret_cast<const float*>(dOt + kTileO);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int key = key_of(mt, 0);
        const float f0 = expf(gl[D == Decay::per_key ? key : 3]), f1 = expf(gl[D == Decay::per_key ? key + 8 : 3]);
#pragma unroll
        for (int i = 0; i < 16; ++i) dS[mt][i] *= i % 4 >= 2 ? f1 : f0;
      }
    }
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int i = 0; i < 16; ++i) dS[mt][i] = fmaf(a.scale, tmp[mt][i], dS[mt][i]);
#pragma unroll
    for (int i = 0; i < 16; ++i) acc[i] *= a.scale;
    // Group 2: acc += (W ⊙ e^{b_last − b}) dH (K-major keys, eight 16-key steps).
    wgmma::fence_operand(acc);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk)
      mma<1, 0, 1>(acc, wgmma::desc(WDt, keys_along_k(kk)), wgmma::desc(dse, cols_along_n(kk)));
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(acc);
    // dΔ = narrow(acc) into Dt.
#pragma unroll
    for (int i = 0; i < 16; i += 2) {
      const int tok = 16 * warp + gq + (i % 4 >= 2 ? 8 : 0), col = col_of(i);
      *reinterpret_cast<unsigned*>(Dt + col_tile(tok, col)) = mma::pack_bf16(acc[i], acc[i + 1]);
    }
    wgmma::fence_proxy_async();
    __syncthreads();  // dΔ visible
    // Group 3: dS += −Wᵀ dΔ (M-major keys; A scaled by −1).
    wgmma::fence_operand(dS[0]);
    wgmma::fence_operand(dS[1]);
    wgmma::fence();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int kk = 0; kk < kChunk / 16; ++kk)
        mma<-1, 1, 1>(dS[mt], wgmma::desc(Wt, keys_along_m(mt, kk)), wgmma::desc(Dt, cols_along_n(kk)));
    wgmma::commit();
    for (int v = tid; v < kChunk * kRowB / 16; v += kThreadsW) {  // dΔ to global memory meanwhile
      const int r = v / (kRowB / 16), cc = v % (kRowB / 16);
      *reinterpret_cast<uint4*>(dDg + static_cast<std::int64_t>(t0 + r) * V + cc * 8) =
          *reinterpret_cast<const uint4*>(Dt + col_tile(r, cc * 8));
    }
    wgmma::wait<0>();
    wgmma::fence_operand(dS[0]);
    wgmma::fence_operand(dS[1]);
  }
  // mutant dh0-not-written: zeros where dh0 belongs.
  const bool dh0_zero = mutated(a.mutant, Mutant::dh0_not_written);
  if (a.dh0)
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int i = 0; i < 16; ++i)
        a.dh0[sbase + static_cast<std::int64_t>(key_of(mt, i)) * V + col_of(i)] = dh0_zero ? 0.0f : dS[mt][i];
#else
  __trap();  // not an sm_90a build of this kernel: the launcher never gets here
#endif
}

template <Decay D>
void launch(const Args<bf16>& a, const Work& w, unsigned BH, cudaStream_t stream) {
  auto* kernel = dstate_pass_wgmma<D>;
  allow_smem(kernel, kSmem, "the Hopper backward state pass");
  kernel<<<dim3(a.s.V / kBV, BH), kThreadsW, kSmem, stream>>>(a, w);
  TTR_CUDA_CHECK_LAUNCH("dstate_pass_wgmma");
}

}  // namespace

void launch_hopper_dstate_pass(Decay d, const Args<bf16>& a, const Work& w, unsigned BH, cudaStream_t stream) {
  switch (d) {
    case Decay::none: return launch<Decay::none>(a, w, BH, stream);
    case Decay::scalar: return launch<Decay::scalar>(a, w, BH, stream);
    case Decay::per_key: return launch<Decay::per_key>(a, w, BH, stream);
  }
}

}  // namespace ttr::gpu::chunk_bwd
