// A fuzzing campaign (`ttrcheck fuzz`, docs/fuzzing.md): cases drawn from the
// structured generators (generators.hpp) run on the kernel under test
// (target.hpp) and are judged against the gate's oracle and error model.
//
// Oracle. Every case is first screened against the fp64 sequential form (cheap:
// the same recurrence in double), and only the suspicious ones go to the MPFR
// oracle of `ttrcheck check` (the sequential definition in MPFR-256, the error
// model with 8 Monte Carlo samples and seed 0), whose verdict alone makes a
// finding. The screen cannot hide a finding of the objectives below:
//   - nan: every case whose candidate has a non-finite element is confirmed in
//     MPFR (whatever fp64 says), and every case where fp64 has a non-finite
//     element that the candidate has not;
//   - ratio: the screened ratio uses the fp64 oracle (its own error ~1e-16
//     relative, 10⁸ below the fp32 errors measured, 10¹³ below bf16's) and a
//     2-sample model; cases above half the threshold are confirmed with the
//     full check, so a screen that underestimates by 2× still confirms.
// Kinds of finding: `nonfinite` (NaN/Inf in the kernel where the oracle is finite
// and representable: `ttrcheck check` fails), `oracle_nonfinite` (the oracle itself
// has no finite value where the kernel returned a finite one: reported, not a
// kernel failure), `ratio` (finite, but the error ratio exceeds the gate's
// threshold 8: `ttrcheck check` fails), `range` (NaN/Inf where the oracle is
// finite, but the exact computation of the kernel's form has an intermediate
// beyond the dtype's range, gate/range.hpp: no kernel of this form and dtype can
// compute the case; not a failure unless strict_range).
//
// Determinism: case i is a function of (seed, i) and of the results of cases
// < i (local search); nothing depends on time except where a time budget stops.
// A budget in cases therefore gives identical findings and files on every run.
//
// Shards (gate/shard.hpp): shard i of N runs the cases Shard::case_range of the
// budget (a contiguous seed range; case indices stay global), so the local
// search of the ratio objective starts afresh in each shard and never leaves
// it. The nan objective has no such state: the N shards together run exactly
// the cases of the unsharded campaign, and `ttrcheck merge` rebuilds its files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gate/error_model.hpp"
#include "gate/shard.hpp"
#include "fuzz/generators.hpp"
#include "fuzz/target.hpp"

namespace ttr::fuzz {

enum class Objective { nan, ratio };
enum class FindingKind { nonfinite, oracle_nonfinite, ratio, range };
inline constexpr int kFindingKinds = 4;
const char* objective_name(Objective);
Objective parse_objective(const std::string&);  // InputError
const char* kind_name(FindingKind);

// Exactly one of cases and seconds is > 0.
struct Budget {
  std::int64_t cases = 0;
  double seconds = 0;
  std::string text() const;
};
// "500cases" | "500" (cases); "90s" | "10m" | "2h" (time). InputError otherwise.
Budget parse_budget(const std::string& s);

struct Progress {
  std::int64_t cases = 0;               // run (by this shard)
  double seconds = 0;
  double best_ratio = 0;                // screened
  std::int64_t nonfinite_cases = 0;     // cases with a confirmed non-finite failure (not range)
  std::int64_t range_cases = 0;         // cases whose non-finite values are range findings
  std::int64_t findings = 0;            // findings kept (to be minimised and written)
};

struct CampaignOptions {
  Objective objective = Objective::nan;
  Budget budget{500, 0};
  std::uint64_t seed = 0;
  GeneratorOptions gen;
  int max_findings = 3;   // findings kept per kind (later ones are counted only)
  bool minimise = true;
  int minimise_trials = 300;  // bound on the minimiser's runs per finding
  int screen_samples = 2;
  Shard shard;  // run this shard's range of the budget's case indices
  bool strict_range = false;  // --strict-range: range findings count as failures (exit 1)
  std::function<void(const Progress&)> progress;  // after every case
};

struct Finding {
  FindingKind kind;
  std::int64_t case_index = 0;   // the campaign case that found it
  double seconds = 0;            // when (not written to files: it varies)
  Case original, minimised;
  TensorMap<double> candidate;   // the target's outputs on `minimised`
  CheckResult check;             // `ttrcheck check`'s verdict on `minimised`
  double objective_value = 0;    // nonfinite, range: failing elements; oracle_nonfinite: elements; ratio: max ratio
};

struct CampaignResult {
  Progress last;
  std::int64_t oracle_nonfinite_cases = 0;
  double best_ratio_confirmed = -1;  // ratio objective: the best screened case through the full check
  std::int64_t first_finding_case = -1;
  double first_finding_seconds = -1;
  std::vector<Finding> findings;
};

CampaignResult run_campaign(const LayerEntry& layer, const Target& target, const CampaignOptions& opt);

// The pieces, for the minimiser and the tests.

// `ttrcheck check`'s oracle: the sequential form in MPFR-256, as doubles (backward:
// the gradients, from the case's inputs and cotangents).
TensorMap<double> mpfr_oracle(const LayerEntry& layer, const Case& c, Direction direction = Direction::forward);
// `ttrcheck check`'s verdict (default options: 8 samples, seed 0) on the target's outputs.
CheckResult full_check(const LayerEntry& layer, const Target& target, const Case& c, const TensorMap<double>& oracle,
                       const TensorMap<double>& candidate);
// The spec a target's cases and outputs follow: the layer's, or its backward_spec
// (inputs plus cotangents; outputs the gradients) for a backward target.
LayerSpec case_spec(const LayerEntry& layer, const Target& target);
// Non-finite elements of certifiable outputs where `oracle` is non-finite and the candidate finite.
std::int64_t oracle_nonfinite_elements(const LayerSpec& spec, const TensorMap<double>& oracle,
                                       const TensorMap<double>& candidate);
std::int64_t nonfinite_failures(const CheckResult& r);
double max_ratio(const CheckResult& r);
// Does `c` still show a failure of this kind on the target (MPFR oracle)?
bool still_fails(const LayerEntry& layer, const Target& target, FindingKind kind, const Case& c);

// Input size, for "strictly smaller".
struct CaseSize {
  std::int64_t T = 0, sequences = 0, nonzeros = 0, tensors = 0;
  double magnitude = 0;  // Σ |x| over every input element
};
CaseSize size_of(const Case& c);

// Greedy, deterministic delta debugging: shorter T (prefixes, then dropped
// leading tokens), one (b, h) sequence, optional tensors removed, rows of each
// tensor zeroed (halves, quarters, … as ddmin), tensors halved in magnitude —
// each step kept only if still_fails. At most `max_trials` runs.
Case minimise(const LayerEntry& layer, const Target& target, FindingKind kind, const Case& c, int max_trials);

}  // namespace ttr::fuzz
