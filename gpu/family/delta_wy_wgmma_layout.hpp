// Where the Hopper `wy` stage (delta_wy_wgmma_sm90a.cu) puts its tiles and how its wgmma
// steps read them, beyond the state passes' operands (delta_state_wgmma_layout.hpp, whose
// key and score tiles it uses): one source for the kernel and the layout check against
// the PTX ISA's canonical layouts (tests/gpu/wgmma_layout_test.cpp). Plain C++.
//
// The stage's products are all 64 tokens tall (M = 64: one warpgroup's m64), so its two
// warpgroups split N: the 128 value or key columns in 64-column halves (one n64 step, one
// 128-byte swizzle row of an N-major B), the 64 chunk columns s in 32-column blocks
// (n32). A block of an N-major B then starts 64 bytes into its swizzle rows; the
// addresses are swizzled whole, so the start carries over like a K step's 32 bytes.
#pragma once

#include "gpu/family/delta_state_wgmma_layout.hpp"

namespace ttr::gpu::wy_wgmma {

using state_wgmma::kHalfW;
using state_wgmma::kRowM;
using state_wgmma::kRowW;
using wgmma::Operand;

// A[m = t][k = s] of a [t][s] score tile (T, Tᵀ dT, E), K-major: s = 16kk .. +15;
// also B[k = s'][n = s] = tile[s][s'] with n from 32nb (rows 32nb ..: K-major).
TTR_WGMMA_HD constexpr Operand scores_along_k(int kk, int nb = 0) {
  return {static_cast<unsigned>(nb * 32 * kRowM + kk * 32), 0, 8 * kRowM, kRowM, false};
}
// B[k = r][n = s] = tile[r][32nb + s] of a score tile, N-major (dT, and T for the
// ut-adjoint-transposed mutant): rows 16kk .. +15, columns from 32nb.
TTR_WGMMA_HD constexpr Operand scores_along_n(int nb, int kk) {
  return {static_cast<unsigned>(kk * 16 * kRowM + nb * 64), 0, 8 * kRowM, kRowM, true};
}
// B[k = d][n = s] = tile[32nb + s][d] of a [64 tokens][128] key tile, K-major (bvᵀ,
// bkᵀ, Wᵀ): d = 16kk .. +15, rows from 32nb.
TTR_WGMMA_HD constexpr Operand keys_along_k_rows(int nb, int kk) {
  return {static_cast<unsigned>((kk / 4) * kHalfW + nb * 32 * kRowW + (kk % 4) * 32), 0, 8 * kRowW, kRowW, false};
}
// B[k = s][n = d] = tile[s][64nh + d] of a key tile, N-major (dΔ, dWy, W, K): the same
// descriptor as state_wgmma::keys_along_m (an M-major A and an N-major B read alike).
TTR_WGMMA_HD constexpr Operand keys_along_n(int nh, int kk) { return state_wgmma::keys_along_m(nh, kk); }

}  // namespace ttr::gpu::wy_wgmma
