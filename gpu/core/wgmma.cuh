// Hopper's warpgroup MMA (`wgmma.mma_async`, sm_90a only): one warpgroup (4 warps,
// 128 threads) issues a 64 × N × 16 bf16 product whose operands are read from shared
// memory by the tensor cores themselves, through 64-bit matrix descriptors, with no
// `ldmatrix` and no per-warp chains; the fp32 accumulator stays in registers. Only the
// translation units compiled for sm_90a (the *_sm90a.cu sources, gpu/CMakeLists.txt)
// may include this header.
//
// Shared-memory operand layout (PTX ISA, "Asynchronous Warpgroup Level Matrix Shared
// Memory Layout"): a tile is rows of ROW bytes (ROW = 128, 64 or 32: 64, 32 or 16 bf16)
// whose 16-byte chunks are swizzled, chunk c of row r stored at chunk c ^ (r' mod
// ROW/16) where r' counts 128-byte lines, over a repeat of 8 rows (1024, 512 or 256
// bytes, to which the tile must be aligned). One tile [row][col] of bf16 then serves
// as either operand orientation:
//   K-major  (the product's K index runs along the row): rows are M (or N), SBO = the
//            bytes of 8 rows; a K step of 16 advances the start by 32 bytes;
//   MN-major (M or N runs along the row, the `tnsp` bit set): rows are K, SBO = the
//            bytes of 8 rows, LBO = the bytes to the next ROW-wide block of M/N
//            columns; a K step of 16 advances the start by 16 rows.
// Accumulator fragment of m64nN (fp32, N/2 registers a thread), thread = 32·w + 4·g + q:
//   d[4j + 0], d[4j + 1] = D[16w + g][8j + 2q, +1],  d[4j + 2], d[4j + 3] = D[16w + g + 8][8j + 2q, +1]
// (the layout of mma.sync's m16n8 C fragments, warp w owning rows 16w .. 16w + 15).
#pragma once

#include <cstdint>

#include "gpu/core/wgmma_layout.hpp"

namespace ttr::gpu::wgmma {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The descriptor of an operand (gpu/core/wgmma_layout.hpp) whose tiles start at `base`.
__device__ __forceinline__ std::uint64_t desc(const void* base, const Operand& op) {
  return encode(smem_addr(base) + op.start, op);
}

// Orders this thread's register and shared-memory accesses before the warpgroup's next
// wgmma.mma_async (required before the first one that reads accumulators written by
// ordinary instructions).
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most N committed groups of this warpgroup are in flight.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared-memory writes by ordinary stores or cp.async (the generic proxy) made visible
// to the tensor cores' reads (the async proxy); then a barrier, before the wgmma.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps the compiler from moving accesses of an accumulator across the asynchronous
// product that is writing it (CUTLASS's warpgroup_fence_operand).
template <int R>
__device__ __forceinline__ void fence_operand(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (+)= A · B, m64n32k16, bf16 operands from shared memory, fp32 accumulator.
// TA / TB: 1 where A / B is MN-major (the `tnsp` immediates); SA = −1 negates A (an
// exact sign flip of the products); accumulate = 0 ignores d.
template <int TA, int TB, int SA = 1>
__device__ __forceinline__ void mma_m64n32k16(float (&d)[16], std::uint64_t da, std::uint64_t db, int accumulate) {
  static_assert(SA == 1 || SA == -1, "A scaled by 1 or -1");
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, %21, 1, %19, %20;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB), "n"(SA));
}

// d (+)= A · B, m64n64k16: the same with N = 64 (32 accumulator registers a thread,
// d[4j + …] as above for j < 8). An N-major B of 64 columns is one 128-byte swizzle row.
template <int TA, int TB, int SA = 1>
__device__ __forceinline__ void mma_m64n64k16(float (&d)[32], std::uint64_t da, std::uint64_t db, int accumulate) {
  static_assert(SA == 1 || SA == -1, "A scaled by 1 or -1");
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, %37, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB), "n"(SA));
}

}  // namespace ttr::gpu::wgmma
