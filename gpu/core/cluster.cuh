// Thread-block clusters (sm_90): the blocks of a cluster sharing one global →
// shared copy. A block issues part of a tile with cp.async.bulk ….multicast::cluster,
// which lands at the same offset in the shared memory of every block of the cluster
// and counts its bytes on the same-offset mbarrier of each; a block's mbarrier
// completes its phase when its own thread has armed it with the tile's byte count
// (arrive.expect_tx) and every part has landed. The counts may land before the arming
// (an mbarrier's transaction count may go below zero), so no block waits for another
// before issuing. Reuse of a buffer across blocks is ordered by the cluster barrier.
#pragma once

#include <cstdint>

namespace ttr::gpu::cluster {

__device__ inline unsigned smem_address(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// This block's rank in its cluster, 0 .. cluster size − 1.
__device__ inline unsigned rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// The number of blocks in this block's cluster.
__device__ inline unsigned size() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}

// Before any block may signal the mbarrier: init (one thread), then this fence, then
// a cluster-wide arrive + wait (sync()).
__device__ inline void mbarrier_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count) : "memory");
}
__device__ inline void fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// One arrival that also raises the expected byte count of the current phase.
__device__ inline void arrive_expect_bytes(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

// Until the phase of the given parity (0, 1, 0, … for its first, second, third use) has completed.
__device__ inline void wait_phase(std::uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
}

// bytes (a multiple of 16, both addresses 16-byte aligned) from global memory to
// `dst` in every block of `mask`, each counting them on its own `bar`.
__device__ inline void copy_multicast(void* dst, const void* src, unsigned bytes, std::uint64_t* bar,
                                      std::uint16_t mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;\n" ::"r"(
          smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar)), "h"(mask)
      : "memory");
}

// The cluster barrier, split: arrive and wait (acquire), in that order, by every
// thread of every block of the cluster, all the threads of a warp together. The arrive
// is relaxed: with release semantics sm_90 puts a GPU-scope fence (MEMBAR.ALL.GPU)
// before it, which would wait for the chunk's global stores every chunk. What it
// orders here needs no fence: a buffer's last reads (ldmatrix) have returned their
// data before the mma that consumes them issues, which precedes the arrive in program
// order; the mbarriers' initialisation is published by fence_mbarrier_init.
__device__ inline void arrive() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
__device__ inline void wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
__device__ inline void sync() { arrive(), wait(); }

}  // namespace ttr::gpu::cluster
