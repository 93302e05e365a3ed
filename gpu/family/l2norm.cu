// Row-wise L2 normalisation of q and k on the device, as FLA's
// use_qk_l2norm_in_kernel (reference/family/l2norm.hpp): y = x / sqrt(‖x‖² + eps)
// in fp32 from x as stored, one warp per row (lanes over the row, shuffle sum),
// written in the storage format and optionally in fp32.
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/api.hpp"
#include "gpu/core/check.cuh"
#include "gpu/core/numeric.cuh"

namespace ttr::gpu {
namespace {

constexpr int kWarps = 8;

template <class E>
__global__ void __launch_bounds__(kWarps * 32) l2norm_kernel(const E* x, E* y, float* y32, std::int64_t rows, int F,
                                                             float eps) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const E* xr = x + r * F;
  float ss = 0.0f;
  for (int i = lane; i < F; i += 32) {
    const float e = Elem<E>::to_float(xr[i]);
    ss = fmaf(e, e, ss);
  }
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = 1.0f / sqrtf(ss + eps);
  for (int i = lane; i < F; i += 32) {
    const float e = Elem<E>::to_float(xr[i]) * inv;  // a lane reads and writes only its own elements (x == y)
    y[r * F + i] = Elem<E>::from_float(e);
    if (y32) y32[r * F + i] = e;
  }
}

template <class E>
void launch(const void* x, void* y, float* y32, std::int64_t rows, int F, float eps, void* stream) {
  const auto blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  l2norm_kernel<E><<<blocks, kWarps * 32, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const E*>(x), static_cast<E*>(y), y32, rows, F, eps);
  TTR_CUDA_CHECK_LAUNCH("l2norm_kernel");
}

}  // namespace

void l2norm_rows(DType dtype, const void* x, void* y, float* y_fp32, std::int64_t rows, int F, float eps,
                 void* stream) {
  if (rows < 0 || F < 1) throw std::invalid_argument("gpu l2norm_rows: need rows ≥ 0 and F ≥ 1");
  if (rows == 0) return;
  if (dtype == DType::bf16) launch<__nv_bfloat16>(x, y, y_fp32, rows, F, eps, stream);
  else launch<float>(x, y, y_fp32, rows, F, eps, stream);
}

}  // namespace ttr::gpu
