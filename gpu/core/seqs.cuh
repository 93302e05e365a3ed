// Where a batch's sequences lie on the token axis. Fixed length: sequence b is
// tokens b·T … b·T + T − 1 of a [B, T, H, ·] tensor. FLA's varlen convention
// (cu_seqlens, docs/varlen.md): the tensors are [1, cu[B], H, ·], sequence b is the
// packed tokens [cu[b], cu[b+1]) (possibly none), and every per-sequence tensor
// (h0, ht, dh0, ...) has B = the number of sequences. A kernel takes b as the
// sequence index either way and T as the longest sequence (for its grids and
// workspaces); chunks restart at each sequence start, as FLA's chunk indices do.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ttr::gpu {

// The first token of sequence b on the packed axis; cu: device [B+1], or nullptr.
__device__ __forceinline__ std::int64_t seq_start(const std::int64_t* cu, int b, int T) {
  return cu ? cu[b] : static_cast<std::int64_t>(b) * T;
}
// The tokens of sequence b.
__device__ __forceinline__ int seq_len(const std::int64_t* cu, int b, int T) {
  return cu ? static_cast<int>(cu[b + 1] - cu[b]) : T;
}

}  // namespace ttr::gpu
