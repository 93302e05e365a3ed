// `ttrcheck mutants [--json]`: the mutant catalogue (gate/mutants.hpp) — the
// realistic bugs `ttrcheck run --mutant NAME` injects into the chunk and scan
// forms (forward and backward), the (layer, form, direction) triples each
// affects and what it needs to bite.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "gate/mutants.hpp"

namespace ttr::cli {
namespace {

nlohmann::json needs_json(const MutantConditions& n) {
  nlohmann::json j = nlohmann::json::object();
  if (!n.config.empty()) {
    j["config"] = nlohmann::json::object();
    for (const auto& [k, v] : n.config) j["config"][k] = v;
  }
  if (!n.inputs.empty()) j["inputs"] = n.inputs;
  if (!n.tiers.empty())
    for (Tier t : n.tiers) j["arith"].push_back(tier_name(t));
  if (n.min_chunks > 1) j["min_chunks"] = n.min_chunks;
  if (n.min_chunk_size > 1) j["min_chunk_size"] = n.min_chunk_size;
  if (n.partial_last_chunk) j["partial_last_chunk"] = true;
  if (n.several_sequences) j["several_sequences"] = true;
  if (n.special != SpecialInput::none) j["special_inputs"] = special_input_text(n.special);
  return j;
}

// The conditions as one line of text ("" when there are none).
std::string needs_text(const MutantConditions& n) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : n.config) parts.push_back(fmt::format("--set {}={}", k, v));
  for (const auto& i : n.inputs) parts.push_back(fmt::format("input {} present", i));
  if (!n.tiers.empty()) {
    std::vector<std::string> names;
    for (Tier t : n.tiers) names.push_back(tier_name(t));
    parts.push_back(fmt::format("--arith {}", fmt::join(names, "|")));
  }
  if (n.min_chunks > 1) parts.push_back(fmt::format("T >= {}·C (chunk forms)", n.min_chunks));
  if (n.min_chunk_size > 1) parts.push_back(fmt::format("--chunk-size >= {}", n.min_chunk_size));
  if (n.partial_last_chunk) parts.push_back("T not a multiple of C");
  if (n.several_sequences) parts.push_back("B·H >= 2");
  if (n.special != SpecialInput::none) parts.push_back(special_input_text(n.special));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

Command add_mutants(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "mutants", "list the mutant catalogue: realistic bugs of the chunk/scan forms for `run --mutant NAME`");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "machine-readable JSON");
  return [json]() {
    if (*json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& m : mutant_catalogue()) {
        nlohmann::json e{{"name", m.name},
                         {"description", m.description},
                         {"direction", direction_name(m.direction())},
                         {"needs", needs_json(m.needs)}};
        e["targets"] = nlohmann::json::array();
        for (const auto& t : m.targets)
          e["targets"].push_back(
              {{"layer", t.layer}, {"form", form_name(t.form)}, {"direction", direction_name(t.direction)}});
        if (!m.note.empty()) e["note"] = m.note;
        e["cuda"] = m.cuda;
        j.push_back(std::move(e));
      }
      fmt::print("{}\n", j.dump(2));
      return 0;
    }
    for (const auto& m : mutant_catalogue()) {
      fmt::print("{}\n  {}\n", m.name, m.description);
      std::vector<std::string> targets;
      for (const auto& t : m.targets)
        targets.push_back(fmt::format("{}/{}{}", t.layer, form_name(t.form),
                                      t.direction == Direction::backward ? "/backward" : ""));
      fmt::print("  affects: {}\n", fmt::join(targets, ", "));
      if (m.cuda) fmt::print("  cuda: also planted in the CUDA chunk backward kernels of these layers\n");
      if (const std::string n = needs_text(m.needs); !n.empty()) fmt::print("  needs: {}\n", n);
      if (!m.note.empty()) fmt::print("  note: {}\n", m.note);
      fmt::print("\n");
    }
    return 0;
  };
}

}  // namespace ttr::cli
