#include "oracles/catalogue.hpp"

#include <fmt/format.h>

#include "oracles/domain.hpp"

namespace ttr {
namespace {

nlohmann::json tensor_json(const TensorSpec& t) {
  return {{"name", t.name}, {"dims", t.dims}, {"required", t.required}, {"range", t.range.str()}, {"doc", t.doc}};
}

// The guaranteed domain (docs/domains.md): every condition with its limits per
// form and dtype, and the forms/directions not derived. null for a layer with no
// declared domain (registered at run time).
nlohmann::json domain_json(const LayerEntry& e) {
  const LayerDomain* d = layer_domain(e.spec.name);
  if (!d) return nullptr;
  nlohmann::json conds = nlohmann::json::array(), gaps = nlohmann::json::array();
  for (const DomainCondition& c : d->conditions) {
    nlohmann::json limits = nlohmann::json::object();
    for (Direction dir : {Direction::forward, Direction::backward})
      for (Form f : e.form_list(dir)) {
        const DomainContext probe{f, dir, Tier::fp32, 64};
        if (!c.applies(probe) || !d->covers(probe)) continue;
        nlohmann::json per;
        for (Tier t : {Tier::fp32, Tier::bf16, Tier::fp16}) per[tier_name(t)] = domain_limit(c.held, {f, dir, t, 64});
        limits[fmt::format("{} {}", form_name(f), direction_name(dir))] = per;
      }
    nlohmann::json cond = {{"name", c.name}, {"bound", c.bound}, {"covers", c.covers}, {"limits", limits}};
    if (c.rounding) cond["rounding"] = true;  // an estimate of rounding noise (DomainCondition::rounding)
    conds.push_back(std::move(cond));
  }
  for (const DomainGap& g : d->gaps) {
    nlohmann::json forms = nlohmann::json::array(), dirs = nlohmann::json::array();
    for (Form f : g.forms) forms.push_back(form_name(f));
    for (Direction x : g.directions) dirs.push_back(direction_name(x));
    gaps.push_back({{"forms", forms}, {"directions", dirs}, {"why", g.why}});
  }
  return {{"derivation", d->derivation}, {"conditions", conds}, {"not_derived", gaps}};
}

}  // namespace

const char* key_type(KeyType t) {
  switch (t) {
    case KeyType::number: return "number";
    case KeyType::integer: return "integer";
    case KeyType::boolean: return "boolean";
    case KeyType::choice: return "choice";
  }
  return "?";
}

std::vector<std::string> implementations(const LayerEntry& e) {
  std::vector<std::string> out;
  for (Direction d : {Direction::forward, Direction::backward})
    for (Form f : e.form_list(d)) out.push_back(fmt::format("cpu {} {}", form_name(f), direction_name(d)));
  for (const KernelImpl& k : e.kernels) out.push_back(fmt::format("{} {}", k.name(), direction_name(k.direction)));
  return out;
}

nlohmann::json layer_json(const LayerEntry& e) {
  const LayerSpec& s = e.spec;
  nlohmann::json j{{"name", s.name}, {"summary", s.summary}, {"recurrence", s.recurrence},
                   {"equations", s.equations}, {"notes", s.notes}};
  for (const auto& t : s.inputs) {
    nlohmann::json ti = tensor_json(t);
    ti["differentiable"] = t.differentiable;
    if (!t.differentiable) ti["not_differentiable_why"] = t.not_differentiable_why;
    j["inputs"].push_back(ti);
  }
  for (const auto& t : s.outputs) j["outputs"].push_back(tensor_json(t));
  j["config"] = nlohmann::json::array();
  for (const auto& k : s.config) {
    nlohmann::json c{{"name", k.name}, {"type", key_type(k.type)}, {"required", k.required}, {"doc", k.doc}};
    if (k.default_value) c["default"] = *k.default_value;
    if (k.type == KeyType::number || k.type == KeyType::integer) c["range"] = k.range.str();
    if (!k.choices.empty()) c["choices"] = k.choices;
    j["config"].push_back(c);
  }
  j["forms"] = nlohmann::json::array();
  for (Form f : e.form_list()) j["forms"].push_back(form_name(f));
  j["family"] = s.family;
  j["implementations"] = implementations(e);
  j["domain"] = domain_json(e);
  if (e.has_form(Form::sequential, Direction::backward)) {
    const LayerSpec b = backward_spec(s);
    for (const auto& t : b.inputs)
      if (!s.input(t.name)) j["backward"]["cotangents"].push_back(tensor_json(t));
    for (const auto& t : b.outputs) j["backward"]["gradients"].push_back(tensor_json(t));
  }
  return j;
}

}  // namespace ttr
