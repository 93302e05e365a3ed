// The CUDA kernels in the gate: each (layer, case, seed) computes the MPFR oracle
// once (sequential form, 128 bits, as oracles/gate.cpp) and the error model of
// the chunk form at the kernels' chunk size 64 in the kernel's dtype
// (docs/error-model.md), then compares every CUDA kernel × dtype with it.
//
// Model for the fused-recurrent kernel. fp32: the quadrature sum of the
// sequential form's fp32 model (the kernel is that form for the delta
// recurrence: every operation fp32) and the chunk form's fp32 model (for
// precond_*, the write key k̃ comes from the chunkwise preconditioner on the
// host). Neither alone bounds it: on the gate's `edges` case (β ∈ {0, 1}, decays
// of 1e-30) GDN's recurrent fp32 reached ratio 34.9 under the chunk model, and
// PGDN's 18.1 under the sequential model (H100, scripts/gpu-check). bf16: the
// chunk form's bf16 model — the kernel rounds to bf16 only its inputs and o, a
// subset of the chunk form's narrowing points; measured ratios ≤ 1.2 under it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_gate/runner.hpp"
#include "oracles/gate.hpp"
#include "oracles/vectors.hpp"

namespace ttr::cuda {

inline constexpr int kChunkSize = 64;

struct UnitOptions {
  std::vector<Kernel> kernels = {Kernel::chunk, Kernel::recurrent};
  std::vector<Tier> dtypes = {Tier::bf16, Tier::fp32};
  int samples = 8;
  // Also compare the chunk kernel with the recurrent kernel directly (same
  // dtype), under the same model: id ".../cuda-chunk-vs-recurrent/...".
  bool cross = false;
};

// One layer on one input set: checks in (dtype, kernel) order, ids
// "layer/<kernel>/<dtype>/<case>/<seed>".
std::vector<GateCheck> check_unit(const LayerEntry& layer, const VectorCase& c, std::uint64_t seed,
                                  const UnitOptions& opt);
// The same on given inputs (e.g. one head of a case's inputs); ids name `case_name`.
std::vector<GateCheck> check_inputs(const LayerEntry& layer, const TensorMap<double>& in, const Config& cfg,
                                    const std::string& case_name, std::uint64_t seed, const UnitOptions& opt);

struct GateReport {
  Status status;
  std::vector<GateCheck> checks;  // empty when skipped
  bool pass = true;               // true when skipped: a missing device is not a failure
};

// The gate's cases (oracles/gate.cpp: gate_cases, seeds, layer and case filters)
// over the layers with CUDA kernels. Skipped (status.reason()) without a device.
GateReport run_gate(const ttr::GateOptions& opt);

}  // namespace ttr::cuda
