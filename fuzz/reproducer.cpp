#include "fuzz/reproducer.hpp"

#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

#include "gate/report.hpp"
#include "oracles/io/text_file.hpp"
#include "gate/mutants.hpp"
#include "oracles/oracle.hpp"

namespace ttr::fuzz {
namespace {

namespace fs = std::filesystem;

nlohmann::json number(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");
}

nlohmann::json size_json(const Case& c) {
  const CaseSize s = size_of(c);
  return {{"T", s.T}, {"sequences", s.sequences}, {"nonzeros", s.nonzeros}, {"tensors", s.tensors},
          {"magnitude", s.magnitude}, {"dims", c.dims}};
}

nlohmann::json check_json(const CheckResult& r) {
  nlohmann::json t = nlohmann::json::array();
  for (const TensorVerdict& v : r.tensors) {
    nlohmann::json e{{"name", v.name}, {"present", v.present}};
    if (v.present) {
      e["max_ratio"] = number(v.max_ratio);
      e["worst"] = {{"b", v.worst.b}, {"t", v.worst.t}, {"h", v.worst.h}};
      e["nan_count"] = v.nan_count;
      e["inf_count"] = v.inf_count;
      e["nonfinite_failures"] = v.nonfinite_failures;
      if (v.nonfinite_failures > 0)
        e["first_nonfinite"] = {{"b", v.first_nonfinite.b}, {"t", v.first_nonfinite.t}, {"h", v.first_nonfinite.h}};
      e["pass"] = v.pass;
    }
    t.push_back(e);
  }
  nlohmann::json out{{"pass", r.pass}, {"threshold", r.threshold}, {"tensors", t}};
  if (r.range.beyond) out["range"] = range_json(r.range, r.range_excused);
  return out;
}

std::string what_it_is(FindingKind k) {
  switch (k) {
    case FindingKind::nonfinite: return "NaN/Inf in the kernel's outputs where the oracle is finite and representable";
    case FindingKind::oracle_nonfinite:
      return "the oracle itself has no finite value where the kernel returned a finite one (not a kernel failure: "
             "the inputs leave the layer's domain)";
    case FindingKind::ratio: return "finite outputs whose error ratio exceeds the gate's threshold";
    case FindingKind::range:
      return "NaN/Inf where the oracle is finite, but an exact intermediate of the kernel's form exceeds the "
             "dtype's range (check.range names it): no kernel of this form and dtype can compute these inputs; "
             "not a kernel failure unless --strict-range";
  }
  return "";
}

}  // namespace

std::string reproducer_key(const std::string& kind, const io::TensorFile& inputs) {
  const auto cfg = inputs.metadata.find("config");
  std::string key = kind + '\0' + (cfg == inputs.metadata.end() ? "" : cfg->second) + '\0';
  for (const auto& [name, t] : inputs.tensors) {  // std::map: name order
    key += name + '\0' + std::string(io::dtype_name(t.dtype)) + '\0';
    for (std::int64_t d : t.shape) key += std::to_string(d) + ',';
    key += '\0';
    key.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  }
  return key;
}

std::string check_command(const CampaignInfo& info, const std::string& stem, const std::string& candidate_file) {
  std::string c = fmt::format("ttrcheck check --layer {} --in {}.inputs.safetensors --candidate {} --dtype {} --form {}",
                              info.layer, stem, candidate_file, info.target.substr(info.target.find(':') + 1),
                              form_name(info.form));
  if (!one_token_at_a_time(info.form)) c += fmt::format(" --chunk-size {}", info.chunk_size);
  if (info.strict_range) c += " --strict-range";
  if (info.direction == Direction::backward) c += " --backward";
  return c;
}

std::vector<std::string> write_reproducers(const fs::path& dir, const LayerEntry& layer, const Target& target,
                                           const CampaignInfo& info, const CampaignResult& r) {
  std::vector<fs::path> written;
  std::vector<std::string> stems;
  try {
    int index[kFindingKinds] = {};
    const std::string dtype = info.target.substr(info.target.find(':') + 1);
    std::map<std::string, std::string> seen;  // reproducer_key -> stem
    nlohmann::json duplicates = nlohmann::json::array();
    std::vector<std::string> unique;
    for (const Finding& f : r.findings) {
      const Config cfg = Config::make(layer.spec, f.minimised.config);
      auto meta = base_metadata("inputs", layer.spec, cfg);
      meta["seed"] = std::to_string(info.seed);
      meta["fuzz_case"] = std::to_string(f.case_index);
      meta["fuzz_family"] = f.minimised.family;
      const io::TensorFile in_file = to_file(f.minimised.inputs, io::DType::F32, meta);
      const std::string key = reproducer_key(kind_name(f.kind), in_file);
      if (const auto s = seen.find(key); s != seen.end()) {
        duplicates.push_back({{"case", f.case_index}, {"kind", kind_name(f.kind)}, {"same_as", s->second}});
        stems.push_back(s->second);
        continue;
      }
      const std::string stem = fmt::format("{}.{}.{}{}.{}.{}", layer.spec.name, dtype, form_name(info.form),
                                           info.direction == Direction::backward ? ".backward" : "",
                                           kind_name(f.kind), index[static_cast<int>(f.kind)]++);
      seen.emplace(key, stem);
      const fs::path in_path = dir / (stem + ".inputs.safetensors");
      io::write_safetensors_atomic(in_path, in_file);
      written.push_back(in_path);

      auto cmeta = base_metadata("run", layer.spec, cfg);
      cmeta["form"] = form_name(info.form);
      cmeta["target"] = info.target;
      cmeta["direction"] = direction_name(info.direction);
      if (!one_token_at_a_time(info.form)) cmeta["chunk_size"] = std::to_string(info.chunk_size);
      if (info.mutant != "none") cmeta["mutant"] = info.mutant;
      const fs::path cand_path = dir / (stem + ".candidate.safetensors");
      io::write_safetensors_atomic(cand_path, to_file(f.candidate, io::DType::F32, cmeta));
      written.push_back(cand_path);

      const std::string check = check_command(info, stem, stem + ".candidate.safetensors");
      nlohmann::json replay{{"check", check}, {"expected_exit", f.check.pass ? 0 : 1}};
      const std::string rerun = target.replay_command(layer.spec.name, stem + ".inputs.safetensors",
                                                      stem + ".rerun.safetensors");
      if (!rerun.empty())
        replay["rerun"] = {rerun, check_command(info, stem, stem + ".rerun.safetensors")};
      const nlohmann::json note{
          {"tool_version", kToolVersion},
          {"finding", stem},
          {"kind", kind_name(f.kind)},
          {"means", what_it_is(f.kind)},
          {"layer", layer.spec.name},
          {"target", info.target},
          {"form", form_name(info.form)},
          {"direction", direction_name(info.direction)},
          {"chunk_size", info.chunk_size},
          {"mutant", info.mutant},
          {"objective", objective_name(info.objective)},
          {"objective_value", number(f.objective_value)},
          {"seed", info.seed},
          {"budget", info.budget.text()},
          {"case", f.case_index},
          {"family", f.original.family},
          {"config", cfg.values()},
          {"original", size_json(f.original)},
          {"minimised", size_json(f.minimised)},
          {"check", check_json(f.check)},
          {"files", {{"inputs", in_path.filename().string()}, {"candidate", cand_path.filename().string()}}},
          {"replay", replay}};
      const fs::path note_path = dir / (stem + ".json");
      io::write_text_atomic(note_path, note.dump(2) + "\n");
      written.push_back(note_path);
      stems.push_back(stem);
      unique.push_back(stem);
    }
    nlohmann::json summary{{"tool_version", kToolVersion},
                                 {"layer", layer.spec.name},
                                 {"target", info.target},
                                 {"form", form_name(info.form)},
                                 {"direction", direction_name(info.direction)},
                                 {"chunk_size", info.chunk_size},
                                 {"mutant", info.mutant},
                                 {"objective", objective_name(info.objective)},
                                 {"seed", info.seed},
                                 {"budget", info.budget.text()},
                                 {"cases", info.budget.cases > 0 ? nlohmann::json(r.last.cases) : nlohmann::json("time budget")},
                                 {"nonfinite_cases", r.last.nonfinite_cases},
                                 {"range_cases", r.last.range_cases},
                                 {"strict_range", info.strict_range},
                                 {"oracle_nonfinite_cases", r.oracle_nonfinite_cases},
                                 {"best_ratio_screened", number(r.last.best_ratio)},
                                 {"best_ratio_confirmed", number(r.best_ratio_confirmed)},
                                 {"first_finding_case", r.first_finding_case},
                                 {"findings", unique},
                                 {"duplicates", duplicates}};
    if (!info.shard.is_null()) summary["shard"] = info.shard;
    const fs::path sum_path = dir / "campaign.json";
    io::write_text_atomic(sum_path, summary.dump(2) + "\n");
    written.push_back(sum_path);
  } catch (...) {
    std::error_code ec;
    for (const auto& p : written) fs::remove(p, ec);
    throw;
  }
  return stems;
}

}  // namespace ttr::fuzz
