// Shared by the GPU benchmark drivers: a checked CUDA call that exits with the
// call's text, the median of CUDA-event timings after one warm-up, and copies to
// and from the device with the relative RMS difference of two results.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define BENCH_CHECK(x)                                                         \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));            \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace ttr::bench {

template <class F>
double median_ms(F&& f, int reps) {
  cudaEvent_t a, b;
  BENCH_CHECK(cudaEventCreate(&a));
  BENCH_CHECK(cudaEventCreate(&b));
  f();  // warm-up
  BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    BENCH_CHECK(cudaEventRecord(a));
    f();
    BENCH_CHECK(cudaEventRecord(b));
    BENCH_CHECK(cudaEventSynchronize(b));
    float t = 0;
    BENCH_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  BENCH_CHECK(cudaEventDestroy(a));
  BENCH_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Device copy of host bytes.
inline void* to_device(const void* h, std::size_t bytes) {
  void* d = nullptr;
  BENCH_CHECK(cudaMalloc(&d, bytes));
  BENCH_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}

// n elements of a device tensor (bf16 or fp32) as floats.
inline std::vector<float> download(const void* d, std::size_t n, bool bf16) {
  std::vector<float> out(n);
  if (bf16) {
    std::vector<__nv_bfloat16> h(n);
    BENCH_CHECK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i) out[i] = __bfloat162float(h[i]);
  } else {
    BENCH_CHECK(cudaMemcpy(out.data(), d, n * 4, cudaMemcpyDeviceToHost));
  }
  return out;
}

// ‖a − b‖/‖b‖.
inline double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * double(a[i] - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace ttr::bench
