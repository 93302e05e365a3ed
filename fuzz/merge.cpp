#include "fuzz/merge.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

#include "fuzz/reproducer.hpp"
#include "gate/merge.hpp"
#include "oracles/error.hpp"
#include "oracles/io/safetensors.hpp"

namespace ttr::fuzz {
namespace fs = std::filesystem;
using nlohmann::json;
using merge::ShardDoc;

namespace {

// A finding a shard kept (before the per-kind cap and deduplication of the
// whole campaign): written as a reproducer (`stem`) or listed as a duplicate.
struct Kept {
  std::int64_t case_index = 0;
  std::string kind, key;
  const ShardDoc* shard = nullptr;
  std::string stem;  // the shard's reproducer (for a duplicate: the one it repeats)
  json note;         // the shard's note (null for a duplicate)
};

double number_value(const json& v) {
  if (v.is_string()) return v == "inf" ? INFINITY : v == "-inf" ? -INFINITY : NAN;
  return v.get<double>();
}

// Every string in the note's replay commands, with the shard's stem renamed.
void rename_stem(json& v, const std::string& from, const std::string& to) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    for (std::size_t at = 0; (at = s.find(from + ".", at)) != std::string::npos; at += to.size() + 1)
      s.replace(at, from.size() + 1, to + ".");
    v = s;
  } else if (v.is_array() || v.is_object()) {
    for (auto& x : v) rename_stem(x, from, to);
  }
}

std::vector<Kept> kept_findings(const ShardDoc& s) {
  const fs::path dir = fs::path(s.path).parent_path();
  const json& doc = s.doc;
  const json& range = doc.at("shard").at("cases");
  const auto lo = range.at(0).get<std::int64_t>(), hi = range.at(1).get<std::int64_t>();
  std::vector<Kept> out;
  std::map<std::string, std::string> key_of;  // stem -> reproducer key
  for (const json& stem_json : doc.at("findings")) {
    Kept k;
    k.shard = &s;
    k.stem = stem_json.get<std::string>();
    k.note = merge::read_json(dir / (k.stem + ".json"));
    k.case_index = k.note.at("case").get<std::int64_t>();
    k.kind = k.note.at("kind").get<std::string>();
    if (k.note.at("finding") != k.stem)
      throw InputError(fmt::format("{}: note {}.json names another finding", s.path, k.stem));
    k.key = reproducer_key(k.kind, io::read_safetensors(dir / k.note.at("files").at("inputs").get<std::string>()));
    key_of[k.stem] = k.key;
    out.push_back(std::move(k));
  }
  for (const json& d : doc.at("duplicates")) {
    Kept k;
    k.shard = &s;
    k.case_index = d.at("case").get<std::int64_t>();
    k.kind = d.at("kind").get<std::string>();
    k.stem = d.at("same_as").get<std::string>();
    const auto it = key_of.find(k.stem);
    if (it == key_of.end())
      throw InputError(fmt::format("{}: duplicate of case {} names '{}', not one of its findings", s.path,
                                   k.case_index, k.stem));
    k.key = it->second;
    out.push_back(std::move(k));
  }
  for (const Kept& k : out)
    if (k.case_index < lo || k.case_index >= hi)
      throw InputError(fmt::format("{}: finding of case {} outside the shard's cases {}…{}", s.path, k.case_index, lo,
                                   hi - 1));
  return out;
}

}  // namespace

