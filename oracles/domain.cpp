#include "oracles/domain.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <map>

#include "oracles/layer_specs.hpp"
#include "oracles/varlen.hpp"
#include "reference/core/float16.hpp"

namespace ttr {

namespace layers {
#define TTR_LAYER(layer, fam) LayerDomain domain_##layer(const LayerSpec&);
#include "oracles/layers/layers.def"
}  // namespace layers

namespace {

template <class X>
bool listed(const std::vector<X>& xs, X x) {
  return xs.empty() || std::find(xs.begin(), xs.end(), x) != xs.end();
}

// Largest finite values (docs/domains.md, "Formats").
constexpr double kMaxFp32 = 3.4028234663852886e38;  // (2 − 2^−23)·2^127
constexpr double kMaxBf16 = 3.3895313892515355e38;  // (2 − 2^−7)·2^127
constexpr double kMaxFp16 = 65504.0;                 // (2 − 2^−10)·2^15

// The format the form computes in under the dtype's policy: the chunk and scan
// forms compute in fp32 whatever the 16-bit storage (Mixed16Policy); the
// sequential forms (sequential, sequential_dg_sum) in the dtype itself (every
// operation rounded to it).
Tier compute_tier(const DomainContext& c) {
  if (c.dtype == Tier::fp64) return Tier::fp64;
  return one_token_at_a_time(c.form) ? c.dtype : Tier::fp32;
}

double max_of(Tier t) {
  switch (t) {
    case Tier::fp32: return kMaxFp32;
    case Tier::bf16: return kMaxBf16;
    case Tier::fp16: return kMaxFp16;
    default: return std::numeric_limits<double>::max();
  }
}

// The format holding `held` values: the compute format, or for stored values the
// narrower of compute and storage (the dtype).
Tier held_tier(Held held, const DomainContext& c) {
  const Tier compute = compute_tier(c);
  if (held == Held::compute) return compute;
  return max_of(c.dtype) < max_of(compute) ? c.dtype : compute;
}

// The form whose conditions hold for a form: chunk_tf32_intra is the chunk backward with
// some product operands rounded to TF32, the same intermediates within 2^-11.
Form conditions_form(Form f) { return f == Form::chunk_tf32_intra ? Form::chunk : f; }

}  // namespace

bool DomainCondition::applies(const DomainContext& c) const {
  return listed(forms, conditions_form(c.form)) && listed(directions, c.direction);
}

bool DomainGap::matches(const DomainContext& c) const {
  return listed(forms, conditions_form(c.form)) && listed(directions, c.direction);
}

bool DomainGap::matches(const DomainContext& c, const Config& cfg) const {
  return matches(c) && (!when || when(cfg));
}

bool LayerDomain::covers(const DomainContext& c) const {
  return std::none_of(gaps.begin(), gaps.end(), [&](const DomainGap& g) { return !g.when && g.matches(c); });
}

bool LayerDomain::covers(const DomainContext& c, const Config& cfg) const {
  return std::none_of(gaps.begin(), gaps.end(), [&](const DomainGap& g) { return g.matches(c, cfg); });
}

double domain_limit(Held held, const DomainContext& c) { return max_of(held_tier(held, c)); }

std::string domain_format(Held held, const DomainContext& c) { return tier_name(held_tier(held, c)); }

std::string domain_forms_text(const DomainCondition& c) {
  std::string f, d;
  for (Form x : c.forms) f += (f.empty() ? "" : ", ") + std::string(form_name(x));
  for (Direction x : c.directions) d += (d.empty() ? "" : ", ") + std::string(direction_name(x));
  return (f.empty() ? "every form" : f + " form") + ", " + (d.empty() ? "both directions" : d);
}

std::string domain_limits_text(const DomainCondition& c) {
  std::string out;
  for (Tier t : {Tier::fp32, Tier::bf16, Tier::fp16}) {
    // Where the chunk/scan and sequential limits differ (compute-held values in
    // a 16-bit dtype), both are given.
    const double chunk = domain_limit(c.held, {Form::chunk, Direction::forward, t, 64});
    const double seq = domain_limit(c.held, {Form::sequential, Direction::forward, t, 64});
    const bool seq_applies = c.forms.empty() || listed(c.forms, Form::sequential);
    const bool other_applies = c.forms.empty() || !(c.forms.size() == 1 && c.forms[0] == Form::sequential);
    std::string v;
    if (!seq_applies || seq == chunk) v = fmt::format("{:.6g}", other_applies ? chunk : seq);
    else if (!other_applies) v = fmt::format("{:.6g}", seq);
    else v = fmt::format("{:.6g} (chunk, scan), {:.6g} (sequential)", chunk, seq);
    out += (out.empty() ? "" : "; ") + std::string(tier_name(t)) + " " + v;
  }
  return out;
}

const LayerDomain* layer_domain(const std::string& layer) {
  // Each declared layer's domain, as its spec file declares it (domain_<layer>,
  // its family's derivation applied to its spec).
  static const std::map<std::string, LayerDomain> table = [] {
    std::map<std::string, LayerDomain> out;
    const std::vector<LayerSpec> specs = layer_specs();
    std::size_t i = 0;
#define TTR_LAYER(layer, fam)                          \
  out.emplace(#layer, layers::domain_##layer(specs.at(i)));      \
  out.at(#layer).family = #fam;                        \
  ++i;
#include "oracles/layers/layers.def"
    return out;
  }();
  const auto it = table.find(layer);
  return it == table.end() ? nullptr : &it->second;
}

namespace {

double round_to(Tier t, double x) {
  switch (t) {
    case Tier::fp32: return static_cast<double>(static_cast<float>(x));  // IEEE: ±inf beyond the range
    case Tier::bf16: return BF16Format::round(x);
    case Tier::fp16: return FP16Format::round(x);
    default: return x;
  }
}

// The inputs as the form receives them (docs/arithmetic-policies.md): the chunk
// and scan forms narrow q, k, v, β (and the cotangents do, dht; KLA-K's do_var) to
// the dtype and take the rest in fp32; the sequential forms take every input in the dtype. The
// exact intermediates are those of these values, so the bounds are evaluated on
// them (an input beyond the format becomes ±inf and violates `inputs`).
TensorMap<double> as_received(const TensorMap<double>& in, const DomainContext& c) {
  TensorMap<double> out = in;
  for (auto& [name, t] : out) {
    if (name == kCuSeqlens) continue;
    const bool narrowed = one_token_at_a_time(c.form) || name == "q" || name == "k" || name == "v" ||
                          name == "beta" || name == "do" || name == "dht" || name == "do_var";
    const Tier to = c.dtype == Tier::fp64 ? Tier::fp64 : narrowed ? c.dtype : Tier::fp32;
    for (double& x : t.data) x = round_to(to, x);
  }
  return out;
}

}  // namespace

double received_number(double x, const DomainContext& c) {
  return round_to(c.dtype == Tier::fp64 ? Tier::fp64 : one_token_at_a_time(c.form) ? c.dtype : Tier::fp32, x);
}

std::vector<DomainViolation> domain_violations(const LayerDomain& d, const DomainInputs& raw,
                                               const DomainContext& as_asked) {
  // The conditions and their measures are derived per form; a form that computes
  // another's intermediates is measured as that one.
  DomainContext c = as_asked;
  c.form = conditions_form(c.form);
  std::vector<DomainViolation> out;
  if (!d.covers(c, raw.cfg)) return out;
  const TensorMap<double> received = as_received(raw.tensors, c);
  const DomainInputs in{raw.spec, received, raw.cfg, &raw.tensors};
  for (const DomainCondition& cond : d.conditions) {
    if (!cond.applies(c)) continue;
    const double value = cond.measure(in, c), limit = domain_limit(cond.held, c);
    // A NaN measure cannot come from validated (finite) inputs; it would count as outside.
    if (!(value <= limit)) out.push_back({cond.name, cond.bound, domain_format(cond.held, c), value, limit, cond.rounding});
  }
  return out;
}

namespace domains {

LayerDomain not_derived(const LayerSpec&, std::string why) {
  LayerDomain d;
  d.derivation = "docs/domains.md#not-derived";
  d.gaps.push_back({{}, {}, std::move(why)});
  return d;
}

}  // namespace domains

}  // namespace ttr
