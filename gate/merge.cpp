#include "gate/merge.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <set>
#include <tuple>

#include "gate/policies.hpp"
#include "gate/report.hpp"
#include "oracles/arith.hpp"
#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"
#include "oracles/registry.hpp"

namespace ttr::merge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string json_message(const json::exception& e) {
  const std::string what = e.what();
  const auto cut = what.find("] ");
  return cut == std::string::npos ? what : what.substr(cut + 2);
}

// The first key at which two configurations differ, "seed: 1 vs 2".
std::string first_difference(const json& a, const json& b) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, _] : a.items()) keys.insert(k);
    for (const auto& [k, _] : b.items()) keys.insert(k);
    for (const auto& k : keys) {
      const json x = a.value(k, json()), y = b.value(k, json());
      if (x != y) return fmt::format("{}: {} vs {}", k, y.dump(), x.dump());
    }
  }
  return fmt::format("{} vs {}", b.dump(), a.dump());
}

std::uint64_t shard_number(const json& shard, const char* key, const std::string& path) {
  const auto it = shard.find(key);
  if (it == shard.end() || !it->is_number_unsigned())
    throw InputError(fmt::format("{}: shard record has no valid '{}'", path, key));
  return it->get<std::uint64_t>();
}

double ratio_value(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    if (s == "nan") return NAN;
  }
  return v.get<double>();
}

Location location(const json& v) {
  Location l;
  if (v.is_null()) return l;
  l.b = v.at("b").get<std::int64_t>();
  l.t = v.at("t").is_null() ? -1 : v.at("t").get<std::int64_t>();
  l.h = v.at("h").get<std::int64_t>();
  if (v.contains("sequence")) {  // varlen
    l.sequence = v.at("sequence").get<std::int64_t>();
    l.token = v.at("token").is_null() ? -1 : v.at("token").get<std::int64_t>();
  }
  return l;
}

// The inverse of check_json (gate/report.cpp): lossless for everything the
// report and JUnit writers read, which merge_gate verifies per shard.
NamedCheck check_from_json(const json& c) {
  CheckResult r;
  r.layer = c.at("layer").get<std::string>();
  r.dtype = parse_arith(c.at("dtype").get<std::string>()).tier;
  if (const auto p = c.find("policy"); p != c.end()) r.policy = parse_policy(p->get<std::string>()).policy;
  r.model_form = parse_form(c.at("model_form").get<std::string>());
  r.direction = c.contains("direction") ? parse_direction(c.at("direction").get<std::string>()) : Direction::forward;
  r.chunk_size = c.at("chunk_size").get<int>();
  r.threshold = ratio_value(c.at("threshold"));
  r.model_samples = c.value("model_samples", 0);
  r.pass = c.at("pass").get<bool>();
  // A range finding (gate/range.hpp): the traced form is the model's.
  if (const auto g = c.find("range"); g != c.end() && !g->is_null()) {
    RangeNote& n = r.range;
    n.beyond = true;
    n.form = r.model_form;
    n.intermediate = g->at("intermediate").is_null() ? "" : g->at("intermediate").get<std::string>();
    n.operation = g->at("operation").get<std::string>();
    n.format = g->at("format").get<std::string>();
    n.value = ratio_value(g->at("value"));
    n.limit = ratio_value(g->at("limit"));
    r.range_excused = g->at("excused").get<bool>();
  }
  if (const auto o = c.find("oracle"); o != c.end() && !o->is_null()) {
    OracleProvenance& p = r.oracle.provenance;
    p.tier = o->at("tier").get<std::string>();
    p.unit = o->at("unit").is_null() ? "" : o->at("unit").get<std::string>();
    p.slices = o->at("slices").get<std::int64_t>();
    for (const json& e : o->at("escalated"))
      p.escalated.push_back({e.at("b").is_null() ? -1 : e.at("b").get<std::int64_t>(),
                             e.at("h").is_null() ? -1 : e.at("h").get<std::int64_t>()});
    p.reason = o->at("reason").is_null() ? "" : o->at("reason").get<std::string>();
    const json& er = o->at("estimated_error_ratio");
    r.oracle.error_ratio = er.is_null() ? std::numeric_limits<double>::quiet_NaN() : ratio_value(er);
  }
  for (const json& t : c.at("tensors")) {
    TensorVerdict v;
    v.name = t.at("name").get<std::string>();
    v.present = t.at("present").get<bool>();
    v.elements = t.at("elements").get<std::int64_t>();
    v.rows = t.at("rows").get<std::int64_t>();
    v.max_abs_error = ratio_value(t.at("max_abs_error"));
    v.max_ratio = ratio_value(t.at("max_ratio"));
    v.worst = location(t.at("worst"));
    v.nan_count = t.at("nan_count").get<std::int64_t>();
    v.inf_count = t.at("inf_count").get<std::int64_t>();
    v.nonfinite_failures = t.at("nonfinite_failures").get<std::int64_t>();
    v.first_nonfinite = location(t.at("first_nonfinite"));
    v.pass = t.at("pass").get<bool>();
    v.worst_at_floor = t.value("worst_at_floor", false);
    r.tensors.push_back(std::move(v));
  }
  return {c.at("id").get<std::string>(), std::move(r)};
}

