// `ttrcheck layers [--layer L] [--json]`: the catalogue, printed from the specs.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "oracles/registry.hpp"

namespace ttr::cli {
namespace {

const char* key_type(KeyType t) {
  switch (t) {
    case KeyType::number: return "number";
    case KeyType::integer: return "integer";
    case KeyType::boolean: return "boolean";
    case KeyType::choice: return "choice";
  }
  return "?";
}

nlohmann::json tensor_json(const TensorSpec& t) {
  return {{"name", t.name}, {"dims", t.dims}, {"required", t.required}, {"range", t.range.str()}, {"doc", t.doc}};
}

// What a layer is implemented by: forms per direction, kernels per backend
// (the declaration in oracles/layers/layers.def).
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
  if (e.has_form(Form::sequential, Direction::backward)) {
    const LayerSpec b = backward_spec(s);
    for (const auto& t : b.inputs)
      if (!s.input(t.name)) j["backward"]["cotangents"].push_back(tensor_json(t));
    for (const auto& t : b.outputs) j["backward"]["gradients"].push_back(tensor_json(t));
  }
  return j;
}

void print_layer(const LayerEntry& e) {
  const LayerSpec& s = e.spec;
  fmt::print("{}  —  {}\n  {}\n", s.name, s.summary, s.recurrence);
  fmt::print("  inputs:\n");
  for (const auto& t : s.inputs)
    fmt::print("    {:<16} [{}]{}  {}; values {}{}\n", t.name, fmt::join(t.dims, ","), t.required ? "" : " (optional)",
               t.doc, t.range.str(), t.differentiable ? "" : "; not differentiable: " + t.not_differentiable_why);
  fmt::print("  outputs:\n");
  for (const auto& t : s.outputs) fmt::print("    {:<16} [{}]  {}\n", t.name, fmt::join(t.dims, ","), t.doc);
  if (!s.config.empty()) fmt::print("  config (--set key=value):\n");
  for (const auto& k : s.config) {
    std::string dflt = k.default_value ? "default " + *k.default_value : (k.required ? "required" : "computed");
    std::string dom = k.type == KeyType::choice ? fmt::format("{}", fmt::join(k.choices, "|"))
                      : k.type == KeyType::boolean ? "true|false" : k.range.str();
    fmt::print("    {:<24} {} ({}; {})  {}\n", k.name, key_type(k.type), dflt, dom, k.doc);
  }
  std::string forms;
  for (Form f : e.form_list()) forms += (forms.empty() ? "" : ", ") + std::string(form_name(f));
  fmt::print("  forms: {}\n  implemented by: {}\n  equations: {}\n", forms, fmt::join(implementations(e), "; "),
             fmt::join(s.equations, "; "));
  if (e.has_form(Form::sequential, Direction::backward)) {
    const LayerSpec b = backward_spec(s);
    std::vector<std::string> cot, grads;
    for (const auto& t : b.inputs)
      if (!s.input(t.name)) cot.push_back(t.name + (t.required ? "" : "?"));
    for (const auto& t : b.outputs) grads.push_back(t.name);
    fmt::print("  backward (--backward): cotangents {} (? optional) -> gradients {}; config keys are configuration "
               "and get no gradient\n",
               fmt::join(cot, ", "), fmt::join(grads, ", "));
  }
  for (const auto& n : s.notes) fmt::print("  note: {}\n", n);
  fmt::print("\n");
}

}  // namespace

Command add_layers(CLI::App& app) {
  auto* cmd = app.add_subcommand("layers", "print the layer catalogue (tensors, config keys, math) from the specs");
  auto layer = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("--layer", *layer, "only this layer");
  cmd->add_flag("--json", *json, "machine-readable JSON");
  return [layer, json]() {
    std::vector<const LayerEntry*> sel;
    if (layer->empty())
      for (const auto& e : registry()) sel.push_back(&e);
    else
      sel.push_back(&find_layer(*layer));
    if (*json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto* e : sel) j.push_back(layer_json(*e));
      fmt::print("{}\n", j.dump(2));
    } else {
      for (const auto* e : sel) print_layer(*e);
    }
    return 0;
  };
}

}  // namespace ttr::cli
