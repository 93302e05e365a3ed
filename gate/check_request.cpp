#include "gate/check_request.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "gate/judge.hpp"
#include "gate/report.hpp"  // floor_line
#include "oracles/error.hpp"
#include "oracles/validate.hpp"  // widen
#include "oracles/varlen.hpp"
#include "oracles/loaded_inputs.hpp"
#include "oracles/oracle.hpp"

namespace ttr {
namespace {

namespace fs = std::filesystem;

// The precision of the oracle `check` computes (that of `ttrcheck oracle`'s default).
constexpr unsigned kOracleBits = 256;

Tier parse_kernel_dtype(const std::string& s) {
  for (Tier t : {Tier::bf16, Tier::fp16, Tier::fp32, Tier::fp64})
    if (s == tier_name(t)) return t;
  throw InputError(fmt::format("--dtype: unknown kernel dtype '{}' (bf16|fp16|fp32|fp64)", s));
}

// A candidate stored as BF16 was computed by a bf16 kernel, and so on.
Tier tier_of_storage(io::DType d) {
  switch (d) {
    case io::DType::BF16: return Tier::bf16;
    case io::DType::F16: return Tier::fp16;
    case io::DType::F32: return Tier::fp32;
    default: return Tier::fp64;
  }
}

std::string dims_str(const TensorSpec& t) { return "[" + fmt::format("{}", fmt::join(t.dims, ",")) + "]"; }

// The outputs' shapes for these inputs: what the candidate and a stored oracle must have.
std::map<std::string, Shape> output_shapes(const LayerSpec& spec, const Dims& dims) {
  std::map<std::string, Shape> s;
  for (const auto& t : spec.outputs) {
    Dims d = dims;  // a varlen batch (validate_inputs binds N+1): per-sequence outputs have N rows
    if (const auto n = dims.find("N+1"); n != dims.end() && axis_kind(t) == AxisKind::per_sequence) d["B"] = n->second - 1;
    s[t.name] = shape_of(t, d);
  }
  return s;
}

// The outputs a check of these inputs compares: forward, every output; backward,
// the gradient of every input given (dh0 only with h0, ...).
std::vector<std::string> expected_outputs(const LayerSpec& fwd, const LayerSpec& spec, const LoadedInputs& in,
                                          Direction d) {
  std::vector<std::string> names;
  for (const TensorSpec& t : spec.outputs)
    if (d == Direction::forward || in.inputs.tensors.count(t.name.substr(1)) || !fwd.input(t.name.substr(1)))
      names.push_back(t.name);
  return names;
}

// The last part of a check id: "<suite>.<case>" for vectors ttrcheck wrote (stable
// across machines and temp directories, as baselines need), else the inputs' file name.
std::string case_name(const LoadedInputs& in, const std::string& path) {
  const auto& m = in.file.metadata;
  const auto suite = m.find("suite"), c = m.find("case");
  if (suite != m.end() && c != m.end()) return suite->second + "." + c->second;
  const std::string name = fs::path(path).filename().string();
  for (const std::string_view ext : {".inputs.safetensors", ".safetensors"})
    if (name.size() > ext.size() && name.ends_with(ext)) return name.substr(0, name.size() - ext.size());
  return name;
}

// Reads the candidate: every spec output it holds, as doubles. `o` is required;
// other outputs (a kernel may not return its final state) are optional; tensors
// the layer does not know, and those `skip` names (--not-judged), are ignored.
// Sets `storage` to the first required tensor's dtype.
TensorMap<double> load_candidate(const io::TensorFile& f, const std::string& path, const LayerSpec& spec,
                                 const std::map<std::string, Shape>& shapes, const std::vector<std::string>& required,
                                 const std::vector<std::string>& skip, io::DType& storage) {
  if (const auto l = f.metadata.find("layer"); l != f.metadata.end() && l->second != spec.name)
    throw InputError(fmt::format("{}: candidate was written for layer '{}', not '{}' (metadata 'layer')", path,
                                 l->second, spec.name));
  for (const std::string& name : required)
    if (!f.tensors.count(name))
      throw InputError(fmt::format("{}: missing tensor '{}' {}: a candidate must hold {}", path, name,
                                   dims_str(*spec.output(name)),
                                   name == "o" ? "the layer's output 'o'" : "every gradient of the given inputs"));
  TensorMap<double> out;
  for (const auto& ts : spec.outputs) {
    const auto it = f.tensors.find(ts.name);
    if (it == f.tensors.end() || std::ranges::find(skip, ts.name) != skip.end()) continue;
    const std::string what = fmt::format("{}: tensor '{}'", path, ts.name);
    if (!io::is_floating(it->second.dtype))
      throw InputError(fmt::format("{} has dtype {}; expected a floating dtype (F64, F32, BF16, F16)", what,
                                   io::dtype_name(it->second.dtype)));
    const Shape& want = shapes.at(ts.name);
    if (it->second.shape != want)
      throw InputError(fmt::format("{} has shape {}; expected {} = {} for these inputs", what,
                                   shape_str(it->second.shape), dims_str(ts), shape_str(want)));
    Tensor<double>& t = out[ts.name];  // widened on every core, not zero-filled first
    t.shape = it->second.shape;
    t.data = widen(it->second, what);
  }
  storage = f.tensors.at(required.front()).dtype;
  return out;
}

// Reads a stored oracle and checks it belongs to this check: written for the same
// layer and config, F64 (an oracle in a narrower dtype would itself be wrong by
// more than an fp32 kernel), computed from these inputs (its `inputs_digest`;
// oracles written before the digest existed have none and are taken on trust),
// every output present with the inputs' shapes.
TensorMap<double> load_oracle(const io::TensorFile& f, const std::string& path, const LayerSpec& spec,
                              const Config& cfg, const std::map<std::string, Shape>& shapes, const LoadedInputs& in,
                              const std::string& in_path, const std::vector<std::string>& expected,
                              Direction direction) {
  const auto& m = f.metadata;
  const auto layer = m.find("layer");
  if (layer == m.end())
    throw InputError(fmt::format("{}: no metadata 'layer': not an oracle written by ttrcheck", path));
  if (layer->second != spec.name)
    throw InputError(fmt::format("{}: oracle was written for layer '{}', not '{}'", path, layer->second, spec.name));
  if (const auto k = m.find("kind"); k != m.end() && k->second != "oracle")
    throw InputError(fmt::format("{}: metadata 'kind' is '{}': not an oracle file", path, k->second));
  const auto d = m.find("direction");
  const std::string stored = d == m.end() ? "forward" : d->second;
  if (stored != direction_name(direction))
    throw InputError(fmt::format("{}: oracle of the {} direction, but this check is {} (--backward)", path, stored,
                                 direction_name(direction)));
  if (const auto c = m.find("config"); c != m.end()) {
    const nlohmann::json stored = nlohmann::json::parse(c->second, nullptr, false);
    if (stored != nlohmann::json::parse(cfg.json()))
      throw InputError(fmt::format("{}: oracle config {} differs from this check's {}", path, c->second, cfg.json()));
  }
  if (const auto d = m.find("inputs_digest"); d != m.end()) {
    const std::string here = inputs_digest(in.inputs.tensors);
    if (d->second != here)
      throw InputError(fmt::format("{}: oracle was computed from other inputs (inputs_digest {}; {} has {})", path,
                                   d->second, in_path, here));
  }
  TensorMap<double> out;
  for (const auto& ts : spec.outputs) {
    if (std::find(expected.begin(), expected.end(), ts.name) == expected.end()) continue;
    const auto it = f.tensors.find(ts.name);
    const std::string what = fmt::format("{}: oracle tensor '{}'", path, ts.name);
    if (it == f.tensors.end()) throw InputError(fmt::format("{} {} is missing", what, dims_str(ts)));
    if (it->second.dtype != io::DType::F64)
      throw InputError(fmt::format("{} has dtype {}; an oracle is F64", what, io::dtype_name(it->second.dtype)));
    const Shape& want = shapes.at(ts.name);
    if (it->second.shape != want)
      throw InputError(fmt::format("{} has shape {}; expected {} = {} for these inputs", what,
                                   shape_str(it->second.shape), dims_str(ts), shape_str(want)));
    Tensor<double>& t = out[ts.name];  // widened on every core, not zero-filled first
    t.shape = it->second.shape;
    t.data = widen(it->second, what);
  }
  return out;
}

}  // namespace

namespace {

// A validated request: inputs, candidate, the model's spec and the judge (which
// keeps a reference to the inputs, hence one heap object that never moves).
struct Prepared {
  LoadedInputs in;
  TensorMap<double> candidate;
  ModelSpec ms;
  std::string case_label;  // the id's last part
  std::optional<Judge> judge;
};

std::unique_ptr<Prepared> prepare(const CheckRequest& req) {
  const Direction dir = req.backward ? Direction::backward : Direction::forward;
  std::unique_ptr<Prepared> p(
      new Prepared{load_inputs(req.layer, req.inputs, req.inputs_source, req.sets, dir), {}, {}, {}, std::nullopt});
  const LoadedInputs& in = p->in;
  const LayerSpec spec = direction_spec(in.layer->spec, dir);
  ModelSpec& ms = p->ms;
  ms.direction = dir;
  ms.form = req.form.empty() ? (in.layer->has_form(Form::chunk, dir) ? Form::chunk : Form::sequential)
                            : parse_form(req.form);
  if (!in.layer->has_form(ms.form, dir))
    throw InputError(fmt::format("--form: layer '{}' has no {} {} form", spec.name, form_name(ms.form),
                                 direction_name(dir)));
  // --policy names the arithmetic and with it the dtype (gate/policies.hpp); with
  // --dtype too, the two must agree.
  std::optional<PolicyChoice> policy;
  if (!req.policy.empty()) policy = parse_policy(req.policy);
  if (policy && !req.dtype.empty() && parse_kernel_dtype(req.dtype) != policy->dtype)
    throw InputError(fmt::format("--policy {} is a {} kernel's arithmetic; --dtype says {}", req.policy,
                                 tier_name(policy->dtype), req.dtype));
  const auto shapes = output_shapes(spec, in.inputs.dims);
  const std::vector<std::string> expected = expected_outputs(in.layer->spec, spec, in, dir);
  std::vector<std::string> required = dir == Direction::forward ? std::vector<std::string>{"o"} : expected;
  for (const std::string& name : req.not_judged) {
    if (std::find(expected.begin(), expected.end(), name) == expected.end())
      throw InputError(fmt::format("--not-judged: '{}' is not one of the {} {} of layer '{}' for these inputs: {}", name,
                                   direction_name(dir), dir == Direction::forward ? "outputs" : "gradients",
                                   spec.name, fmt::join(expected, ", ")));
    if (dir == Direction::forward && name == "o")
      throw InputError("--not-judged: 'o' is always judged (the candidate's dtype is read from it)");
    std::erase(required, name);
  }
  if (required.empty()) throw InputError("--not-judged: every gradient left unjudged; nothing to judge");
  io::DType storage = io::DType::F32;
  p->candidate = load_candidate(req.candidate, req.candidate_source, spec, shapes, required, req.not_judged, storage);
  ms.dtype = policy ? policy->dtype : req.dtype.empty() ? tier_of_storage(storage) : parse_kernel_dtype(req.dtype);
  ms.policy = policy ? policy->policy : Policy::native;
  ms.chunk_size = req.chunk_size;
  ms.samples = req.samples;
  ms.seed = req.seed;
  // The oracle: a stored one, or the sequential definition decided per slice
  // (oracles/oracle_tier.hpp): double-double where its estimated own error is
  // negligible, MPFR-256 (the precision of `ttrcheck oracle`'s default) where
  // not; --oracle-tier mpfr computes all of it in MPFR-256, which gives the
  // numbers of a stored default oracle bit for bit.
  if (!req.oracle)
    p->judge.emplace(*in.layer, in.inputs.tensors, in.config, Arith{Tier::mpfr, kOracleBits}, dir);
  else
    p->judge.emplace(*in.layer, in.inputs.tensors, in.config,
                     load_oracle(*req.oracle, req.oracle_source, spec, in.config, shapes, in, req.inputs_source,
                                 expected, dir),
                     dir);
  p->judge->set_strict_range(req.strict_range);
  p->judge->set_oracle_mode(req.oracle_mode);
  p->case_label = req.case_name.empty() ? case_name(in, req.inputs_source) : req.case_name;
  return p;
}

// The conditions of the layer's guaranteed domain (docs/domains.md) the inputs
// violate for the check's form, direction and dtype. A foreign fp32 kernel that
// stores in bf16 (--policy bf16-storage) is held to bf16's storage range.
std::vector<DomainViolation> domain_note(const Prepared& p, const ModelSpec& ms) {
  const LayerDomain* d = layer_domain(p.in.layer->spec.name);
  if (!d) return {};
  const LayerSpec spec = direction_spec(p.in.layer->spec, ms.direction);
  const Tier dtype = ms.policy == Policy::bf16_storage ? Tier::bf16 : ms.dtype;
  return domain_violations(*d, {spec, p.in.inputs.tensors, p.in.config}, {ms.form, ms.direction, dtype, ms.chunk_size});
}

}  // namespace

NamedCheck run_check(const CheckRequest& req, std::vector<DomainViolation>* domain) {
  const auto p = prepare(req);
  const CheckResult result = (*p->judge)(p->candidate, p->ms);
  if (domain) *domain = domain_note(*p, p->ms);
  return {check_id(result, p->case_label) + (req.backward ? "/backward" : ""), result};
}

namespace {

// The note of a failing policy whose worst tensor fails at a row bounded by the
// subnormal floor alone (its exact value and its model both 0); "" otherwise.
std::string floor_note(const CheckResult& r) {
  const TensorVerdict* w = nullptr;
  for (const TensorVerdict& t : r.tensors)
    if (t.present && !t.pass && t.nonfinite_failures == 0 && (!w || t.max_ratio > w->max_ratio)) w = &t;
  return w ? floor_line(*w) : std::string();
}

}  // namespace

PolicyExplanation explain_policy(const CheckRequest& req) {
  const auto p = prepare(req);
  PolicyExplanation e;
  for (const std::string& name : explain_order()) {
    const PolicyChoice c = parse_policy(name);
    ModelSpec ms = p->ms;
    ms.dtype = c.dtype;
    ms.policy = c.policy;
    const CheckResult r = (*p->judge)(p->candidate, ms);
    e.checks.push_back({check_id(r, p->case_label) + (req.backward ? "/backward" : ""), r});
    e.notes.push_back(r.pass ? std::string() : floor_note(r));
    if (r.pass && e.best.empty()) e.best = name;
  }
  return e;
}

}  // namespace ttr
