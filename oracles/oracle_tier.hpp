// Which arithmetic produces an oracle, and how good it is: the tool decides and
// says (docs/oracle-tiers.md).
//
// Fast mode (the default of check and gate; `ttrcheck oracle --oracle-tier auto`): the sequential
// form runs in double-double (the `dd` tier, QD) and in float64. To first order
// in the unit roundoff, both evaluate the same computation with rounding errors
// of sizes u_dd = 2^-104 and u_64 = 2^-53 entering through the same coefficients,
// so the double-double result's own error is about (u_dd/u_64) times float64's,
// and float64's is measured by |o_dd − o_64| (dd being 2^51 times closer to the
// truth). Per element, the estimate is
//   est = 16 · 2^-51 · (|o_dd − o_64| + 2^-53 |o|)
// (16: a safety factor; 2^-53|o|: one float64 ulp, the resolution of the
// comparison once both are rounded to double). A row (the error model's unit:
// (b, t, h) over features, or a (b, h) state block) escalates when
//   * float64 has lost more than 20 of its 53 bits there (‖o_dd − o_64‖ >
//     2^-20 ‖o‖: first order no longer describes it, so the estimate is not
//     trusted), or
//   * ‖est‖ exceeds 1/1000 of u_target ‖o‖ (u_target: the unit roundoff of the
//     finest dtype this oracle will judge; u·‖o‖ is a lower bound of every
//     check's bound, so this is at least as strict as 1/1000 of the bound), or
//   * a value is non-finite in either run.
// The unit of the decision is the slicer's (oracles/slices.hpp): every
// (sequence, head) of the batch — a batch row b, or a sequence n of a varlen
// batch (cu_seqlens), times a head h — is its own run, on all cores. Each slice
// runs in dd and float64 and is judged alone; an escalating slice is recomputed
// in MPFR at `bits`, the arithmetic the oracle used before. A slice's run
// computes exactly what the whole batch's run computes for it (the slicer's
// guarantee, tests/varlen/varlen_test.cpp), so the escalated values are MPFR's
// on the whole batch bit for bit, and the result is the same whatever the thread
// count (decisions per slice, outputs assembled in plan order). Where a per-head
// parameter's gradient sums over the batch (PDN's log_atk_scale, KLA-K's a_bar)
// the slicer keeps the batch rows together, the unit is (h); under varlen such
// gradients are summed over sequences in float64 and so are their estimates.
//
// MPFR mode: the whole oracle in MPFR (the behaviour before the fast tier, and
// what `--oracle-tier mpfr` asks for). Forms other than `sequential`, and layers
// without a dd runner in the direction asked for, always take it (the reason
// says which).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

enum class OracleMode { fast, mpfr };
// "auto" (fast) | "mpfr"; InputError otherwise.
OracleMode parse_oracle_mode(const std::string& s);
const char* oracle_mode_name(OracleMode m);

// The constants of the rule above.
inline constexpr double kOracleEscalationFraction = 1e-3;  // of u_target · ‖o_row‖
inline constexpr double kOracleGuard = 0x1p-20;            // float64's relative disagreement with dd
inline constexpr double kOracleEstimateSafety = 16.0;
inline constexpr double kDdOverFp64 = 0x1p-51;             // u_dd / u_64 = 2^-104 / 2^-53

struct OracleRequest {
  OracleMode mode = OracleMode::fast;
  unsigned bits = 256;       // MPFR precision (the whole oracle in mpfr mode, escalated slices in fast mode)
  double target_u = 0x1p-53; // unit roundoff of the finest dtype judged against this oracle (float64 by default)
  // Whether the result carries own_error per element (the judge and a certified
  // oracle read it). Without it the slices keep only their largest row ratio
  // (max_error_over_target), and the oracle skips assembling a copy of every output.
  bool own_error = true;
};

// An escalated slice: batch row b — or, under varlen (unit "(n,h)"), sequence
// b — of head h; −1: every batch row (unit "(h)") or every head.
struct OracleSlice {
  std::int64_t b = -1, h = 0;
};

// What produced an oracle (recorded in reports and oracle metadata).
struct OracleProvenance {
  std::string tier;          // "mpfr:256" | "dd" | "dd+mpfr:256" (dd, some slices escalated)
  // The unit of the decision: "(b,h)", "(b)", "(h)" (batch rows and heads;
  // a letter absent: that axis not split), "(n,h)", "(n)" (varlen sequences),
  // or "all" (one run).
  std::string unit;
  std::int64_t slices = 0;   // number of units
  std::vector<OracleSlice> escalated;  // in plan order: (b or n, h)
  std::string reason;        // why MPFR was used, where it was ("" when not)
  // The largest estimated own error of the dd rows relative to u_target‖o_row‖
  // (0 when no row was produced by dd). The judge reports it against the check's
  // actual bound (CheckResult::oracle).
  double max_error_over_target = 0.0;
};

struct OracleResult {
  TensorMap<double> values;     // rounded to nearest double
  // Per output element: the estimated own error of the value (dd elements; 0 for
  // elements MPFR produced, whose own error is taken as negligible, as always).
  // Empty in mpfr mode, or when the request asked for none.
  TensorMap<double> own_error;
  OracleProvenance provenance;
  unsigned working_bits = 0;    // the fewest significand bits any slice used (106 where dd served)
};

// The oracle of `layer`'s `form` in `direction` on `inputs` (cu_seqlens allowed),
// by `req`, sliced per (sequence, head) on slice_threads() cores.
OracleResult compute_oracle_values(const LayerEntry& layer, Form form, const TensorMap<double>& inputs,
                                   const Config& cfg, Direction direction, const OracleRequest& req,
                                   int chunk_size = 64);

}  // namespace ttr
