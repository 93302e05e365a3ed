// Host-side launch helpers shared by the kernels: the dynamic shared-memory
// opt-in and per-stage event timing (TTR_GPU_STAGE_TIMING=1, a benchmarking aid).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu/core/check.cuh"

namespace ttr::gpu {

// K = V = 128 (the production heads) as a compile-time constant for the chunk
// kernels that take a KV parameter: f(std::integral_constant<int, 128>) there, else
// f(std::integral_constant<int, 0>) (K and V at run time, the same code). With the
// constant their loops over K and V unroll and their tile addressing folds.
template <class F>
void with_static_kv(int K, int V, F&& f) {
  if (K == 128 && V == 128) f(std::integral_constant<int, 128>{});
  else f(std::integral_constant<int, 0>{});
}

inline int max_smem_optin() {
  int device = 0, bytes = 0;
  TTR_CUDA_CHECK(cudaGetDevice(&device));
  TTR_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

// Raise a kernel's dynamic shared-memory limit to the device's opt-in maximum,
// once per kernel and device (setting it per launch to that launch's size races
// when host threads launch one kernel with different shapes). Throws
// std::invalid_argument, naming `who`, when `bytes` exceed the device's limit.
template <class Kern>
void allow_smem(Kern kernel, std::size_t bytes, const char* who) {
  const int limit = max_smem_optin();
  if (bytes > static_cast<std::size_t>(limit))
    throw std::invalid_argument(std::string(who) + ": needs " + std::to_string(bytes) +
                                " bytes of shared memory, the device has " + std::to_string(limit));
  static std::mutex m;
  static std::vector<std::pair<const void*, int>> done;
  const std::lock_guard<std::mutex> lock(m);
  int device = 0;
  TTR_CUDA_CHECK(cudaGetDevice(&device));
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel), device};
  if (std::find(done.begin(), done.end(), key) != done.end()) return;
  TTR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
  done.push_back(key);
}

// Events between a kernel's stages when TTR_GPU_STAGE_TIMING is set to anything but
// "" or "0" (a script that writes TTR_GPU_STAGE_TIMING=0 means off, and the events'
// synchronisation would slow the times it takes); print() synchronises on the last
// one and writes "stage ms: name t ..." to stderr.
inline bool stage_timing_on() {
  const char* e = std::getenv("TTR_GPU_STAGE_TIMING");
  return e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0;
}
class StageTimer {
 public:
  StageTimer(cudaStream_t stream, std::vector<const char*> names)
      : on_(stage_timing_on()), stream_(stream), names_(std::move(names)) {
    if (on_) {
      ev_.resize(names_.size() + 1);
      for (auto& e : ev_) TTR_CUDA_CHECK(cudaEventCreate(&e));
    }
  }
  ~StageTimer() {
    for (auto& e : ev_) (void)cudaEventDestroy(e);
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  void mark(std::size_t i) {
    if (on_) TTR_CUDA_CHECK(cudaEventRecord(ev_[i], stream_));
  }
  void print() {
    if (!on_) return;
    TTR_CUDA_CHECK(cudaEventSynchronize(ev_.back()));
    std::string line = "stage ms:";
    for (std::size_t i = 0; i < names_.size(); ++i) {
      float ms = 0;
      TTR_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_[i], ev_[i + 1]));
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s %.4f", names_[i], ms);
      line += buf;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }

 private:
  bool on_;
  cudaStream_t stream_;
  std::vector<const char*> names_;
  std::vector<cudaEvent_t> ev_;
};

}  // namespace ttr::gpu
