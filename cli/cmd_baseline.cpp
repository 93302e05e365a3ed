// `ttrcheck baseline record|compare`: a CI regression gate on error ratios. A
// kernel change that doubles a check's error ratio is caught even while the ratio
// is still under the model's threshold (docs/reports.md, "Baselines").
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"
#include "oracles/oracle.hpp"
#include "gate/report.hpp"

namespace ttr::cli {
namespace {

using nlohmann::json;

// A ratio may double (one bit of accuracy lost) before it counts as a regression.
constexpr double kDefaultFactor = 2.0;
// Ratios below this fraction of the threshold 8 are noise: a kernel that happens
// to be nearly exact on a vector (ratio 0.002) may reorder a sum and land at
// 0.02 without being any worse. Growth is judged against at least this.
constexpr double kDefaultFloor = 0.05;

// check id -> tensor -> max_ratio (present tensors only).
using Ratios = std::map<std::string, std::map<std::string, double>>;

struct Baseline {
  double factor = kDefaultFactor, floor = kDefaultFloor;
  Ratios ratios;
};

std::string ratio_str(double r) { return std::isinf(r) ? (r > 0 ? "inf" : "-inf") : fmt::format("{:.4g}", r); }

// The checks of several reports; an id may appear once over all of them.
Ratios read_reports(const std::vector<std::string>& paths) {
  Ratios out;
  std::map<std::string, std::string> source;
  for (const auto& path : paths)
    for (const ReportedCheck& c : parse_report(path)) {
      if (const auto s = source.find(c.id); s != source.end())
        throw InputError(fmt::format("{}: check id '{}' also appears in {}", path, c.id, s->second));
      source[c.id] = path;
      auto& row = out[c.id];
      for (const auto& t : c.tensors)
        if (t.present) row[t.name] = t.max_ratio;
    }
  return out;
}

// The file's text through the shared reader (gate/report_read.cpp, fuzzed in fuzz/).
Baseline read_baseline(const std::string& path) {
  BaselineDoc d = parse_baseline_text(io::read_text_file(path), path);
  Baseline b;
  b.factor = d.factor;
  b.floor = d.floor;
  b.ratios = std::move(d.ratios);
  return b;
}

json baseline_json(const Baseline& b) {
  json checks = json::object();
  for (const auto& [id, row] : b.ratios) {
    json tensors = json::object();
    for (const auto& [name, r] : row) tensors[name] = json_number(r);
    checks[id] = std::move(tensors);
  }
  return {{"schema", kBaselineSchema}, {"schema_version", kBaselineSchemaVersion}, {"tool_version", kToolVersion},
          {"factor", b.factor},        {"floor", b.floor},                         {"checks", std::move(checks)}};
}

int record(const std::vector<std::string>& reports, const std::string& out, double factor, double floor) {
  std::vector<io::NamedPath> ins;
  for (const std::string& r : reports) ins.push_back({"--report", r});
  check_outputs(ins, {{"--out", out}});
  Baseline b;
  b.factor = factor;
  b.floor = floor;
  b.ratios = read_reports(reports);
  for (const auto& [id, row] : b.ratios)
    for (const auto& [name, r] : row)
      if (std::isnan(r))  // no growth can be measured from it
        throw InputError(fmt::format("check '{}' tensor '{}': ratio is NaN; cannot record it in a baseline", id, name));
  json doc = baseline_json(b);
  // One shard's report (`gate --shard i/N`): the baseline keeps which shard it
  // is, so `ttrcheck merge` can check the shards' baselines are one complete set.
  if (reports.size() == 1)
    if (const json report = json::parse(io::read_text_file(reports.front())); report.contains("shard")) {
      const json& s = report["shard"];
      doc["shard"] = {{"index", s.at("index")}, {"count", s.at("count")}, {"source", s.at("source")},
                      {"config", s.at("config")}};
    }
  io::write_text_atomic(out, dump_json(doc));
  std::size_t n = 0;
  for (const auto& [_, row] : b.ratios) n += row.size();
  std::printf("recorded %zu checks (%zu tensor ratios) in %s: factor %s, floor %s\n", b.ratios.size(), n, out.c_str(),
              ratio_str(factor).c_str(), ratio_str(floor).c_str());
  return 0;
}

int compare(const std::string& baseline_path, const std::vector<std::string>& reports, double factor, double floor) {
  const Baseline b = read_baseline(baseline_path);
  const Ratios now = read_reports(reports);
  factor = factor >= 0.0 ? factor : b.factor;
  floor = floor >= 0.0 ? floor : b.floor;
  std::size_t regressions = 0, missing = 0, fresh = 0, compared = 0;
  for (const auto& [id, row] : b.ratios) {
    const auto it = now.find(id);
    if (it == now.end()) {
      std::printf("missing: %s: in the baseline, not in the report\n", id.c_str());
      ++missing;
      continue;
    }
    ++compared;
    for (const auto& [name, old] : row) {
      const auto t = it->second.find(name);
      if (t == it->second.end()) {
        std::printf("missing: %s %s: in the baseline, absent from the report\n", id.c_str(), name.c_str());
        ++missing;
        continue;
      }
      const double limit = factor * std::max(old, floor);
      if (!(t->second <= limit)) {  // NaN counts as a regression
        std::printf("regression: %s %s: ratio %s -> %s (limit %s = %s x max(%s, floor %s))\n", id.c_str(),
                    name.c_str(), ratio_str(old).c_str(), ratio_str(t->second).c_str(), ratio_str(limit).c_str(),
                    ratio_str(factor).c_str(), ratio_str(old).c_str(), ratio_str(floor).c_str());
        ++regressions;
      }
    }
  }
  for (const auto& [id, _] : now)
    if (!b.ratios.count(id)) {
      std::printf("new: %s: not in the baseline (not compared)\n", id.c_str());
      ++fresh;
    }
  const bool pass = regressions == 0 && missing == 0;
  std::printf("baseline compare: %zu checks compared, %zu regressions, %zu missing, %zu new: %s\n", compared,
              regressions, missing, fresh, pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace

Command add_baseline(CLI::App& app) {
  struct Opts {
    std::vector<std::string> reports;
    std::string out, baseline;
    double factor = -1.0, floor = -1.0;  // negative: the default (record) or the baseline's (compare)
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("baseline", "record error ratios of check reports; fail when they grow");
  cmd->require_subcommand(1);
  auto* rec = cmd->add_subcommand("record", "store every check's per-tensor error ratio");
  rec->add_option("--report", o->reports, "report(s) of `ttrcheck check` or `gate`; repeatable")->required();
  rec->add_option("--out", o->out, "baseline file (JSON)")->required();
  rec->add_option("--factor", o->factor, fmt::format("allowed growth of a ratio (default {})", kDefaultFactor))
      ->check(CLI::Range(1.0, 1e6));
  rec->add_option("--floor", o->floor, fmt::format("ratios below this count as this (default {})", kDefaultFloor))
      ->check(CLI::Range(0.0, 1e6));
  auto* cmp = cmd->add_subcommand("compare", "fail when a check's ratio grew beyond factor x max(baseline, floor)");
  cmp->add_option("--baseline", o->baseline, "baseline file (`ttrcheck baseline record`)")->required();
  cmp->add_option("--report", o->reports, "report(s) to judge; repeatable")->required();
  cmp->add_option("--factor", o->factor, "allowed growth (default: the baseline's)")->check(CLI::Range(1.0, 1e6));
  cmp->add_option("--floor", o->floor, "ratio floor (default: the baseline's)")->check(CLI::Range(0.0, 1e6));
  return [o, rec]() {
    if (rec->parsed())
      return record(o->reports, o->out, o->factor >= 0.0 ? o->factor : kDefaultFactor,
                    o->floor >= 0.0 ? o->floor : kDefaultFloor);
    return compare(o->baseline, o->reports, o->factor, o->floor);
  };
}

}  // namespace ttr::cli
