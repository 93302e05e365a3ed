// The chunk backward's wy stage on Hopper's warpgroup MMA (delta_wy_wgmma_sm90a.cu),
// launched by delta_chunk_backward.cu where chunk_bwd::hopper_wy_chosen.
#pragma once

#include <cuda_runtime.h>

#include "gpu/family/delta_chunk_backward/common.cuh"

namespace ttr::gpu::chunk_bwd {

// TTR_GPU_WY is unset, empty or "wgmma" ("mma": the mma.sync stage; any other value
// throws InputError), the device is
// compute capability 9.0, and the stage fits: K = V = 128, no per-key gate,
// the write key k itself (not the preconditioned layers' k̃). bf16 only.
bool hopper_wy_chosen(Decay d, int K, int V, bool own_w);
void launch_hopper_wy(Decay d, const Args<bf16>& a, const Work& w, unsigned BH, cudaStream_t stream);

}  // namespace ttr::gpu::chunk_bwd
