// The CUDA kernels of gpu/ as a kernel under test: a layer's inputs (by their
// docs/layers.md names, as double) are converted the way a model passes them
// (activations q, k, v, beta in the dtype; gates and states fp32), padded to the
// kernels' shapes, run on the device, and read back as double.
#pragma once

#include <string>
#include <vector>

#include "oracles/arith.hpp"
#include "oracles/config.hpp"
#include "oracles/runner.hpp"

namespace ttr::cuda {

enum class Kernel { chunk, recurrent };
const char* kernel_name(Kernel k);  // "cuda-chunk", "cuda-recurrent"

struct Status {
  bool built = false;   // compiled with TTR_CUDA
  int devices = 0;
  std::string device;   // name of device 0
  bool usable() const { return built && devices > 0; }
  std::string reason() const;  // "skipped: no CUDA device", "skipped: CUDA kernels not built", or ""
};
Status status();

// Layers with CUDA kernels: delta_rule, gated_delta_rule, kda, kaczmarz_delta_rule,
// precond_gated_delta_rule (the delta family, gpu/family/), kla_kalman (gpu/kla_kalman/),
// gka (gpu/gka/; solver=chebyshev only).
const std::vector<std::string>& layers();
bool has_layer(const std::string& layer);
bool is_delta_family(const std::string& layer);

struct RunOptions {
  bool poison = true;  // fill outputs with NaN bytes before the launch (unwritten elements show)
};

// Runs one layer's kernel in dtype bf16 or fp32. Throws InputError for a layer
// without CUDA kernels or another dtype, ttr::gpu::CudaError on device failures.
TensorMap<double> run(const std::string& layer, Kernel kernel, Tier dtype, const TensorMap<double>& inputs,
                      const Config& cfg, const RunOptions& opt = {});

}  // namespace ttr::cuda
