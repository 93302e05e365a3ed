// Tiles in shared memory and the copies that fill them: a tile is rows × cols of
// E with a leading dimension padded by 16 bytes (one 16-byte access width), so
// the rows of a 64 × 128 bf16 tile do not all start in the same bank.
#pragma once

#include <climits>
#include <cstdint>

#include "gpu/core/numeric.cuh"

namespace ttr::gpu {

template <class E>
__host__ __device__ constexpr int padded_ld(int cols) {
  return cols + 16 / static_cast<int>(sizeof(E));
}

// Bytes of a padded rows × cols tile of E, rounded up to 128 (so the next tile
// starts 128-byte aligned, as WMMA wants 32).
template <class E>
__host__ __device__ constexpr std::size_t tile_bytes(int rows, int cols) {
  return (static_cast<std::size_t>(rows) * padded_ld<E>(cols) * sizeof(E) + 127) / 128 * 128;
}

// Bump allocator over the block's dynamic shared memory.
struct SmemArena {
  unsigned char* p;
  template <class E>
  __device__ E* take(int rows, int cols) {
    E* r = reinterpret_cast<E*>(p);
    p += tile_bytes<E>(rows, cols);
    return r;
  }
};

// The 16-byte vectors of a rows × vecs tile a thread copies: vector i = r·vecs + c
// for i = threadIdx.x, + blockDim.x, … < rows·vecs, stepped without a division
// (a runtime integer division is ~20 instructions; the copy loops of the chunk
// kernels run ~15–25 of these steps a thread per tile set, and the kernels that
// issue them are issue-bound, not bandwidth-bound).
struct TileWalk {
  int r, c;
  const int vecs, dr, dc;
  // vecs_ = 0 (a tile narrower than one vector) walks nothing, as the loop it replaces.
  __device__ explicit TileWalk(int vecs_)
      : r(vecs_ > 0 ? static_cast<int>(threadIdx.x) / vecs_ : INT_MAX),
        c(vecs_ > 0 ? static_cast<int>(threadIdx.x) % vecs_ : 0),
        vecs(vecs_),
        dr(vecs_ > 0 ? static_cast<int>(blockDim.x) / vecs_ : 0),
        dc(vecs_ > 0 ? static_cast<int>(blockDim.x) % vecs_ : 0) {}
  __device__ void next() {
    r += dr, c += dc;
    if (c >= vecs) c -= vecs, ++r;
  }
};

// dst[r][c] = src row (row0 + r), columns col0 .. col0+cols−1, for r < valid;
// rows valid .. rows−1 are zero (the padding of a last, partial chunk). Rows of
// src are `stride` elements apart. 16-byte copies: cols·sizeof(E) and the
// offsets are multiples of 16 bytes for the shapes validate() admits.
template <class E>
__device__ void load_rows(E* dst, int ld, const E* src, std::int64_t stride, int rows, int valid, int cols) {
  constexpr int per = 16 / sizeof(E);
  for (TileWalk i(cols / per); i.r < rows; i.next()) {
    const int r = i.r, c = i.c * per;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (r < valid) x = *reinterpret_cast<const uint4*>(src + r * stride + c);
    *reinterpret_cast<uint4*>(dst + r * ld + c) = x;
  }
}

// Rows r < valid of a tile back to global memory.
template <class E>
__device__ void store_rows(E* dst, std::int64_t stride, const E* src, int ld, int valid, int cols) {
  constexpr int per = 16 / sizeof(E);
  for (TileWalk i(cols / per); i.r < valid; i.next()) {
    const int r = i.r, c = i.c * per;
    *reinterpret_cast<uint4*>(dst + r * stride + c) = *reinterpret_cast<const uint4*>(src + r * ld + c);
  }
}

}  // namespace ttr::gpu

namespace ttr::gpu {

// Asynchronous copies (cp.async, sm_80+): global → shared without passing
// through registers, so the next chunk's tiles load while this chunk computes.
__device__ inline void cp_async16(void* smem_dst, const void* gmem_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Wait until at most N committed groups are still in flight.
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// load_rows, asynchronously (padding rows are zeroed by ordinary stores). Where the
// block's threads are a multiple of the row's vectors (256 threads, 8 or 16 vectors
// a row: every tile of the chunk kernels), each thread keeps one column of vectors
// and steps its two pointers by whole rows: 11 instructions a vector (3 of them the
// no-op LDS the compiler puts before each LDGSTS), where the walk's row and column
// arithmetic and 64-bit addressing took 21–28 (sm_90 disassembly of dstate_pass).
template <class E>
__device__ void load_rows_async(E* dst, int ld, const E* src, std::int64_t stride, int rows, int valid, int cols) {
  constexpr int per = 16 / sizeof(E);
  const int vecs = cols / per, threads = static_cast<int>(blockDim.x);
  if (vecs > 0 && threads % vecs == 0) {
    const int dr = threads / vecs, c = (static_cast<int>(threadIdx.x) % vecs) * per;
    int r = static_cast<int>(threadIdx.x) / vecs;
    const E* s = src + r * stride + c;
    E* d = dst + r * ld + c;
    const std::int64_t s_step = dr * stride;
    const int d_step = dr * ld;
    for (const int live = min(rows, valid); r < live; r += dr, s += s_step, d += d_step) cp_async16(d, s);
    for (; r < rows; r += dr, d += d_step) *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    return;
  }
  for (TileWalk i(cols / per); i.r < rows; i.next()) {
    const int r = i.r, c = i.c * per;
    if (r < valid) cp_async16(dst + r * ld + c, src + r * stride + c);
    else *reinterpret_cast<uint4*>(dst + r * ld + c) = make_uint4(0, 0, 0, 0);
  }
}

// n contiguous floats (n·4 a multiple of 16), asynchronously.
__device__ inline void load_flat_async(float* dst, const float* src, int n) {
  for (int i = threadIdx.x * 4; i < n; i += blockDim.x * 4) cp_async16(dst + i, src + i);
}

}  // namespace ttr::gpu
