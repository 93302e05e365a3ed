// The preconditioner's adjoint as a stage of the delta family's backward kernels
// (delta_sequential_backward.cu, delta_chunk_backward.cu), for the preconditioned
// layers: it takes the write key's gradient dk̃ from the core's fp32 partials and
// leaves the key's part dk_atk for `finish` (DeltaGradPartials::dk_extra).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"

namespace ttr::gpu::atk {

// dk̃ = Σ_{nb < NB} dw[nb, row, :] in block order, rounded to `dw_dtype` (the chunk
// backward form writes dk̃ in the dtype; rows = the token rows of the core's
// partials); writes dk_atk [rows, K] and a.dg_atk, a.dbeta_atk, a.dA0, a.dcenter.
void backward(const AtkBackwardArgs& a, const float* dw, int NB, std::int64_t rows, DType dw_dtype, float* dk_atk,
              cudaStream_t stream);

}  // namespace ttr::gpu::atk
