// Stage 2 of the bf16 chunk forward (delta_chunk.cu) on Hopper's warpgroup MMA: the
// same recurrence as bf16k::state_pass (delta_chunk_bf16.cuh), per chunk n of 64 tokens
//   h_n = narrow(S)                                (stored: the chunk-initial state)
//   Δ   = narrow(U − W h_n)                         (stored: FLA's v_new)
//   S  ← Diag(e^{b_last}) S + (w ⊙ e^{b_last − b})ᵀ Δ
// (PDN §2.2 and eq. (6); GDN's chunkwise form), the same narrowing points and fp32
// accumulation, with the products issued by one warpgroup as wgmma from shared memory
// (gpu/core/wgmma.cuh). Why: the mma.sync pass spends a chunk on per-warp `ldmatrix`
// addressing, per-thread copy arithmetic and barriers over 8–16 warps, not on products
// (ncu, H100: docs/gpu-delta-backward-speed.md, "What dstate_pass waits on", the same
// finding for the state pass); here a block is 4 warps, each product is 8 asynchronous
// instructions of one warpgroup, and the tensor cores read the tiles themselves.
//
// Block: 32 state columns of one head (K = 128), 128 threads. S (128 × 32 fp32) is two
// m64n32 accumulators: keys 0–63 and 64–127. A chunk:
//   1. h_n → hs (bf16, [key][col], 64-byte swizzle) from the accumulators; barrier;
//   2. Δacc = W h_n: 8 wgmma m64n32k16, A = W (K-major, 128-byte swizzle, two 64-key
//      halves), B = hs (N-major); h_n's global copy is stored from hs meanwhile;
//   3. Δ = narrow(U − Δacc) → Dt (bf16, [token][col], 64-byte swizzle); barrier;
//   4. S ← e^{b_last} S, then 2 × 4 wgmma: A = (W ⊙ e^{b_last−b})ᵀ (M-major: the same
//      [token][key] tile read transposed), B = Dt (N-major); Δ's global copy meanwhile.
// Three buffers of the chunk inputs (W, W ⊙ e^{b_last−b}, U, the gates), cp.async into
// the swizzled layout two chunks ahead. The products' accumulation order inside a
// 16-wide step is the tensor core's, not mma.sync's, so the bits may differ from the
// mma.sync tilings' (the error model is that of the form, docs/arithmetic-policies.md;
// CudaDelta.HopperStatePassPassesTheGate checks it against the oracle).
//
// Compiled for sm_90a alone (wgmma has no sm_90 form); launched only where the device
// is compute capability 9.0 (hopper_state_pass_available).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/env_switch.hpp"
#include "gpu/core/launch.cuh"
#include "gpu/core/mma_sync.cuh"
#include "gpu/core/tile.cuh"
#include "gpu/core/wgmma.cuh"
#include "gpu/family/delta_chunk_stages.cuh"
#include "gpu/family/delta_state_wgmma.hpp"
#include "gpu/family/delta_state_wgmma_layout.hpp"

