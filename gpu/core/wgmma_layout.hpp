// Shared-memory operands of Hopper's warpgroup MMA (gpu/core/wgmma.cuh) as plain C++:
// the swizzled tile layout and what a matrix descriptor states, so that host code (the
// layout check, tests/gpu/wgmma_layout_test.cpp) can hold a kernel's operand placements
// against the PTX ISA's canonical layouts without a GPU.
//
// A tile is rows of ROW bytes (ROW = 128, 64 or 32) whose 16-byte chunks are swizzled
// over a repeat of 8 × 128-byte lines (CuTe's Swizzle<log2(ROW/16), 4, 3>): the chunk
// bits of a byte offset XORed with the line bits above them. Tiles start at multiples
// of 1024 bytes (the 128-byte swizzle's repeat), so that offsets and addresses swizzle alike.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TTR_WGMMA_HD __host__ __device__
#else
#define TTR_WGMMA_HD
#endif

namespace ttr::gpu::wgmma {

template <int ROW>
TTR_WGMMA_HD constexpr unsigned swizzle(unsigned off) {
  static_assert(ROW == 128 || ROW == 64 || ROW == 32, "128-, 64- or 32-byte swizzle");
  return off ^ (((off >> 7) & (ROW / 16 - 1)) << 4);
}

// One 64 × 16 (A) or 16 × N (B) operand of a wgmma step: its start (bytes from the
// tiles' 1024-aligned base), the leading and stride byte offsets, the swizzle's row
// bytes, and whether M (or N) runs along the rows (MN-major, the `tnsp` bit) or K does.
struct Operand {
  unsigned start, lbo, sbo;
  int row;
  bool mn_major;
};

// The descriptor of an operand starting at shared address `addr` (bits 0–13 the
// address, 16–29 LBO, 32–45 SBO, each in 16-byte units; 62–63 the swizzle mode: 1 for
// 128 bytes, 2 for 64, 3 for 32; base offset 0, the tiles being repeat-aligned).
TTR_WGMMA_HD constexpr std::uint64_t encode(unsigned addr, const Operand& op) {
  const std::uint64_t mode = op.row == 128 ? 1 : (op.row == 64 ? 2 : 3);
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<std::uint64_t>((op.lbo & 0x3FFFF) >> 4) << 16 |
         static_cast<std::uint64_t>((op.sbo & 0x3FFFF) >> 4) << 32 | mode << 62;
}

}  // namespace ttr::gpu::wgmma
