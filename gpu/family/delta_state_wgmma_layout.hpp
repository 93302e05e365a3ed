// Where the Hopper state passes (delta_state_wgmma_sm90a.cu, delta_dstate_wgmma_sm90a.cu)
// put their tiles in shared memory and how their wgmma steps read them: one source for
// the kernels, the wgmma probe and the layout check against the PTX ISA's canonical
// layouts (tests/gpu/wgmma_layout_test.cpp). Plain C++ (host and device).
#pragma once

#include "gpu/core/wgmma_layout.hpp"

namespace ttr::gpu::state_wgmma {

using wgmma::Operand;
using wgmma::swizzle;

constexpr int kK = 128, kBV = 32;          // keys; a block's state columns
constexpr int kRowW = 128;                 // a key tile's row half: 64 keys, 128-byte swizzle
constexpr int kHalfW = 64 * kRowW;         // 8 KB: 64 tokens × 64 keys
constexpr int kTileW = (kK / 64) * kHalfW;  // 16 KB
constexpr int kRowB = 2 * kBV;             // a column tile's row: 32 bf16, 64-byte swizzle
constexpr int kRowM = 128;                 // the 64 × 64 scores' row, 128-byte swizzle

// Byte offsets of element (row, col) in a tile from its base:
// a [64 tokens][128 keys] tile (W, W ⊙ e^{b_last−b}, Q ⊙ e^b): two 64-key halves;
TTR_WGMMA_HD constexpr unsigned key_tile(int row, int col) {
  return static_cast<unsigned>((col / 64) * kHalfW) + swizzle<kRowW>(row * kRowW + (col % 64) * 2);
}
// a [rows][32 columns] tile (h_n, Δ, dO, dH, dΔ);
TTR_WGMMA_HD constexpr unsigned col_tile(int row, int col) { return swizzle<kRowB>(row * kRowB + col * 2); }
// the [64 t][64 s] scores M.
TTR_WGMMA_HD constexpr unsigned score_tile(int row, int col) { return swizzle<kRowM>(row * kRowM + col * 2); }

// The operands of the 16-wide step kk of a product:
// A[m = token][k = key] of a key tile, K-major (W h_n, (W ⊙ e^{b_last−b}) dH): keys
// 16kk .. +15, 32 bytes a step along the row of their half;
TTR_WGMMA_HD constexpr Operand keys_along_k(int kk) {
  return {static_cast<unsigned>((kk / 4) * kHalfW + (kk % 4) * 32), 0, 8 * kRowW, kRowW, false};
}
// A[m = key 64mt + m][k = token] of a key tile, M-major (its transpose: (w ⊙ e^{…})ᵀ Δ,
// (Q ⊙ e^b)ᵀ dO, Wᵀ dΔ): tokens 16kk .. +15, 16 rows a step; LBO the next 64-key half;
TTR_WGMMA_HD constexpr Operand keys_along_m(int mt, int kk) {
  return {static_cast<unsigned>(mt * kHalfW + kk * 16 * kRowW), kHalfW, 8 * kRowW, kRowW, true};
}
// B[k = row][n = column] of a column tile, N-major: rows 16kk .. +15;
TTR_WGMMA_HD constexpr Operand cols_along_n(int kk) {
  return {static_cast<unsigned>(kk * 16 * kRowB), 0, 8 * kRowB, kRowB, true};
}
// A[m = s][k = t] = M[t][s] of the scores, M-major (Mᵀ dO): t = 16kk .. +15.
TTR_WGMMA_HD constexpr Operand scores_along_m(int kk) {
  return {static_cast<unsigned>(kk * 16 * kRowM), 0, 8 * kRowM, kRowM, true};
}

}  // namespace ttr::gpu::state_wgmma