namespace ttr::gpu::chunk {
namespace {

using bf16 = __nv_bfloat16;
using namespace state_wgmma;  // the tile layouts and operands (delta_state_wgmma_layout.hpp)
constexpr int kThreadsW = 128;
constexpr int kLdU = kBV + 8;              // U's padded leading dimension (elements)
constexpr int kTileU = kChunk * kLdU * 2;  // 5 KB
// One buffer: W, W ⊙ e^{b_last−b}, U, the gates (K floats at most), 1024-aligned.
constexpr int kStage = (2 * kTileW + kTileU + kK * 4 + 1023) / 1024 * 1024;
constexpr int kStages = 3;
constexpr int kTileH = kK * kRowB, kTileD = kChunk * kRowB;
constexpr std::size_t kSmem = 1024 + kStages * kStage + kTileH + kTileD;  // + the base's alignment

using mma::pack_bf16;
using mma::unpack_bf16;

template <Decay D>
__global__ void __launch_bounds__(kThreadsW, 1) state_pass_wgmma(Shape s, const float* __restrict__ h0,
                                                                   float* __restrict__ ht, Work work) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle repeats from 1024-byte boundaries: the base rounded up to one.
  unsigned char* smem = smem_raw + ((1024 - (wgmma::smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char* hs = smem + kStages * kStage;  // h_n, [key][col]
  unsigned char* Dt = hs + kTileH;              // Δ, [token][col]
  const int V = s.V, j0 = blockIdx.x * kBV, bh = blockIdx.y, tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32, gq = lane / 4, qd = lane % 4;
  const std::int64_t sbase = static_cast<std::int64_t>(bh) * kK * V;

  // S[mt]: keys 64mt + 16·warp + gq (+ 8), columns 8j + 2qd (+ 1) (the accumulator layout).
  float S[2][16];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int key = 64 * mt + 16 * warp + gq + (i % 4 >= 2 ? 8 : 0), col = j0 + 8 * (i / 4) + 2 * qd + i % 2;
      S[mt][i] = h0 ? h0[sbase + static_cast<std::int64_t>(key) * V + col] : 0.0f;
    }
  const bf16* Wg = static_cast<const bf16*>(work.W) + static_cast<std::int64_t>(bh) * s.Tp * kK;
  const bf16* WDg = static_cast<const bf16*>(work.WD) + static_cast<std::int64_t>(bh) * s.Tp * kK;
  const bf16* Ug = static_cast<const bf16*>(work.U) + static_cast<std::int64_t>(bh) * s.Tp * V + j0;
  const float* Gg = work.G + static_cast<std::int64_t>(bh) * s.Tp * s.Kg;
  bf16* Hg = static_cast<bf16*>(work.Hs) + static_cast<std::int64_t>(bh) * s.NT * kK * V + j0;
  bf16* Dg = static_cast<bf16*>(work.D) + static_cast<std::int64_t>(bh) * s.Tp * V + j0;

  // A thread's share of a W tile: the 16-byte chunk c16 = tid % 16 of rows tid / 16 + 8i
  // (i < 8). The rows differ by multiples of 8, so the swizzled chunk is the same for all.
  const int wrow = tid / 16, c16 = tid % 16;
  const unsigned wdst = key_tile(wrow, c16 * 8);  // + 8i rows: + 8i·kRowW (the same swizzled chunk)
  auto prefetch = [&](int n) {
    unsigned char* st = smem + (n % kStages) * kStage;
    const std::int64_t t0 = static_cast<std::int64_t>(n) * kChunk;
    const bf16* w = Wg + (t0 + wrow) * kK + c16 * 8;
    const bf16* wd = WDg + (t0 + wrow) * kK + c16 * 8;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      cp_async16(st + wdst + i * 8 * kRowW, w + i * 8 * kK);
      cp_async16(st + kTileW + wdst + i * 8 * kRowW, wd + i * 8 * kK);
    }
    load_rows_async(reinterpret_cast<bf16*>(st + 2 * kTileW), kLdU, Ug + t0 * V, V, kChunk, kChunk, kBV);
    float* g = reinterpret_cast<float*>(st + 2 * kTileW + kTileU);
    if constexpr (D == Decay::per_key) load_flat_async(g, Gg + (t0 + kChunk - 1) * kK, kK);
    if constexpr (D == Decay::scalar) load_flat_async(g, Gg + t0 + kChunk - 4, 4);
    cp_async_commit();
  };
  const int len = s.len(bh / s.H), NT = s.chunks(bh / s.H);
  // One copy group committed per chunk ahead (empty past the last), so that waiting for
  // all but the newest is waiting for this chunk's.
  if (NT > 0) prefetch(0);
  NT > 1 ? prefetch(1) : cp_async_commit();
  for (int n = 0; n < NT; ++n) {
    const int t0 = n * kChunk, c = min(kChunk, len - t0);
    unsigned char* st = smem + (n % kStages) * kStage;
    // 1. h_n = narrow(S) into hs (last read by the previous chunk's product 2, waited for).
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = 64 * mt + 16 * warp + gq, col = 8 * j + 2 * qd;
        *reinterpret_cast<unsigned*>(hs + col_tile(key, col)) = pack_bf16(S[mt][4 * j], S[mt][4 * j + 1]);
        *reinterpret_cast<unsigned*>(hs + col_tile(key + 8, col)) = pack_bf16(S[mt][4 * j + 2], S[mt][4 * j + 3]);
      }
    cp_async_wait<1>();
    wgmma::fence_proxy_async();  // hs and this chunk's copies, seen by the tensor cores
    __syncthreads();             // … of every thread; chunk n − 1's buffer is free
    n + 2 < NT ? prefetch(n + 2) : cp_async_commit();
    // 2. Δacc = W h_n (K = 128: eight 16-key steps, two per 32 bytes of a W half's row).
    float acc[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) acc[i] = 0.0f;
    wgmma::fence_operand(acc);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kK / 16; ++kk) {
      wgmma::mma_m64n32k16<0, 1>(acc, wgmma::desc(st, keys_along_k(kk)), wgmma::desc(hs, cols_along_n(kk)), 1);
    }
    wgmma::commit();
    // h_n to global memory from hs while the product runs (both only read hs).
    const std::int64_t hn = static_cast<std::int64_t>(n) * kK * V;
    for (int v = tid; v < kK * kRowB / 16; v += kThreadsW) {
      const int r = v / (kRowB / 16), cc = v % (kRowB / 16);
      *reinterpret_cast<uint4*>(Hg + hn + static_cast<std::int64_t>(r) * V + cc * 8) =
          *reinterpret_cast<const uint4*>(hs + col_tile(r, cc * 8));
    }
    wgmma::wait<0>();
    wgmma::fence_operand(acc);
    // 3. Δ = narrow(U − Δacc) into Dt.
    const bf16* Ut = reinterpret_cast<const bf16*>(st + 2 * kTileW);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int tok = 16 * warp + gq + 8 * h, col = 8 * j + 2 * qd;
        const float2 u = unpack_bf16(*reinterpret_cast<const unsigned*>(Ut + tok * kLdU + col));
        *reinterpret_cast<unsigned*>(Dt + col_tile(tok, col)) = pack_bf16(u.x - acc[4 * j + 2 * h], u.y - acc[4 * j + 2 * h + 1]);
      }
    wgmma::fence_proxy_async();
    __syncthreads();  // Δ visible
    // 4. S ← Diag(e^{b_last}) S + (w ⊙ e^{b_last − b})ᵀ Δ.
    if constexpr (D != Decay::none) {
      const float* gl = reinterpret_cast<const float*>(st + 2 * kTileW + kTileU);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int key = 64 * mt + 16 * warp + gq;
        const float f0 = expf(gl[D == Decay::per_key ? key : 3]), f1 = expf(gl[D == Decay::per_key ? key + 8 : 3]);
#pragma unroll
        for (int i = 0; i < 16; ++i) S[mt][i] *= i % 4 >= 2 ? f1 : f0;
      }
    }
    wgmma::fence_operand(S[0]);
    wgmma::fence_operand(S[1]);
    wgmma::fence();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int kk = 0; kk < kChunk / 16; ++kk) {
        // A[key][token] = WD[token][key]: the keys 64mt.. half, 16 tokens (rows) a step.
        wgmma::mma_m64n32k16<1, 1>(S[mt], wgmma::desc(st + kTileW, keys_along_m(mt, kk)), wgmma::desc(Dt, cols_along_n(kk)), 1);
      }
    wgmma::commit();
    // Δ's valid rows to global memory from Dt while the product runs.
    for (int v = tid; v < c * (kRowB / 16); v += kThreadsW) {
      const int r = v / (kRowB / 16), cc = v % (kRowB / 16);
      *reinterpret_cast<uint4*>(Dg + static_cast<std::int64_t>(t0 + r) * V + cc * 8) =
          *reinterpret_cast<const uint4*>(Dt + col_tile(r, cc * 8));
    }
    wgmma::wait<0>();
    wgmma::fence_operand(S[0]);
    wgmma::fence_operand(S[1]);
  }
  if (ht) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int i = 0; i < 16; i += 2) {
        const int key = 64 * mt + 16 * warp + gq + (i % 4 >= 2 ? 8 : 0), col = j0 + 8 * (i / 4) + 2 * qd;
        *reinterpret_cast<float2*>(ht + sbase + static_cast<std::int64_t>(key) * V + col) =
            make_float2(S[mt][i], S[mt][i + 1]);
      }
  }