std::string merge_campaigns(const std::vector<fs::path>& dirs, const fs::path& out) {
  std::vector<ShardDoc> docs;
  for (const fs::path& d : dirs) docs.push_back({(d / "campaign.json").string(), merge::read_json(d / "campaign.json")});
  const std::vector<ShardDoc> shards = merge::check_shard_set(std::move(docs));
  try {
    const json& config = shards.front().doc.at("shard").at("config");
    const int max_findings = config.at("max_findings").get<int>();
    // Every finding the shards kept, in campaign case order: the unsharded
    // campaign keeps the first max_findings of each kind, which each shard
    // kept among its own first max_findings.
    std::vector<Kept> all;
    for (const ShardDoc& s : shards)
      for (Kept& k : kept_findings(s)) all.push_back(std::move(k));
    std::sort(all.begin(), all.end(), [](const Kept& a, const Kept& b) { return a.case_index < b.case_index; });
    for (std::size_t i = 1; i < all.size(); ++i)
      if (all[i].case_index == all[i - 1].case_index)
        throw InputError(fmt::format("{}: case {} also in {}", all[i].shard->path, all[i].case_index,
                                     all[i - 1].shard->path));
    const json& head = shards.front().doc;
    const std::string target = head.at("target").get<std::string>();
    const bool backward = head.contains("direction") && head.at("direction") == "backward";
    const std::string prefix = fmt::format("{}.{}.{}{}", head.at("layer").get<std::string>(),
                                           target.substr(target.find(':') + 1), head.at("form").get<std::string>(),
                                           backward ? ".backward" : "");
    std::map<std::string, int> per_kind, index;
    std::map<std::string, std::string> stem_of;  // reproducer key -> merged stem
    json findings = json::array(), duplicates = json::array();
    merge::OutputDir dir(out);
    for (const Kept& k : all) {
      if (per_kind[k.kind]++ >= max_findings) continue;  // beyond the unsharded campaign's cap
      if (const auto s = stem_of.find(k.key); s != stem_of.end()) {
        duplicates.push_back({{"case", k.case_index}, {"kind", k.kind}, {"same_as", s->second}});
        continue;
      }
      json note = k.note;
      if (note.is_null())  // a shard's duplicate whose first occurrence the cap left out: cannot happen
        throw InputError(fmt::format("{}: duplicate of case {} without its reproducer", k.shard->path, k.case_index));
      const std::string stem = fmt::format("{}.{}.{}", prefix, k.kind, index[k.kind]++);
      stem_of.emplace(k.key, stem);
      const fs::path from = fs::path(k.shard->path).parent_path();
      for (const char* f : {"inputs", "candidate"}) {
        const std::string name = stem + "." + f + ".safetensors";
        dir.copy_file(name, from / note.at("files").at(f).get<std::string>());
        note["files"][f] = name;
      }
      note["finding"] = stem;
      rename_stem(note["replay"], k.stem, stem);
      dir.write_text(stem + ".json", note.dump(2) + "\n");
      findings.push_back(stem);
    }
    // campaign.json: the unsharded campaign's counts.
    json merged = head;
    merged.erase("shard");
    std::int64_t cases = 0, nonfinite = 0, oracle_nonfinite = 0, first = -1;
    double best = -INFINITY;
    for (const ShardDoc& s : shards) {
      const json& d = s.doc;
      cases += d.at("cases").is_number() ? d.at("cases").get<std::int64_t>() : 0;
      nonfinite += d.at("nonfinite_cases").get<std::int64_t>();
      oracle_nonfinite += d.at("oracle_nonfinite_cases").get<std::int64_t>();
      const auto f = d.at("first_finding_case").get<std::int64_t>();
      if (f >= 0 && first < 0) first = f;  // shards in index order: case order
      // The best screened case of the campaign is the first to reach the
      // maximum: that shard's re-check is the campaign's.
      if (const double b = number_value(d.at("best_ratio_screened")); b > best) {
        best = b;
        merged["best_ratio_screened"] = d.at("best_ratio_screened");
        merged["best_ratio_confirmed"] = d.at("best_ratio_confirmed");
      }
    }
    if (head.at("cases").is_number()) merged["cases"] = cases;
    merged["nonfinite_cases"] = nonfinite;
    merged["oracle_nonfinite_cases"] = oracle_nonfinite;
    merged["first_finding_case"] = first;
    merged["findings"] = findings;
    merged["duplicates"] = duplicates;
    dir.write_text("campaign.json", merged.dump(2) + "\n");
    dir.commit();
    return fmt::format("merged {} fuzz shards: {} cases, {} reproducers, {} duplicates; in {}/", shards.size(),
                       head.at("cases").is_number() ? fmt::format("{}", cases) : std::string("time-budget"),
                       findings.size(), duplicates.size(), out.string());
  } catch (const json::exception& e) {
    throw InputError(fmt::format("merge: malformed fuzz campaign ({}): {}", shards.front().path, e.what()));
  }
}

}  // namespace ttr::fuzz
