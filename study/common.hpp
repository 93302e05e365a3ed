// What the studies share: inputs of a layer drawn as `ttrcheck vectors` draws
// them, the kernel form of a layer, and the error measures (relative error and
// the judge's error ratio, gate/judge.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gate/judge.hpp"
#include "oracles/vectors.hpp"
#include "study/study.hpp"

namespace ttr::study {

// The studies' oracle: the sequential form in MPFR at 128 bits, as the gate's
// (its rounding stays ~20 orders of magnitude below the fp32 errors measured).
inline constexpr unsigned kOracleBits = 128;

Dims dims_of(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V);

// Inputs of `spec` for dims and regime, drawn from `seed` (every value on the bf16 grid).
TensorMap<double> draw_inputs(const LayerSpec& spec, const Dims& dims, const Regime& regime, std::uint64_t seed,
                              const std::string& case_name = "study");
// The forward inputs plus a cotangent of every output (`do`, `dht`, ...), drawn
// as `ttrcheck vectors --backward` draws them.
TensorMap<double> draw_backward_inputs(const LayerSpec& spec, const Dims& dims, const Regime& regime,
                                       std::uint64_t seed, const std::string& case_name = "study");

// The layer's configuration in the studies: the gate's (GKA's chunkwise solver)
// plus, for a required key without default, the value `ttrcheck vectors` sets
// (its spec's example: pdn_exact's and kalman_filter's λ).
std::vector<std::pair<std::string, std::string>> study_config(const LayerSpec& spec);

// The algorithm a kernel of this layer runs: chunk, else scan, else sequential.
Form kernel_form(const LayerEntry& layer);

// ‖c − o‖₂ / ‖o‖₂ over a whole tensor (0/0 = 0; a non-finite c gives inf).
double rel_error(const Tensor<double>& candidate, const Tensor<double>& oracle);
// The largest relative error over the tensors both maps hold that the spec
// compares (certifiable outputs), and the name of that tensor.
std::pair<double, std::string> max_rel_error(const LayerSpec& spec, const TensorMap<double>& candidate,
                                             const TensorMap<double>& oracle);
// The largest error ratio over a check's present tensors (inf for a NaN/Inf failure).
double max_ratio(const CheckResult& r);
// The ratio of one tensor (NaN when absent).
double ratio_of(const CheckResult& r, const std::string& tensor);

// Judges `candidate` with a model of (form, dtype, chunk, direction).
CheckResult judge_candidate(Judge& judge, const TensorMap<double>& candidate, Form form, Tier dtype, int chunk,
                            Direction direction, std::uint64_t seed, int samples);

// "bf16", "fp32", ... back to a tier (std::invalid_argument otherwise).
Tier dtype_tier(const std::string& name);

// Small numeric helpers for assessments.
double quantile(std::vector<double> v, double p);  // linear interpolation; NaN for empty
std::string num(double x);                          // 3 significant digits

}  // namespace ttr::study
