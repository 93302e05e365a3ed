// The judge: the one path from a candidate's outputs to a verdict —
//   oracle (a reference form in high precision) → error model (the same
//   algorithm in Monte Carlo arithmetic, gate/error_model.hpp) → compare (per-row
//   error ratios, the NaN/Inf rule) → CheckResult.
// `ttrcheck check`, the gate (CPU forms and device kernels), the fuzz campaign,
// the fuzz harnesses and the Python API all judge through it, so a verdict means
// the same thing wherever it is printed.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "gate/error_model.hpp"

namespace ttr {

// How a candidate is judged: against the error model (the product), or by
// flash-linear-attention's practice, for comparison (FLA's fla/utils/testing.py
// `assert_close`, against an fp32 run of the sequential form):
//   fla     relative RMS  RMS(c − r) / (RMS(r) + 1e-8)  below the tensor's
//           threshold (fla_threshold), or max |c − r| ≤ 1e-6 (passed outright);
//   fla_ci  the same under FLA's CI setting (FLA_CI_ENV=1), where a miss with
//           relative RMS < 0.01 or max |c − r| ≤ 0.3 is only a warning: it fails
//           only when the relative RMS is ≥ max(threshold, 0.01) and max |c − r| > 0.3.
// Both report a tensor's ratio as relative RMS / threshold.
enum class Criterion { model, fla, fla_ci };
inline constexpr double kFlaErrAtol = 1e-6;       // assert_close's err_atol
inline constexpr double kFlaCiWarnRate = 0.01;    // CI: below this relative RMS, a warning
inline constexpr double kFlaCiWarnAbs = 0.3;      // CI: or at most this absolute error
// The threshold FLA's tests give a tensor (tests/ops/test_gated_delta.py and its
// siblings): 0.005 for outputs (o, ht), 0.02 for the gradients of gates and step
// sizes (dg, dbeta; here also the gate/step-size inputs of our other layers: g_*,
// beta_*, a_bar, p_bar), 0.008 for every other gradient (dq, dk, dv, dh0, …).
double fla_threshold(std::string_view tensor, Direction direction);
// The verdict of `criterion` (fla or fla_ci) on one tensor with relative RMS `rel`
// and greatest absolute difference `max_abs`.
bool fla_passes(Criterion criterion, double rel, double max_abs, double threshold);

struct JudgeOptions {
  ModelSpec model;                     // the kernel's algorithm, dtype, chunk size, samples, seed, direction
  Arith oracle{Tier::mpfr, 256};       // the reference: the sequential form in this arithmetic
  OracleMode oracle_mode = OracleMode::fast;  // with an mpfr Arith: dd verified by fp64, escalating to MPFR
  Criterion criterion = Criterion::model;
  bool strict_range = false;           // range findings fail (--strict-range)
};

// One input set of one layer, judged once or many times: the oracle is computed
// once (or given), each model once per ModelSpec, so a gate unit that judges
// several kernels and dtypes on the same inputs pays for each only once.
class Judge {
 public:
  // The oracle computed on first use: `layer`'s sequential form in `oracle`
  // arithmetic, in `direction` (backward: the inputs hold the cotangents). With
  // an MPFR arithmetic the oracle tier is decided per slice
  // (oracles/oracle_tier.hpp): double-double where its own error is negligible,
  // MPFR at oracle.bits elsewhere; set_oracle_mode(OracleMode::mpfr) forces MPFR.
  Judge(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg, Arith oracle = {Tier::mpfr, 256},
        Direction direction = Direction::forward);
  // A stored oracle (`check --oracle`).
  Judge(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg, TensorMap<double> oracle,
        Direction direction = Direction::forward);
  // The judge keeps a reference to the inputs (they may be large): they must
  // outlive it, so temporaries are refused at compile time.
  Judge(const LayerEntry&, TensorMap<double>&&, const Config&, Arith = {}, Direction = Direction::forward) = delete;
  Judge(const LayerEntry&, TensorMap<double>&&, const Config&, TensorMap<double>, Direction = Direction::forward) = delete;

  const TensorMap<double>& oracle();
  // Before the oracle is computed: fast (the default) or MPFR throughout.
  void set_oracle_mode(OracleMode m) { oracle_mode_ = m; }
  // What produced the oracle (computes it if needed).
  const OracleProvenance& oracle_provenance();
  // The direction's spec: what the candidate's tensors are (forward: the layer's outputs).
  const LayerSpec& spec() const { return spec_; }
  // The model of `ms` (quadrature over ms.form and ms.also), cached.
  const ErrorModel& model(const ModelSpec& ms);

  // The verdict on a candidate under the model of `ms`. Non-finite failures are
  // range-classified (gate/range.hpp) against ms's form and dtype: a `range`
  // finding is recorded in CheckResult::range and, unless strict_range, excused.
  CheckResult operator()(const TensorMap<double>& candidate, const ModelSpec& ms);
  // --strict-range: range findings stay failures (still classified and reported).
  void set_strict_range(bool strict) { strict_range_ = strict; }
  // The range trace of ms's form and dtype on these inputs, cached.
  const RangeNote& range_note(const ModelSpec& ms);
  // The verdict under FLA's criterion (fla or fla_ci): the oracle must be the fp32
  // sequential run.
  CheckResult fla(const TensorMap<double>& candidate, const ModelSpec& ms, Criterion criterion = Criterion::fla);
  // Only the NaN/Inf rule (a non-finite candidate element where the oracle is
  // finite and representable in ms.dtype fails), no model: what screening needs.
  CheckResult nonfinite(const TensorMap<double>& candidate, Tier dtype);
  // The same, with the non-finite failures range-classified against ms's form and
  // dtype (as operator() does).
  CheckResult nonfinite(const TensorMap<double>& candidate, const ModelSpec& ms);
  // Two candidates against each other (e.g. a chunk kernel against a sequential
  // kernel of the same dtype): `reference` in the oracle's place, the two
  // kernels' models in quadrature (independent errors).
  CheckResult between(const TensorMap<double>& reference, const TensorMap<double>& candidate, const ModelSpec& a,
                      const ModelSpec& b);

 private:
  const ErrorModel& single(const ModelSpec& ms, Form form);

  const LayerEntry& layer_;
  const TensorMap<double>& inputs_;
  Config cfg_;
  Direction direction_;
  LayerSpec spec_;
  Arith oracle_arith_;
  std::optional<TensorMap<double>> oracle_;
  OracleMode oracle_mode_ = OracleMode::fast;
  OracleProvenance provenance_;
  TensorMap<double> own_error_;  // per oracle element (fast mode); empty otherwise
  void note_oracle(CheckResult& r, const ErrorModel& m);
  std::map<std::tuple<int, int, int, int, std::uint64_t, int>, ErrorModel> singles_;
  std::map<std::string, ErrorModel> combined_;
  std::map<std::tuple<int, int, int, int>, RangeNote> ranges_;
  bool strict_range_ = false;
};

// The one-shot form: oracle, model and verdict for one candidate.
CheckResult judge(const LayerEntry& layer, const TensorMap<double>& inputs, const Config& cfg,
                  const TensorMap<double>& candidate, const JudgeOptions& opt);

}  // namespace ttr
