// The warpgroup-MMA layer alone (gpu/core/wgmma.cuh), on the three operand layouts the
// Hopper state passes use, so that a test can tell a wrong swizzle or descriptor from
// a wrong pass: one block of 128 threads, the tiles copied into the swizzled layout by
// ordinary stores, then
//   P1 = A B         A 64 × 128 K-major (two 64-column halves, 128-byte swizzle),
//                    B 128 × 32 N-major (64-byte swizzle)          — the forward's W h_n
//   P2 = Aᵀ C        Aᵀ 128 × 64 M-major (each half an m64 tile), C 64 × 32 N-major
//                                                                   — its (w ⊙ e^{…})ᵀ Δ
//   P3 = −Aᵀ C       the same with A scaled by −1                   — the backward's −Wᵀ dΔ
//   P4 = Gᵀ C        G 64 × 64 M-major (128-byte rows)              — the backward's Mᵀ dO
// (tests/gpu/wgmma_gpu_test.cpp: against the products of the same bf16 values in double).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/wgmma.cuh"
#include "gpu/family/delta_state_wgmma_layout.hpp"

namespace ttr::gpu {
namespace {

using bf16 = __nv_bfloat16;
using namespace state_wgmma;  // the passes' tile layouts and operands

__global__ void __launch_bounds__(128) probe(const bf16* A, const bf16* B, const bf16* C, const bf16* G, float* P1,
                                             float* P2, float* P3, float* P4) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(1024) unsigned char As[kTileW];  // two 64-column halves, 128-byte rows
  __shared__ __align__(1024) unsigned char Gs[64 * kRowM];
  __shared__ __align__(1024) unsigned char Bs[128 * kRowB];  // 64-byte rows
  __shared__ __align__(1024) unsigned char Cs[64 * kRowB];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gq = lane / 4, qd = lane % 4;
  for (int i = tid; i < 64 * 128; i += 128) *reinterpret_cast<bf16*>(As + key_tile(i / 128, i % 128)) = A[i];
  for (int i = tid; i < 64 * 64; i += 128) *reinterpret_cast<bf16*>(Gs + score_tile(i / 64, i % 64)) = G[i];
  for (int i = tid; i < 128 * 32; i += 128) *reinterpret_cast<bf16*>(Bs + col_tile(i / 32, i % 32)) = B[i];
  for (int i = tid; i < 64 * 32; i += 128) *reinterpret_cast<bf16*>(Cs + col_tile(i / 32, i % 32)) = C[i];
  wgmma::fence_proxy_async();
  __syncthreads();
  float d1[16], d2[2][16], d3[2][16], d4[16];
  for (int i = 0; i < 16; ++i) d1[i] = d2[0][i] = d2[1][i] = d3[0][i] = d3[1][i] = d4[i] = 0.0f;
  wgmma::fence_operand(d1);
  wgmma::fence();
  for (int kk = 0; kk < 8; ++kk)
    wgmma::mma_m64n32k16<0, 1>(d1, wgmma::desc(As, keys_along_k(kk)), wgmma::desc(Bs, cols_along_n(kk)), 1);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operand(d1);
  for (int mt = 0; mt < 2; ++mt) {
    wgmma::fence_operand(d2[mt]);
    wgmma::fence_operand(d3[mt]);
    wgmma::fence();
    for (int kk = 0; kk < 4; ++kk) {
      const auto da = wgmma::desc(As, keys_along_m(mt, kk)), db = wgmma::desc(Cs, cols_along_n(kk));
      wgmma::mma_m64n32k16<1, 1>(d2[mt], da, db, 1);
      wgmma::mma_m64n32k16<1, 1, -1>(d3[mt], da, db, 1);
    }
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(d2[mt]);
    wgmma::fence_operand(d3[mt]);
  }
  wgmma::fence_operand(d4);
  wgmma::fence();
  for (int kk = 0; kk < 4; ++kk)
    wgmma::mma_m64n32k16<1, 1>(d4, wgmma::desc(Gs, scores_along_m(kk)), wgmma::desc(Cs, cols_along_n(kk)), 1);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operand(d4);
  for (int i = 0; i < 16; ++i) {  // the accumulator layout of gpu/core/wgmma.cuh
    const int r = 16 * warp + gq + (i % 4 >= 2 ? 8 : 0), c = 8 * (i / 4) + 2 * qd + i % 2;
    P1[r * 32 + c] = d1[i];
    P4[r * 32 + c] = d4[i];
    for (int mt = 0; mt < 2; ++mt) P2[(64 * mt + r) * 32 + c] = d2[mt][i], P3[(64 * mt + r) * 32 + c] = d3[mt][i];
  }
#else
  __trap();
#endif
}

}  // namespace

void hopper_mma_probe(const std::uint16_t* A, const std::uint16_t* B, const std::uint16_t* C, const std::uint16_t* G,
                      float* P1, float* P2, float* P3, float* P4) {
  DeviceBuffer a(64 * 128 * 2), b(128 * 32 * 2), c(64 * 32 * 2), g(64 * 64 * 2);
  DeviceBuffer p1(64 * 32 * 4), p2(128 * 32 * 4), p3(128 * 32 * 4), p4(64 * 32 * 4);
  a.upload(A, a.size()), b.upload(B, b.size()), c.upload(C, c.size()), g.upload(G, g.size());
  probe<<<1, 128>>>(static_cast<const bf16*>(a.get()), static_cast<const bf16*>(b.get()), static_cast<const bf16*>(c.get()),
                    static_cast<const bf16*>(g.get()), static_cast<float*>(p1.get()), static_cast<float*>(p2.get()),
                    static_cast<float*>(p3.get()), static_cast<float*>(p4.get()));
  TTR_CUDA_CHECK_LAUNCH("hopper_mma_probe");
  TTR_CUDA_CHECK(cudaDeviceSynchronize());
  p1.download(P1, p1.size()), p2.download(P2, p2.size()), p3.download(P3, p3.size()), p4.download(P4, p4.size());
}

}  // namespace ttr::gpu