std::vector<ShardDoc> read_shards(const std::vector<fs::path>& dirs, const char* file) {
  std::vector<ShardDoc> docs;
  for (const fs::path& d : dirs) docs.push_back({(d / file).string(), read_json(d / file)});
  return check_shard_set(std::move(docs));
}

}  // namespace

json read_json(const fs::path& path) {
  try {
    return json::parse(io::read_text_file(path.string()));
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", path.string(), json_message(e)));
  }
}

std::vector<ShardDoc> check_shard_set(std::vector<ShardDoc> docs) {
  if (docs.empty()) throw InputError("merge: no shards given");
  for (ShardDoc& d : docs) {
    if (!d.doc.is_object() || !d.doc.contains("shard") || !d.doc["shard"].is_object())
      throw InputError(fmt::format("{}: not a shard's output (no 'shard' record: run it with --shard i/N)", d.path));
    const json& s = d.doc["shard"];
    d.index = shard_number(s, "index", d.path);
    d.count = shard_number(s, "count", d.path);
    if (!s.contains("config")) throw InputError(fmt::format("{}: shard record has no 'config'", d.path));
  }
  const ShardDoc& first = docs.front();
  for (const ShardDoc& d : docs) {
    if (d.doc.value("tool_version", json()) != first.doc.value("tool_version", json()))
      throw InputError(fmt::format("{}: written by ttrcheck {}, {} by {}: shards of different tool versions",
                                   d.path, d.doc.value("tool_version", json()).dump(), first.path,
                                   first.doc.value("tool_version", json()).dump()));
    if (d.count != first.count)
      throw InputError(fmt::format("{}: shard {}/{}, but {} is one of {} shards", d.path, d.index, d.count, first.path,
                                   first.count));
    if (d.doc["shard"]["config"] != first.doc["shard"]["config"])
      throw InputError(fmt::format("{}: another configuration than {} ({})", d.path, first.path,
                                   first_difference(first.doc["shard"]["config"], d.doc["shard"]["config"])));
  }
  std::sort(docs.begin(), docs.end(), [](const ShardDoc& a, const ShardDoc& b) { return a.index < b.index; });
  for (std::size_t i = 1; i < docs.size(); ++i)
    if (docs[i].index == docs[i - 1].index)
      throw InputError(fmt::format("{}: shard {}/{} given twice (also {})", docs[i].path, docs[i].index,
                                   docs[i].count, docs[i - 1].path));
  if (docs.size() != first.count) {
    std::vector<std::uint64_t> missing;
    std::size_t j = 0;
    for (std::uint64_t i = 0; i < docs.front().count && missing.size() < 8; ++i) {
      if (j < docs.size() && docs[j].index == i) ++j;
      else missing.push_back(i);
    }
    throw InputError(fmt::format("merge: {} of {} shards given; missing shard {}{}", docs.size(), docs.front().count,
                                 fmt::join(missing, ", "), docs.size() + missing.size() < docs.front().count ? ", …" : ""));
  }
  return docs;
}

OutputDir::OutputDir(const fs::path& dir) : dir_(dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw InputError(fmt::format("--out {}: exists and is not a directory", dir.string()));
    if (!fs::is_empty(dir, ec))
      throw InputError(fmt::format("--out {}: not empty (a merge writes a fresh directory)", dir.string()));
  } else {
    if (!fs::create_directories(dir, ec))
      throw InputError(fmt::format("--out {}: cannot create the directory: {}", dir.string(), ec.message()));
    created_ = true;
  }
}

OutputDir::~OutputDir() {
  if (done_) return;
  std::error_code ec;
  for (const auto& f : files_) fs::remove(f, ec);
  if (created_) fs::remove(dir_, ec);  // only if empty
}

