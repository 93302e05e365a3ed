// A layer's outside interface, described once: tensors (names, symbolic shapes,
// value ranges), config keys (types, defaults, ranges), outputs and the paper
// equations it implements. The CLI, file validation, vector generation and
// `ttrcheck layers` are all driven by these specs (oracles/layers/*.cpp).
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ttr {

// An interval of admissible values; every bound may be open or closed.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = true;
  bool hi_open = true;

  bool contains(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
  std::string str() const;  // e.g. "(0, 1]" ; "any finite value"
  static Range any() { return {}; }
  static Range closed(double lo, double hi) { return {lo, hi, false, false}; }
  static Range positive() { return {0.0, std::numeric_limits<double>::infinity(), true, true}; }
  static Range nonnegative() { return {0.0, std::numeric_limits<double>::infinity(), false, true}; }
  static Range nonpositive() { return {-std::numeric_limits<double>::infinity(), 0.0, true, false}; }
};

// How `ttrcheck vectors` draws a tensor (oracles/vectors.cpp interprets it).
enum class Role {
  query,       // q: N(0,1) rows, L2-normalised
  key,         // k: N(0,1) rows, L2-normalised (stress: norms over decades)
  value,       // v: N(0,1)
  log_decay,   // g: log of a decay in (0, 1]
  gate,        // β-like gates in [0, 1]
  state,       // h0-like initial states (absent unless a suite asks)
  positive,    // strictly positive weights
  precision,   // observation precisions λv > 0 (KLA-K)
  transition,  // state transitions ā in (0, 1] (KLA-K)
  noise,       // process noise p̄ >= 0 (KLA-K)
  psd_matrix,  // [..., K, K] symmetric positive semidefinite blocks M Mᵀ/K
};

struct TensorSpec {
  std::string name;
  std::vector<std::string> dims;  // symbols: B T H K V (N D for KLA) ...
  bool required = true;
  Range range;                    // values must be finite and inside
  Role role = Role::value;
  std::string doc;
  bool symmetric = false;         // the last two dims form exactly symmetric blocks
  // Outputs: false for diagnostics that describe the arithmetic rather than the
  // math (GKA's kappa from float64 eigenvalues, its residual, which is ≈ 2^-p);
  // `oracle --certified` writes no enclosure for them and precision tests skip them.
  bool certifiable = true;
  // Inputs: whether the backward direction returns a gradient d<name> (every
  // floating input of today's layers is; an integer or index tensor such as a
  // varlen `cu_seqlens` is not, and says why). Outputs: whether it takes a
  // cotangent d<name> (not for diagnostics such as GKA's λ_t).
  bool differentiable = true;
  std::string not_differentiable_why = {};
};

enum class KeyType { number, integer, boolean, choice };

struct ConfigKey {
  std::string name;
  KeyType type = KeyType::number;
  std::optional<std::string> default_value;  // absent: required, or computed (see doc)
  bool required = false;
  Range range;                               // numbers and integers
  std::vector<std::string> choices;          // KeyType::choice
  std::string doc;
  std::optional<std::string> example = std::nullopt;  // what `ttrcheck vectors` sets for a required key
};

// A form is an algorithm computing the layer (docs/architecture.md, "Names"):
// `sequential` is the definition, one token at a time (the papers' recurrent
// form, FLA's fused_recurrent, our CUDA sequential kernels); `chunk` the
// chunkwise algorithm of production kernels; `scan` an associative scan.
// `chunk_unscaled`, `scan_unscaled`: KLA-K's chunk and scan in the paper's
// representation (Λ, η as plain numbers), which overflows fp32 where the truth
// does not; `chunk`/`scan` there are the scaled forms
// (reference/kla_kalman/scaled_scan.hpp). Kept for comparison and for
// reproducing that finding; not swept unless named (sweeps_by_default).
// `sequential_dg_sum` (backward only, gla and simple_gla): the sequential adjoint with
// dg formed by flash-linear-attention's reverse running sum, the model of its
// fused-recurrent kernels (reference/family/gated_linear_dg_sum.hpp); a foreign
// kernel's algorithm, so not swept unless named either.
// `chunk_tf32_intra` (backward only, kda, precond_kda, gated_delta_rule, precond_gated_delta_rule): the chunk
// backward with the intra-chunk products (per-key decay: across sub-chunks; scalar decay:
// all of the chunk's) on TF32 operands and dg from the identity's two sides, the model of
// FLA's chunk_kda and chunk_precond_* backward (oracles/layers/delta_tf32_intra_form.hpp);
// not swept unless named.
enum class Form { sequential, chunk, scan, chunk_unscaled, scan_unscaled, sequential_dg_sum, chunk_tf32_intra };
// Every form, in the order listings use.
inline constexpr Form kAllForms[] = {Form::sequential,     Form::chunk,         Form::scan,
                                     Form::chunk_unscaled, Form::scan_unscaled, Form::sequential_dg_sum,
                                     Form::chunk_tf32_intra};
// Whether the gate, the fuzzer's default and the test sweeps over "every form"
// include it: all but the unscaled reference forms.
bool sweeps_by_default(Form);
// Whether a form runs every operation in the tier's scalar (the sequential forms) rather
// than under the tier's arithmetic policy (the chunk and scan forms, oracles/run_layer.hpp).
bool one_token_at_a_time(Form);
// What a form computes: the layer's outputs, or the gradients of its inputs from
// the cotangents of its outputs (backward_spec).
enum class Direction { forward, backward };
// Who runs it: the CPU reference forms (every tier of tiers.def) or a device's kernels.
enum class Backend { cpu, cuda };
const char* form_name(Form);
const char* direction_name(Direction);
const char* backend_name(Backend);

struct LayerSpec {
  std::string name;
  std::string summary;      // one line
  std::string recurrence;   // the math, one line (docs/layers.md prints it)
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<ConfigKey> config;
  std::vector<std::string> equations;  // paper references, e.g. "PDN eq. (4)"
  std::vector<std::string> notes;      // conventions and every difference from a paper or FLA
  // Delta-rule layers contract only while β_t‖k_t‖² stays in [0, 2] (the write
  // I − β k kᵀ has eigenvalue 1 − β‖k‖²); generators of large keys then shrink β.
  bool step_scales_with_key_energy = false;
  // Set by the registry from the declaration (layers.def): the layers sharing a
  // reference core (gated_linear, delta, gka, kalman, sherman_morrison), so that
  // catalogues and generators select "the delta family" without listing names.
  std::string family = {};

  const TensorSpec* input(const std::string& n) const;
  const TensorSpec* output(const std::string& n) const;
  const ConfigKey* key(const std::string& n) const;
};

// The backward direction's interface, derived from the forward spec: inputs are
// the forward inputs plus the cotangent d<out> of every output (`do` required,
// the others optional), outputs the gradient d<in> of every differentiable
// input, with the input's dims (FLA's names: dq, dk, dv, dg, dbeta, dh0, ...).
LayerSpec backward_spec(const LayerSpec& forward);
// The spec of a direction: the forward spec itself, or backward_spec of it.
LayerSpec direction_spec(const LayerSpec& forward, Direction d);

// Common pieces, so that every layer states them the same way.
namespace spec_common {
TensorSpec q();
TensorSpec k();
TensorSpec v();
TensorSpec h0();
TensorSpec o();
TensorSpec ht();
TensorSpec g_scalar(std::string doc = "log decay per head, exp(g) in (0, 1]");
TensorSpec g_per_key(std::string doc = "log decay per key channel, exp(g) in (0, 1]");
TensorSpec beta(Range r = Range::closed(0.0, 1.0), std::string doc = "write strength β_t");
ConfigKey scale();
ConfigKey l2norm_qk(bool default_on);
}  // namespace spec_common

}  // namespace ttr
