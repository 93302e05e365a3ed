// `ttrcheck layers [--layer L] [--json | --markdown]`: the catalogue, printed from the specs.
// --markdown renders docs/layers.md; a test keeps the committed file equal to it.
#include <fmt/format.h>
#include <iterator>
#include <string>
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

// A table cell: '|' would end the cell.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string dims_md(const TensorSpec& t) { return fmt::format("`[{}]`", fmt::join(t.dims, ",")); }

// Through has_form only, so the rendering does not depend on how the registry stores forms.
std::string forms_of(const LayerEntry& e) {
  std::string forms;
  for (Form f : kAllForms)
    if (e.has_form(f)) forms += (forms.empty() ? "`" : ", `") + std::string(form_name(f)) + "`";
  return forms;
}

// The conventions every layer shares, stated once above the per-layer sections.
constexpr const char* kMarkdownIntro = R"(# Layer catalogue

<!-- Generated by `ttrcheck layers --markdown` from the layer specs (oracles/layers/<layer>.cpp).
     Edit the specs, not this file, then: build/default/ttrcheck layers --markdown > docs/layers.md -->

The outside interface of every layer: the names its tensors carry in safetensors
files, their symbolic shapes and admissible values, its config keys
(`--set key=value`), its outputs and the recurrence it computes. Scripts outside
the repository rely on these names: tensors and keys may be added, none renamed.
The design rules behind them are in [design.md](design.md); papers are cited by the
short names of [papers.md](papers.md).

Conventions, those of flash-linear-attention (FLA) unless a layer's notes say
otherwise. Dimensions: `B` batch, `T` tokens, `H` heads, `K` query/key width, `V`
value width (`kla_kalman`: `N` state width, `D` value width). `q` and `k` are
`[B,T,H,K]`, `v` and `o` `[B,T,H,V]`. The state `S_t` of a head is `K×V`; where a
paper writes its `V×K` transpose the notes say so, the math being the same. The
optional `h0` `[B,H,K,V]` is the initial state (zero when absent) and `ht` the final
one. The readout is `o_t = S_tᵀ (scale·q_t)` with `scale` defaulting to `K^-1/2`.
A gate `g` is the natural logarithm of a decay, so `exp(g)` lies in (0, 1]; per-head
gates are `[B,T,H]`, per-key-channel gates `[B,T,H,K]`. Every recurrence runs
independently per batch row and head. Input values must be finite and inside the
listed range. Config is read from the input file's metadata when the file was
written for the same layer, then overridden by `--set`.

Forms: `sequential` is the definition; `chunk` is the chunkwise algorithm kernels
run (any chunk size `C` ≥ 1, which need not divide `T`); `scan` is an associative
prefix scan. In exact arithmetic every form equals the definition, and every form
runs in every arithmetic tier.
)";