void OutputDir::write_text(const std::string& name, const std::string& text) {
  const fs::path p = dir_ / name;
  io::write_text_atomic(p, text);
  files_.push_back(p);
}

void OutputDir::copy_file(const std::string& name, const fs::path& from) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    throw InputError(fmt::format("{}: file name '{}' is not a plain name", from.parent_path().string(), name));
  // Streamed (vector files reach tens of MB), to a temporary beside the target, then renamed.
  const fs::path p = dir_ / name, tmp = dir_ / ("." + name + ".tmp");
  std::error_code ec;
  if (!fs::is_regular_file(from, ec)) throw InputError(fmt::format("{}: not a regular file", from.string()));
  files_.push_back(tmp);
  if (fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec)) fs::rename(tmp, p, ec);
  if (ec) throw InputError(fmt::format("{}: cannot write: {}", p.string(), ec.message()));
  files_.back() = p;
}

std::string merge_gate(const std::vector<fs::path>& dirs, const fs::path& out) {
  const std::vector<ShardDoc> shards = read_shards(dirs, "report.json");
  // (target, unit in the unsharded plan, order in the shard) -> check
  std::map<std::tuple<int, std::uint64_t, std::size_t>, NamedCheck> plan;
  std::map<std::string, std::uint64_t> units;  // per target, checks' units seen
  std::map<std::string, std::set<std::uint64_t>> covered;
  const json units_planned = shards.front().doc["shard"].value("units", json());
  for (const ShardDoc& s : shards) {
    try {
      parse_report_text(s.doc.dump(), s.path);  // the schema's structure, unique ids
      if (s.doc.at("kind") != "gate") throw InputError(fmt::format("{}: not a gate report", s.path));
      const json& rec = s.doc.at("shard");
      if (rec.value("units", json()) != units_planned)
        throw InputError(fmt::format("{}: another plan than {} (units {} vs {})", s.path, shards.front().path,
                                     rec.value("units", json()).dump(), units_planned.dump()));
      const json& at = rec.at("check_units");
      const json& checks = s.doc.at("checks");
      if (!at.is_array() || at.size() != checks.size())
        throw InputError(fmt::format("{}: shard record's check_units do not match its checks", s.path));
      std::vector<NamedCheck> mine;
      for (std::size_t j = 0; j < checks.size(); ++j) {
        const std::string target = at[j].at(0).get<std::string>();
        const auto unit = at[j].at(1).get<std::uint64_t>();
        const int rank = target == "cpu" ? 0 : target == "cuda" ? 1 : -1;
        if (rank < 0 || unit >= units_planned.at(target).get<std::uint64_t>() || unit % s.count != s.index)
          throw InputError(fmt::format("{}: check '{}' has unit {} {}, which is not shard {}/{}'s", s.path,
                                       checks[j].at("id").get<std::string>(), target, unit, s.index, s.count));
        covered[target].insert(unit);
        mine.push_back(check_from_json(checks[j]));
        plan.emplace(std::tuple{rank, unit, j}, mine.back());
      }
      // The merge rewrites report and JUnit from the checks: refuse a shard
      // whose files are not exactly what its checks give.
      json again = report_json("gate", mine);
      again["shard"] = rec;
      if (dump_json(again) != io::read_text_file(s.path))
        throw InputError(fmt::format("{}: not as this ttrcheck writes it (edited, or another version)", s.path));
      const fs::path junit = fs::path(s.path).parent_path() / "junit.xml";
      std::error_code ec;
      if (fs::exists(junit, ec) && io::read_text_file(junit.string()) != junit_xml("ttrcheck-gate", mine))
        throw InputError(fmt::format("{}: does not match its report.json", junit.string()));
    } catch (const json::exception& e) {
      throw InputError(fmt::format("{}: malformed gate report: {}", s.path, json_message(e)));
    }
  }
  for (const auto& [target, n] : units_planned.items())
    if (covered[target].size() != n.get<std::uint64_t>())
      throw InputError(fmt::format("merge: the shards hold {} of the {} planned {} units", covered[target].size(),
                                   n.get<std::uint64_t>(), target));
  std::vector<NamedCheck> checks;
  for (auto& [_, c] : plan) checks.push_back(std::move(c));
  OutputDir dir(out);
  dir.write_text("report.json", dump_json(report_json("gate", checks)));
  dir.write_text("junit.xml", junit_xml("ttrcheck-gate", checks));
  dir.commit();
  const auto failed = std::count_if(checks.begin(), checks.end(), [](const NamedCheck& c) { return !c.second.pass; });
  return fmt::format("merged {} gate shards: {} checks, {} failed: {}; report in {}/", shards.size(), checks.size(),
                     failed, failed ? "FAIL" : "PASS", out.string());
}

