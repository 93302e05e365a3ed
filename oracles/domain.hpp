// The guaranteed domain of a layer (docs/domains.md): sufficient conditions on
// the inputs under which no exact intermediate of a form exceeds the largest
// finite value of the format the form holds it in (fp32/bf16/fp16 storage and
// compute as docs/arithmetic-policies.md defines them). Inside the domain a
// non-finite result cannot be a `range` finding (gate/range.hpp): it is the
// kernel's. Outside it, `check` says which condition the inputs violate, by how
// much; that is a note, not a failure.
//
// Each layer family derives its conditions once (oracles/domains/<family>.cpp),
// and each layer declares its domain beside its spec (oracles/layers/<layer>.cpp)
// by calling its family's function; the registry of domains is built from
// layers.def (TTR_LAYER lines): no code tests a layer's name.
// Kept out of oracles/spec.hpp on purpose, so that the runner translation units
// (which include the specs) do not depend on it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/runner.hpp"
#include "oracles/spec.hpp"

namespace ttr {

// What a condition is evaluated for: the form, direction, dtype and chunk size of a check.
struct DomainContext {
  Form form = Form::chunk;
  Direction direction = Direction::forward;
  Tier dtype = Tier::bf16;
  int chunk_size = 64;
};

// Where the intermediates a condition bounds live: `stored` values are held in
// the compute format and some are also narrowed to the storage format (the
// limit is the smaller of the two largest finite values); `compute` values stay
// in the compute format (cumulative gates of the chunk forms: fp32).
enum class Held { stored, compute };

// The inputs a condition reads: the layer's (forward, or backward with the
// cotangents), as validated, with its config (defaults filled in).
struct DomainInputs {
  const LayerSpec& spec;
  const TensorMap<double>& tensors;
  const Config& cfg;
  // The inputs before the rounding to the form's formats (set by domain_violations).
  // The range trace (gate/range.hpp) runs on these: where rounding can turn a small
  // input into 0 and a quantity grows as that input shrinks (GKA's 1/λ_t), a
  // derivation bounds both.
  const TensorMap<double>* unrounded = nullptr;
};

struct DomainCondition {
  std::string name;     // short, e.g. "state"
  std::string bound;    // the measured quantity, as a formula of the inputs
  std::string covers;   // which intermediates of which forms it bounds
  std::vector<Form> forms;             // the forms it applies to
  std::vector<Direction> directions;   // the directions it applies to
  Held held = Held::stored;
  // The quantity's value on these inputs (a bound on the intermediates' magnitude).
  std::function<double(const DomainInputs&, const DomainContext&)> measure;
  // An estimate of a computed value's rounding noise rather than a bound on an
  // exact intermediate (GKA's chunk-backward `reversal`): past its limit the form's
  // own arithmetic can make a result non-finite while every exact value stays in
  // range: the range rule (gate/range.hpp) cannot tell — its float64 trace either
  // stays in range or overflows from the same growth.
  bool rounding = false;
  bool applies(const DomainContext& c) const;
};

// Forms and directions a family has not derived a domain for, and why: no
// condition is claimed there (an empty `forms` or `directions` means all).
// `when`, if set, narrows the gap to the configurations it accepts (GKA's
// backward with solver=cg): the other configurations of those forms are derived.
struct DomainGap {
  std::vector<Form> forms;
  std::vector<Direction> directions;
  std::string why;
  std::function<bool(const Config&)> when = nullptr;
  bool matches(const DomainContext& c) const;
  bool matches(const DomainContext& c, const Config& cfg) const;
};

struct LayerDomain {
  std::string family;
  std::string derivation;  // where the derivation is written (docs/domains.md section)
  std::vector<DomainCondition> conditions;
  std::vector<DomainGap> gaps;
  // Whether the conditions are a derived domain for this form and direction in
  // some configuration (gaps with a `when` do not count), and in this one.
  bool covers(const DomainContext& c) const;
  bool covers(const DomainContext& c, const Config& cfg) const;
};

// A condition the inputs violate: its measured value is above the limit.
struct DomainViolation {
  std::string condition;
  std::string bound;
  std::string format;  // the format whose largest finite value is the limit
  double value = 0.0;
  double limit = 0.0;
  bool rounding = false;  // the condition's DomainCondition::rounding
};

// The largest finite value of the format holding `held` intermediates of the
// form under the dtype's policy, and that format's name.
double domain_limit(Held held, const DomainContext& c);
std::string domain_format(Held held, const DomainContext& c);

// A config number (λ, lambda0, scale) as the form receives it: rounded to the
// dtype by the sequential forms (every value in the dtype), to fp32 by the others.
double received_number(double x, const DomainContext& c);

// The forms and directions a condition applies to, for listings: "all forms" or
// "chunk", "forward" ...
std::string domain_forms_text(const DomainCondition& c);
// Its limit per dtype, for listings: "3.40e+38 (fp32), 3.39e+38 (bf16), 65504 (fp16)"
// (the sequential form computes in the dtype, the chunk and scan forms in fp32).
std::string domain_limits_text(const DomainCondition& c);

// The domain a layer's declaration gives it (its family's derivation, applied to
// its spec); nullptr for a layer with none (one registered at run time).
const LayerDomain* layer_domain(const std::string& layer);

// The conditions the inputs violate for this form, direction and dtype (empty:
// inside the guaranteed domain, or no domain derived there: covers(c, cfg) false).
std::vector<DomainViolation> domain_violations(const LayerDomain& d, const DomainInputs& in, const DomainContext& c);

// The families' derivations (oracles/domains/*.cpp). A layer declares its domain
// beside its spec (oracles/layers/<layer>.cpp: `LayerDomain domain_<layer>(spec)`)
// by calling its family's function with the layer's parameters.
namespace domains {
// linear_attn, simple_gla, gla (decay read from the spec's `g`: none, scalar, per key).
LayerDomain gated_linear(const LayerSpec& s);
// delta_rule, gated_delta_rule, kda, kaczmarz_delta_rule, precond_*: the write step is β_t,
// or β_t/(‖k_t‖² + eps) (key_energy_step, with the config key `eps`).
struct DeltaStep {
  bool key_energy_step = false;
  // precond_*: the write key is B_t ⊙ k (PDN eq. (9)), the preconditioner's
  // inputs g_atk, beta_atk, initial_A_state, log_atk_scale and config x, eps.
  bool preconditioned = false;
};
LayerDomain delta(const LayerSpec& s, DeltaStep step);
// pdn_exact, kalman_filter (weights η read from the spec's optional `eta`):
// the Sherman–Morrison recursion, sequential form.
LayerDomain sherman_morrison(const LayerSpec& s);
// kla_kalman: the sequential, unscaled and scaled scan forms.
LayerDomain kla_kalman(const LayerSpec& s);
// gka: the sequential and chunk forms, forward and backward, for the solvers as
// the forms run them (chebyshev, exact; cg forward only).
LayerDomain gka(const LayerSpec& s);
// A layer whose family has no derivation for it yet: one gap over every form and
// direction, saying why (`ttrcheck layers` prints it; `check` notes nothing).
LayerDomain not_derived(const LayerSpec& s, std::string why);
}  // namespace domains

}  // namespace ttr
