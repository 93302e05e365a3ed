// Test-vector suites: deterministic inputs drawn from a layer's spec (each
// tensor by its Role) under a suite's regime. `ttrcheck vectors` writes them
// with their oracle outputs for others to run their kernels on.
//
// Every generated value is exactly representable in bf16 (stored as F32), so a
// bf16 kernel, an fp32 kernel and the oracle all see the same inputs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oracles/spec.hpp"
#include "oracles/validate.hpp"

namespace ttr {

struct Regime {
  double key_log10_norm_lo = 0.0, key_log10_norm_hi = 0.0;  // key row norms 10^U(lo, hi)
  bool near_duplicate_keys = false;  // keys of a head within ~1e-2 of one direction
  bool decay_edges = false;          // g exactly 0 or log(1e-30) for many tokens
  bool beta_edges = false;           // β exactly 0 or 1 for many tokens
  bool value_edges = false;          // |v| near bf16's largest and smallest (subnormal) values
  bool optional_inputs = false;      // also draw the optional tensors (h0, ...)
  // Kalman regimes (KLA-K): ā = 10^U(lo, 0) or exactly `fixed_transition`; p̄ = 0;
  // λv = 10^U(0, hi).
  double transition_log10_lo = 0.0;
  double fixed_transition = 0.0;
  bool zero_noise = false;
  double precision_log10_hi = 0.0;
  // Varlen (docs/varlen.md): when not empty, the case packs these sequences into
  // one batch row (dims B = 1, T = cu_seqlens.back()); cu_seqlens is written as
  // I64 and every per-sequence tensor (h0, dht, ...) gets N = size - 1 rows.
  std::vector<std::int64_t> cu_seqlens = {};
};

struct VectorCase {
  std::string name;
  std::string doc;
  Dims dims;
  Regime regime;
  std::vector<std::pair<std::string, std::string>> config;  // extra --set pairs
};

// tiny, demo, standard, stress, varlen, production (generation: inputs only
// where an oracle would take hours), int32_overflow (on demand: B·T·H·K > 2^31).
const std::vector<std::string>& suite_names();
// InputError for an unknown suite.
std::vector<VectorCase> suite_cases(const LayerSpec& spec, const std::string& suite);

// Keeps delta-rule writes contractive (layers with step_scales_with_key_energy):
// where β_t‖k_t‖² > 1, β_t becomes the largest bf16 value with β_t‖k_t‖² ≤ 1.
// A no-op for other layers and for inputs without β or k.
void keep_writes_contractive(const LayerSpec& spec, TensorMap<double>& inputs);

// Inputs of one case; the same (spec, case, seed) gives bit-identical tensors.
TensorMap<double> generate_inputs(const LayerSpec& spec, const VectorCase& c, std::uint64_t seed);

// The inputs of the backward direction (backward_spec): the case's forward inputs
// plus a cotangent of every output (do, dht, …), each cotangent drawn like a value
// tensor (N(0,1) on the bf16 grid) from its own stream of (seed, layer, case,
// name), so the forward tensors and each cotangent are the same whatever else is drawn.
TensorMap<double> generate_backward_inputs(const LayerSpec& spec, const VectorCase& c, std::uint64_t seed);

}  // namespace ttr