std::string merge_vectors(const std::vector<fs::path>& dirs, const fs::path& out) {
  const std::vector<ShardDoc> shards = read_shards(dirs, "manifest.json");
  std::map<std::uint64_t, std::pair<const ShardDoc*, json>> cases;  // position -> entry
  std::uint64_t planned = 0;
  try {
    planned = shards.front().doc.at("shard").at("planned").get<std::uint64_t>();
    for (const ShardDoc& s : shards) {
      const json& rec = s.doc.at("shard");
      const json& entries = s.doc.at("cases");
      const json& positions = rec.at("positions");
      if (rec.at("planned").get<std::uint64_t>() != planned || positions.size() != entries.size())
        throw InputError(fmt::format("{}: shard record does not match its cases", s.path));
      for (std::size_t j = 0; j < entries.size(); ++j) {
        const auto k = positions[j].get<std::uint64_t>();
        if (k >= planned || k % s.count != s.index || !cases.emplace(k, std::pair{&s, entries[j]}).second)
          throw InputError(fmt::format("{}: case {} is not shard {}/{}'s", s.path, k, s.index, s.count));
      }
    }
  } catch (const json::exception& e) {
    throw InputError(fmt::format("merge: malformed vectors manifest: {}", json_message(e)));
  }
  if (cases.size() != planned)
    throw InputError(fmt::format("merge: the shards hold {} of the {} planned cases", cases.size(), planned));
  json manifest = shards.front().doc;
  manifest.erase("shard");
  manifest["cases"] = json::array();
  OutputDir dir(out);
  std::size_t files = 0;
  for (const auto& [k, entry] : cases) {
    const auto& [shard, e] = entry;
    for (const char* key : {"inputs", "oracle", "backward_inputs", "backward_oracle"})
      if (e.contains(key)) {
        dir.copy_file(e[key].get<std::string>(), fs::path(shard->path).parent_path() / e[key].get<std::string>());
        ++files;
      }
    manifest["cases"].push_back(e);
  }
  dir.write_text("manifest.json", manifest.dump(2) + "\n");
  dir.commit();
  return fmt::format("merged {} vectors shards: {} cases, {} files in {}/", shards.size(), planned, files, out.string());
}

std::string merge_baselines(const std::vector<fs::path>& files, const fs::path& out) {
  std::vector<ShardDoc> docs;
  for (const fs::path& f : files) {
    parse_baseline_text(io::read_text_file(f.string()), f.string());  // validates the document
    docs.push_back({f.string(), read_json(f)});
  }
  const bool sharded = docs.front().doc.contains("shard");
  for (const ShardDoc& d : docs)
    if (d.doc.contains("shard") != sharded)
      throw InputError(fmt::format("{}: {} a shard record, {} {}", d.path, sharded ? "has no" : "has",
                                   docs.front().path, sharded ? "has one" : "has none"));
  if (sharded) docs = check_shard_set(std::move(docs));
  json merged = docs.front().doc;
  merged.erase("shard");
  std::map<std::string, std::string> source;
  for (const ShardDoc& d : docs) {
    for (const char* key : {"tool_version", "factor", "floor"})
      if (d.doc.at(key) != merged.at(key))
        throw InputError(fmt::format("{}: {} {} differs from {}'s {}", d.path, key, d.doc.at(key).dump(),
                                     docs.front().path, merged.at(key).dump()));
    if (&d == &docs.front()) {
      for (const auto& [id, _] : d.doc.at("checks").items()) source[id] = d.path;
      continue;
    }
    for (const auto& [id, row] : d.doc.at("checks").items()) {
      if (const auto s = source.find(id); s != source.end())
        throw InputError(fmt::format("{}: check id '{}' also appears in {}", d.path, id, s->second));
      source[id] = d.path;
      merged["checks"][id] = row;
    }
  }
  io::write_text_atomic(out, dump_json(merged));
  return fmt::format("merged {} baselines: {} checks in {}", docs.size(), source.size(), out.string());
}

}  // namespace ttr::merge
