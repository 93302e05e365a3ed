// The gate: a built-in suite of checks — layers × forms (the CPU chunk and scan
// kernels) × dtypes (bf16, fp32 policies) × cases × seeds — each comparing a
// kernel's outputs with the MPFR oracle under the error model, or (criterion
// `fla`) with flash-linear-attention's practice: relative RMS against an fp32
// sequential reference, threshold 0.005. `ttrcheck gate` prints and reports it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "oracles/error_model.hpp"
#include "oracles/vectors.hpp"

namespace ttr {

enum class Criterion { model, fla };

// FLA's tests (tests/ops/*: assert_close on relative RMS, 0.005).
inline constexpr double kFlaRelRmsThreshold = 0.005;

struct GateCase {
  std::string name;
  Dims dims;
  Regime regime;
  int chunk_size = 64;
  int seeds = 1;  // seeds per case in this suite (overridden by GateOptions::seeds)
};

struct GateOptions {
  std::string suite = "default";        // default | full
  std::vector<std::string> layers;      // empty: every layer with a chunk or scan form
  std::vector<Form> forms;              // empty: every chunk and scan form
  std::vector<std::string> cases;       // empty: every case of the suite
  std::uint64_t seed = 0;               // first seed
  int seeds = 0;                        // > 0: seeds per case instead of the suite's
  int threads = 0;                      // 0: hardware concurrency
  int samples = 8;                      // Monte Carlo arithmetic runs of the model
  Criterion criterion = Criterion::model;
  std::string mutant;                   // run the kernels under this mutant (testing the gate)
  bool fail_fast = false;               // stop scheduling work after the first failed check
  std::function<void(std::size_t done, std::size_t total, const std::string& id)> progress;
};

struct GateCheck {
  std::string id;  // layer/form/dtype/case/seed
  CheckResult result;
};

struct GateResult {
  std::vector<GateCheck> checks;  // in plan order (independent of threads); fail_fast: those run
  bool pass = true;
};

const std::vector<std::string>& gate_suite_names();  // default, full
std::vector<GateCase> gate_cases(const std::string& suite);  // InputError for unknown suites
// The layer's configuration in the gate (GKA runs its chunkwise solver).
std::vector<std::pair<std::string, std::string>> gate_config(const LayerSpec& spec);

// InputError naming the first unknown suite, case, layer or mutant.
void validate_gate_options(const GateOptions& opt);
GateResult run_gate(const GateOptions& opt);

}  // namespace ttr
