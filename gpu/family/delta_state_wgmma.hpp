// The Hopper state passes (delta_state_wgmma_sm90a.cu, delta_dstate_wgmma_sm90a.cu):
// stage 2 of the bf16 chunk forward and stage 4 of the bf16 chunk backward on warpgroup
// MMA, chosen together by TTR_GPU_STATE_BV=32w where they apply.
#pragma once

#include <cuda_runtime.h>

#include "gpu/family/delta_chunk_stages.cuh"

namespace ttr::gpu::chunk {

// The shapes they cover: K = 128, V a multiple of 32 (a block's 32 columns).
bool hopper_state_pass_fits(int K, int V);
// TTR_GPU_STATE_BV is unset (the default) or "32w", the shape fits and the device is
// compute capability 9.0
// (hopper_state_pass_available, gpu/api.hpp): the bf16 passes run on wgmma.
bool hopper_state_passes_chosen(int K, int V);
// bf16 only, where hopper_state_passes_chosen.
void launch_hopper_state_pass(const DeltaArgs& a, const Shape& s, const Work& work, cudaStream_t stream);

}  // namespace ttr::gpu::chunk
