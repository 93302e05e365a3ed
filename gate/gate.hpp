// The gate: a built-in suite of checks — layers × kernels × directions × dtypes
// (bf16, fp32; or the arithmetic policies asked for) × cases × seeds — each judged (gate/judge.hpp) against the MPFR
// oracle under the error model, or (criterion `fla`) by flash-linear-attention's
// practice. Backward checks run a layer's backward forms on the case's inputs
// plus drawn cotangents (generate_backward_inputs) and judge every gradient.

// The kernels are a backend's: the CPU chunk and scan forms (Backend::cpu), or a
// device's kernels as the registry declares them (Backend::cuda,
// gate/kernel_checks.hpp). `ttrcheck gate` prints and reports it.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gate/inject.hpp"
#include "gate/judge.hpp"
#include "gate/policies.hpp"
#include "gate/shard.hpp"
#include "oracles/vectors.hpp"

namespace ttr {

struct GateCase {
  std::string name;
  Dims dims;
  Regime regime;
  int chunk_size = 64;
  int seeds = 1;  // seeds per case in this suite (overridden by GateOptions::seeds)
  // Layers whose backward units this case does not run (their gradient model is
  // too costly at this shape for the suite: gate_cases says why).
  std::set<std::string> no_backward = {};
};

struct GateOptions {
  Backend backend = Backend::cpu;       // whose kernels: the CPU forms or the device's
  std::string suite = "default";        // default | full | production
  std::vector<std::string> layers;      // empty: every layer with a chunk or scan form
  std::vector<Form> forms;              // empty: every chunk and scan form (device: every declared kernel)
  // The directions checked: the forms (CPU) or kernels (device) of each that the
  // registry declares.
  std::vector<Direction> directions = {Direction::forward, Direction::backward};
  std::vector<std::string> cases;       // empty: every case of the suite
  // The arithmetics judged (gate/policies.hpp): empty, the native bf16 and fp32. A
  // foreign policy (tf32, bf16-storage) judges the CPU forms run in its concrete
  // arithmetic (concrete_tier) under its model: its calibration. The device's
  // kernels run bf16 and fp32 only.
  std::vector<PolicyChoice> policies;
  std::uint64_t seed = 0;               // first seed
  int seeds = 0;                        // > 0: seeds per case instead of the suite's
  int threads = 0;                      // 0: the slicer's default (TTR_THREADS, OMP_NUM_THREADS, the cores)
  int samples = 8;                      // Monte Carlo arithmetic runs of the model
  Criterion criterion = Criterion::model;
  std::string mutant;                   // run the kernels under this mutant (testing the gate)
  // Testing the gate: judge each CPU kernel's outputs once per magnitude with an
  // injected error of this shape (gate/inject.hpp); empty magnitudes: no injection.
  InjectShape inject = InjectShape::scale;
  std::vector<double> inject_magnitudes;
  bool fail_fast = false;               // stop scheduling work after the first failed check
  Shard shard;                          // run only this shard's units (unit k: shard k mod N)
  bool strict_range = false;            // range findings fail (docs/error-model.md, "Range findings")
  OracleMode oracle_mode = OracleMode::fast;  // auto: dd where negligible, MPFR slices elsewhere; mpfr: MPFR throughout
  std::function<void(std::size_t done, std::size_t total, const std::string& id)> progress;
};

struct GateCheck {
  std::string id;  // layer/form/dtype/case/seed, and /backward for the backward direction
  CheckResult result;
  std::size_t unit = 0;  // its (layer, direction, case, seed) unit's index in the unsharded plan (merging shards)
};

struct GateResult {
  std::vector<GateCheck> checks;  // in plan order (independent of threads); fail_fast: those run
  bool pass = true;               // true when skipped: a missing device is not a failure
  std::string skipped;            // why the backend did not run ("skipped: no CUDA device"), or ""
  std::string device;             // the device that ran it (Backend::cuda)
  std::size_t units = 0;          // units in the unsharded plan (every shard's together)
};

const std::vector<std::string>& gate_suite_names();  // default, full, production
std::vector<GateCase> gate_cases(const std::string& suite);  // InputError for unknown suites
// The layer's configuration in the gate (GKA runs its chunkwise solver).
std::vector<std::pair<std::string, std::string>> gate_config(const LayerSpec& spec);

// InputError naming the first unknown suite, case, layer or mutant, a policy given
// twice, or one the device's kernels do not run (Backend::cuda).
void validate_gate_options(const GateOptions& opt);
// Whether the device's kernels run in this policy (native bf16 or fp32).
bool device_policy(const PolicyChoice& p);
GateResult run_gate(const GateOptions& opt);

// The gate's inputs for a layer and case: dims and regime of the case, the
// layer's gate configuration.
VectorCase gate_vector_case(const LayerSpec& spec, const GateCase& c);

}  // namespace ttr
