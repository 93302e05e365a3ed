#include "oracles/spec.hpp"

#include <cmath>
#include <fmt/format.h>

namespace ttr {

std::string Range::str() const {
  const bool lo_inf = std::isinf(lo), hi_inf = std::isinf(hi);
  if (lo_inf && hi_inf) return "any finite value";
  if (hi_inf) return fmt::format("{} {}", lo_open ? ">" : ">=", lo);
  if (lo_inf) return fmt::format("{} {}", hi_open ? "<" : "<=", hi);
  return fmt::format("{}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
}

const char* form_name(Form f) {
  switch (f) {
    case Form::sequential: return "sequential";
    case Form::chunk: return "chunk";
    case Form::scan: return "scan";
    case Form::chunk_unscaled: return "chunk_unscaled";
    case Form::scan_unscaled: return "scan_unscaled";
    case Form::sequential_dg_sum: return "sequential_dg_sum";
    case Form::chunk_tf32_intra: return "chunk_tf32_intra";
  }
  return "?";
}

bool sweeps_by_default(Form f) {
  return f != Form::chunk_unscaled && f != Form::scan_unscaled && f != Form::sequential_dg_sum &&
         f != Form::chunk_tf32_intra;
}

bool one_token_at_a_time(Form f) { return f == Form::sequential || f == Form::sequential_dg_sum; }

const char* direction_name(Direction d) { return d == Direction::forward ? "forward" : "backward"; }

const char* backend_name(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

LayerSpec backward_spec(const LayerSpec& fwd) {
  LayerSpec b = fwd;
  b.name = fwd.name;
  b.summary = "gradients of " + fwd.name + ": " + fwd.summary;
  b.outputs.clear();
  for (const TensorSpec& out : fwd.outputs) {
    if (!out.certifiable || !out.differentiable) continue;  // diagnostics take no cotangent
    TensorSpec d = out;
    d.name = "d" + out.name;
    d.required = out.name == "o";
    d.role = Role::value;
    d.range = Range::any();
    d.doc = "cotangent of " + out.name + (d.required ? "" : " (absent: zero)");
    d.symmetric = false;
    b.inputs.push_back(d);
  }
  for (const TensorSpec& in : fwd.inputs) {
    if (!in.differentiable) continue;
    TensorSpec d = in;
    d.name = "d" + in.name;
    d.required = in.required;
    d.range = Range::any();
    d.doc = "gradient of " + in.name + (in.required ? "" : " (when " + in.name + " is given)");
    d.symmetric = false;
    b.outputs.push_back(d);
  }
  b.step_scales_with_key_energy = fwd.step_scales_with_key_energy;
  return b;
}

LayerSpec direction_spec(const LayerSpec& fwd, Direction d) {
  return d == Direction::forward ? fwd : backward_spec(fwd);
}

const TensorSpec* LayerSpec::input(const std::string& n) const {
  for (const auto& t : inputs)
    if (t.name == n) return &t;
  return nullptr;
}

const TensorSpec* LayerSpec::output(const std::string& n) const {
  for (const auto& t : outputs)
    if (t.name == n) return &t;
  return nullptr;
}

const ConfigKey* LayerSpec::key(const std::string& n) const {
  for (const auto& k : config)
    if (k.name == n) return &k;
  return nullptr;
}

namespace spec_common {

TensorSpec q() { return {"q", {"B", "T", "H", "K"}, true, Range::any(), Role::query, "queries"}; }
TensorSpec k() { return {"k", {"B", "T", "H", "K"}, true, Range::any(), Role::key, "keys"}; }
TensorSpec v() { return {"v", {"B", "T", "H", "V"}, true, Range::any(), Role::value, "values"}; }
TensorSpec h0() {
  return {"h0", {"B", "H", "K", "V"}, false, Range::any(), Role::state, "initial state S_0 (default 0)"};
}
TensorSpec o() { return {"o", {"B", "T", "H", "V"}, true, Range::any(), Role::value, "outputs o_t = S_tᵀ(scale·q_t)"}; }
TensorSpec ht() { return {"ht", {"B", "H", "K", "V"}, true, Range::any(), Role::state, "final state S_T"}; }
TensorSpec g_scalar(std::string doc) {
  return {"g", {"B", "T", "H"}, true, Range::nonpositive(), Role::log_decay, std::move(doc)};
}
TensorSpec g_per_key(std::string doc) {
  return {"g", {"B", "T", "H", "K"}, true, Range::nonpositive(), Role::log_decay, std::move(doc)};
}
TensorSpec beta(Range r, std::string doc) {
  return {"beta", {"B", "T", "H"}, true, r, Role::gate, std::move(doc)};
}
ConfigKey scale() {
  return {"scale", KeyType::number, std::nullopt, false, Range::any(), {},
          "factor applied to q (default K^-1/2, computed in the working precision)"};
}
ConfigKey l2norm_qk(bool default_on) {
  return {"use_qk_l2norm_in_kernel", KeyType::boolean, default_on ? "true" : "false", false, Range::any(), {},
          "normalise q and k rows as x/sqrt(‖x‖²+1e-6) before the recurrence, as FLA's flag of this name"};
}

}  // namespace spec_common
}  // namespace ttr