#else
  __trap();  // not an sm_90a build of this kernel: the launcher never gets here
#endif
}

template <Decay D>
void launch(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream) {
  auto* kernel = state_pass_wgmma<D>;
  allow_smem(kernel, kSmem, "the Hopper state pass");
  const dim3 grid(a.V / kBV, static_cast<unsigned>(s.B) * s.H);
  kernel<<<grid, kThreadsW, kSmem, stream>>>(s, a.h0, a.ht, work);
  TTR_CUDA_CHECK_LAUNCH("state_pass_wgmma");
}

}  // namespace

bool hopper_state_pass_fits(int K, int V) { return K == kK && V % kBV == 0; }

bool hopper_state_passes_chosen(int K, int V) {
  // The default (TTR_GPU_STATE_BV unset or empty) and "32w": any other value names an
  // mma.sync tiling (delta_state_tiling.cuh).
  const std::string t = env_switch("TTR_GPU_STATE_BV");  // (its values refused by column_tiling)
  return (t.empty() || t == "32w") && hopper_state_pass_fits(K, V) && hopper_state_pass_available();
}

void launch_hopper_state_pass(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream) {
  switch (a.decay) {
    case Decay::none: return launch<Decay::none>(a, s, work, stream);
    case Decay::scalar: return launch<Decay::scalar>(a, s, work, stream);
    case Decay::per_key: return launch<Decay::per_key>(a, s, work, stream);
  }
}

}  // namespace ttr::gpu::chunk

namespace ttr::gpu {

bool hopper_state_pass_available() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return false;
  return major == 9 && minor == 0;
}

}  // namespace ttr::gpu
