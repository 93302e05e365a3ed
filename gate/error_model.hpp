// The error model of the gate: for every output row of a kernel under test, the
// error a correct kernel of that dtype is expected to make, so that an observed
// error becomes an **error ratio** (observed / modelled), as LAPACK's testers
// report a test ratio against a threshold. Derivation: docs/error-model.md.
//
// Row: the unit compared normwise — a token's feature vector ([B,T,H,F] outputs:
// row (b,t,h) over F), a per-token scalar ([B,T,H]), or a (b,h) state block
// ([B,H,...] outputs: row (b,h) over the rest).
//
// Model: the kernel's rounding is propagated through the exact computation by
// Monte Carlo arithmetic (Parker 1997): `samples` runs of the form in the `mca`
// tier, where every operation's result is perturbed by a relative δ ~ U(−u_op, u_op)
// and every value the policy narrows by U(−u_store, u_store) (u of the dtype the
// kernel computes / stores in; a TF32 read, toward zero by U(0, 2^-10): truncation,
// reference/core/mca.hpp, mca_perturb_toward_zero). The RMS deviation of those runs from the oracle,
// row by row, is the modelled error: it carries the magnitudes actually summed,
// cancellation, state growth over T, decays and the condition of GKA's solves,
// because it is the computation itself, perturbed. The bound of a row is
//   bound = rms_mca + u_dtype · ‖oracle_row‖₂ + tiny(dtype) · √width
// (the second term: storing the exact result in the dtype; the third: a floor for
// rows that are exactly zero), and ratio = ‖candidate_row − oracle_row‖₂ / bound.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gate/policies.hpp"
#include "oracles/arith.hpp"
#include "oracles/config.hpp"
#include "oracles/oracle_tier.hpp"
#include "oracles/registry.hpp"
#include "oracles/spec.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

// One documented threshold on the ratio for every layer, form and dtype
// (calibration: docs/error-model.md).
inline constexpr double kRatioThreshold = 8.0;

struct ModelSpec {
  Form form = Form::chunk;   // the algorithm whose rounding the model propagates
  Direction direction = Direction::forward;
  Tier dtype = Tier::bf16;   // the kernel's dtype: bf16 | fp16 | fp32 | fp64
  Policy policy = Policy::native;  // a foreign kernel's arithmetic (gate/policies.hpp): fp32 dtype only
  int chunk_size = 64;
  int samples = 8;           // Monte Carlo arithmetic runs
  std::uint64_t seed = 0;    // of the perturbations: the same seed, the same model
  // Further independent sources of the kernel's error: the models of these forms
  // (same dtype, chunk size, samples, seed) are added in quadrature, row by row
  // (a CUDA sequential fp32 kernel: its own form and the chunkwise preconditioner
  // it is fed, gate/kernel_checks.cpp).
  std::vector<Form> also = {};
};

// The model of a CPU form run in a policy's arithmetic, as the gate judges it (gate.cpp,
// and the policy tests that judge one unit by hand); samples: the Monte Carlo runs.
inline ModelSpec policy_model(Form form, Direction direction, PolicyChoice policy, int chunk_size, std::uint64_t seed,
                              int samples = ModelSpec{}.samples) {
  ModelSpec ms;
  ms.form = form;
  ms.direction = direction;
  ms.dtype = policy.dtype;
  ms.policy = policy.policy;
  ms.chunk_size = chunk_size;
  ms.samples = samples;
  ms.seed = seed;
  return ms;
}

// Unit roundoff of a kernel dtype: bf16 2^-8, fp16 2^-11, fp32 2^-24, fp64 2^-53.
double unit_roundoff(Tier dtype);
// Largest finite value of a kernel dtype.
double max_finite(Tier dtype);

// Where a row sits: (b, t, h) for per-token outputs, (b, -1, h) for state blocks.
// Varlen inputs (cu_seqlens, B = 1): also the sequence a packed token t belongs to
// and its index in it (for a state row [N, H, …], the sequence is b and token -1);
// -1 when the inputs are not varlen.
struct Location {
  std::int64_t b = 0, t = -1, h = 0;
  std::int64_t sequence = -1, token = -1;
};

// How an output tensor splits into rows, from its spec dims.
struct RowLayout {
  std::int64_t rows = 0, width = 0;
  bool per_token = false;  // dims[1] is T
  std::int64_t T = 1, H = 1;
  Location locate(std::int64_t row) const;
};
RowLayout row_layout(const TensorSpec& out, const Shape& shape);

