// Every CUDA call's status checked and turned into ttr::gpu::CudaError naming the
// call (and the launch's last error after each kernel launch).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "gpu/api.hpp"

namespace ttr::gpu::detail {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw CudaError(std::string("CUDA error in ") + call + " (" + file + ":" + std::to_string(line) +
                  "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

}  // namespace ttr::gpu::detail

#define TTR_CUDA_CHECK(call)                                                          \
  do {                                                                                \
    const cudaError_t ttr_e_ = (call);                                                \
    if (ttr_e_ != cudaSuccess) ::ttr::gpu::detail::throw_cuda(ttr_e_, #call, __FILE__, __LINE__); \
  } while (0)

// After a <<<…>>> launch: configuration errors surface here, not at the launch.
#define TTR_CUDA_CHECK_LAUNCH(name)                                                              \
  do {                                                                                           \
    const cudaError_t ttr_l_ = cudaGetLastError();                                               \
    if (ttr_l_ != cudaSuccess) ::ttr::gpu::detail::throw_cuda(ttr_l_, name, __FILE__, __LINE__); \
  } while (0)