void markdown_layer(std::string& out, const LayerEntry& e) {
  const LayerSpec& s = e.spec;
  auto o = std::back_inserter(out);
  std::string summary = s.summary;
  if (!summary.empty() && summary[0] >= 'a' && summary[0] <= 'z')  // a sentence here; ASCII only, no locale
    summary[0] = static_cast<char>(summary[0] - 'a' + 'A');
  fmt::format_to(o, "## `{}`\n\n{}.\n\n", s.name, summary);
  fmt::format_to(o, "Recurrence (per batch row and head):\n\n    {}\n\n", s.recurrence);
  fmt::format_to(o, "Inputs:\n\n| name | dims | required | values | doc |\n|---|---|---|---|---|\n");
  for (const auto& t : s.inputs)
    fmt::format_to(o, "| `{}` | {} | {} | {} | {} |\n", t.name, dims_md(t), t.required ? "yes" : "optional",
                   cell(t.range.str()), cell(t.doc));
  if (s.config.empty()) {
    fmt::format_to(o, "\nConfig keys: none.\n");
  } else {
    fmt::format_to(o, "\nConfig keys (`--set key=value`):\n\n| key | type | default | range or choices | doc |\n"
                      "|---|---|---|---|---|\n");
    for (const auto& k : s.config) {
      // An optional key without a default: computed (scale) or meaningful by its absence (gka lambda); its doc says.
      const std::string dflt = k.default_value ? "`" + *k.default_value + "`" : k.required ? "required" : "see doc";
      std::string dom;
      if (k.type == KeyType::choice) {
        for (const auto& c : k.choices) dom += (dom.empty() ? "`" : ", `") + c + "`";
      } else if (k.type == KeyType::boolean) {
        dom = "`true`, `false`";
      } else {
        dom = cell(k.range.str());
      }
      fmt::format_to(o, "| `{}` | {} | {} | {} | {} |\n", k.name, key_type(k.type), dflt, dom, cell(k.doc));
    }
  }
  fmt::format_to(o, "\nOutputs:\n\n| name | dims | doc |\n|---|---|---|\n");
  for (const auto& t : s.outputs) fmt::format_to(o, "| `{}` | {} | {} |\n", t.name, dims_md(t), cell(t.doc));
  fmt::format_to(o, "\nPaper equations: {}.\n", fmt::join(s.equations, "; "));
  if (!s.notes.empty()) {
    fmt::format_to(o, "\nNotes:\n\n");
    for (const auto& n : s.notes) fmt::format_to(o, "- {}\n", n);
  }
  fmt::format_to(o, "\nForms: {}.\n", forms_of(e));
  if (e.has_form(Form::sequential, Direction::backward)) {
    const LayerSpec b = backward_spec(s);
    std::vector<std::string> cot, grads;
    for (const auto& t : b.inputs)
      if (!s.input(t.name)) cot.push_back(fmt::format("`{}`{}", t.name, t.required ? "" : " (optional)"));
    for (const auto& t : b.outputs) grads.push_back(fmt::format("`{}`", t.name));
    fmt::format_to(o, "\nBackward ([gradients.md](gradients.md)): cotangents {}; gradients {} (of the inputs given); "
                      "config keys get no gradient.\n",
                   fmt::join(cot, ", "), fmt::join(grads, ", "));
  }
  std::vector<std::string> kernels;
  for (const KernelImpl& k : e.kernels) kernels.push_back(fmt::format("`{}` ({})", k.name(), direction_name(k.direction)));
  if (!kernels.empty()) fmt::format_to(o, "\nCUDA kernels: {} (gpu/{}/binding.cpp).\n", fmt::join(kernels, ", "), s.name);
}

// One document: intro, an index, then every selected layer, sections in registry order.
std::string markdown(const std::vector<const LayerEntry*>& sel) {
  std::string out = kMarkdownIntro;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "\n| layer | what it is | forms |\n|---|---|---|\n");
  for (const auto* e : sel)
    fmt::format_to(o, "| [`{0}`](#{0}) | {1} | {2} |\n", e->spec.name, cell(e->spec.summary), forms_of(*e));
  for (const auto* e : sel) {
    out += "\n";
    markdown_layer(out, *e);
  }
  return out;
}

}  // namespace

Command add_layers(CLI::App& app) {
  auto* cmd = app.add_subcommand("layers", "print the layer catalogue (tensors, config keys, math) from the specs");
  auto layer = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("--layer", *layer, "only this layer");
  auto markdown_flag = std::make_shared<bool>(false);
  auto* json_opt = cmd->add_flag("--json", *json, "machine-readable JSON");
  cmd->add_flag("--markdown", *markdown_flag, "the catalogue as Markdown (docs/layers.md is this output)")
      ->excludes(json_opt);
  return [layer, json, markdown_flag]() {
    std::vector<const LayerEntry*> sel;
    if (layer->empty())
      for (const auto& e : registry()) sel.push_back(&e);
    else
      sel.push_back(&find_layer(*layer));
    if (*markdown_flag) {
      fmt::print("{}", markdown(sel));
    } else if (*json) {
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