struct ErrorModel {
  ModelSpec spec;
  double u = 0.0;             // unit roundoff of spec.dtype
  TensorMap<double> rms;      // per output tensor: [rows] RMS deviation of the MCA runs
};

// Runs the model of one form (spec.form; `also` is the judge's business) for one
// input set. `oracle` is the MPFR oracle (F64-rounded). InputError when the
// layer has no such form.
ErrorModel model_errors(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg,
                        const TensorMap<double>& oracle, const ModelSpec& spec);

struct TensorVerdict {
  std::string name;
  bool present = true;          // false: absent from the candidate, not compared
  std::int64_t elements = 0, rows = 0;
  double max_abs_error = 0.0;   // over finite candidate elements with a finite oracle
  double max_ratio = 0.0;       // over rows (inf when a row has a non-finite failure)
  Location worst;               // row of max_ratio
  std::int64_t nan_count = 0, inf_count = 0;  // in the candidate
  // Non-finite candidate elements where the oracle is finite and representable in the dtype.
  std::int64_t nonfinite_failures = 0;
  Location first_nonfinite;     // row of the first such element
  bool pass = true;
  // The worst row's exact values are all 0 and so is its model: the subnormal floor
  // alone bounds it, so any nonzero value there fails, whatever the arithmetic (a
  // rounding residue of terms that cancel exactly; report.hpp's floor_line).
  bool worst_at_floor = false;
};

// The range classification of a check with non-finite failures (gate/range.hpp):
// the first intermediate of the form's exact computation beyond the largest
// finite value of the format it is rounded to, if any.
struct RangeNote {
  bool beyond = false;          // false: the NaN/Inf is the kernel's failure
  Form form = Form::chunk;      // the form traced (the model's)
  std::string intermediate;     // the form's name for it ("" where the form names none)
  std::string operation;        // "+", "-", "*", "/", "exp", "sqrt", "ldexp", "store"
  std::string format;           // the format it is rounded to: fp32, bf16, fp16, fp64
  double value = 0.0;           // its exact value (±inf: beyond double's range too)
  double limit = 0.0;           // that format's largest finite value
};

// What produced a check's oracle and how good it is (oracles/oracle_tier.hpp,
// docs/oracle-tiers.md): the tier ("dd", "dd+mpfr:N", "mpfr:N", or
// "stored" for check --oracle), the escalation unit and slices, and
// error_ratio = max over rows of the oracle's estimated own error / the row's
// bound (NaN where not estimated: MPFR-only and stored oracles).
struct OracleNote {
  OracleProvenance provenance;
  double error_ratio = std::numeric_limits<double>::quiet_NaN();
};

struct CheckResult {
  std::string layer;
  Tier dtype = Tier::bf16;
  Policy policy = Policy::native;
  Form model_form = Form::chunk;
  Direction direction = Direction::forward;  // backward: the tensors are gradients (d<input>)
  int chunk_size = 64;
  // The Monte Carlo runs behind the model's scale: the spec's (8 by default), or
  // more where the judge re-judged a near failure (gate/judge.cpp); 0: no model
  // (a non-finite-only or kernel-vs-kernel verdict without one).
  int model_samples = 0;
  double threshold = kRatioThreshold;
  std::vector<TensorVerdict> tensors;  // in the spec's output order
  bool pass = true;
  // Set when the check has non-finite failures and the form's exact intermediates
  // leave the dtype's range (a `range` finding): range.beyond. range_excused: the
  // non-finite failures were not counted (the default; not under --strict-range).
  RangeNote range;
  bool range_excused = false;
  OracleNote oracle;  // set by the judge; tier empty where no judge computed one
};

// Compares a candidate with the oracle under the model. `o` must be present;
// every other spec output is compared when the candidate has it (a kernel may not
// return its final state) and listed as absent otherwise; diagnostics that
// describe the arithmetic (spec `certifiable = false`: GKA's kappa, resid) are not
// compared. A present tensor must have the oracle's shape (InputError naming the
// tensor otherwise); tensors the spec does not know are ignored.
CheckResult compare(const LayerSpec& spec, const TensorMap<double>& oracle, const ErrorModel& model,
                    const TensorMap<double>& candidate);

// The oracle's estimated own error against the model's bound: max over the rows
// compare() judges of ‖own_error_row‖₂ / bound_row (0 when every row's own
// error is 0).
double oracle_error_ratio(const LayerSpec& spec, const TensorMap<double>& oracle, const ErrorModel& model,
                          const TensorMap<double>& own_error);

}  // namespace ttr
