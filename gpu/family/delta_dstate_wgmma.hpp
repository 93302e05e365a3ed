// The chunk backward's state pass on Hopper's warpgroup MMA (delta_dstate_wgmma_sm90a.cu),
// launched by delta_chunk_backward.cu where chunk::hopper_state_passes_chosen.
#pragma once

#include <cuda_runtime.h>

#include "gpu/family/delta_chunk_backward/common.cuh"
#include "gpu/family/delta_state_wgmma.hpp"

namespace ttr::gpu::chunk_bwd {

// bf16, K = 128, V a multiple of 32 (the rowdot tiles of 32 columns, Work::NVT = V/32).
void launch_hopper_dstate_pass(Decay d, const Args<bf16>& a, const Work& w, unsigned BH, cudaStream_t stream);

}  // namespace ttr::gpu::chunk_bwd
