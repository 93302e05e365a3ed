// The files of a study (docs/studies.md, "Files"): one CSV per table, study.json
// (configuration, tool version, seed, tables, figures, claims) and summary.md.
// No timestamps or host names: the same seed gives byte-identical files.
#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "gate/report.hpp"
#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"
#include "oracles/oracle.hpp"
#include "study/study.hpp"

namespace ttr::study {
namespace {

std::string csv_field(const Cell& c) {
  if (const double* d = std::get_if<double>(&c)) return format_number(*d);
  if (const std::int64_t* i = std::get_if<std::int64_t>(&c)) return std::to_string(*i);
  const std::string& s = std::get<std::string>(c);
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::string csv(const Table& t) {
  std::string s;
  for (std::size_t i = 0; i < t.spec.columns.size(); ++i) s += (i ? "," : "") + t.spec.columns[i];
  s += "\n";
  for (const Row& r : t.rows) {
    for (std::size_t i = 0; i < r.size(); ++i) s += (i ? "," : "") + csv_field(r[i]);
    s += "\n";
  }
  return s;
}

nlohmann::json figure_json(const Figure& f) {
  nlohmann::json j{{"name", f.name},         {"title", f.title}, {"table", f.table}, {"x", f.x},
                   {"y", f.y},               {"ref", f.ref},    {"series", f.series}, {"facet", f.facet}, {"where", f.where},
                   {"logx", f.logx},         {"logy", f.logy},   {"xlabel", f.xlabel.empty() ? f.x : f.xlabel},
                   {"ylabel", f.ylabel},     {"caption", f.caption}};
  if (!std::isnan(f.ymin)) j["ymin"] = f.ymin;
  j["hlines"] = nlohmann::json::array();
  for (const auto& [v, label] : f.hlines) j["hlines"].push_back({{"value", v}, {"label", label}});
  return j;
}

std::string md_escape(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '|' ? std::string("\\|") : std::string(1, c);
  return o;
}

std::string summary_md(const Result& r) {
  const Study& s = *r.study;
  std::string m = fmt::format("# {}\n\n`ttrcheck study {}{} --seed {}` (ttrcheck {})\n\n", s.title, s.name,
                              r.options.quick ? " --quick" : "", r.options.seed, kToolVersion);
  m += fmt::format("**Claim** ({}): {}\n\n", s.source, s.claim);
  if (!r.conclusion.empty()) m += fmt::format("**Conclusion.** {}\n\n", r.conclusion);
  m += "| claim | source | theorem | verdict | evidence |\n|---|---|---|---|---|\n";
  for (const Claim& c : r.claims)
    m += fmt::format("| {} | {} | {} | **{}** | {} |\n", md_escape(c.statement), md_escape(c.source),
                     c.theorem ? "yes" : "no", verdict_name(c.verdict), md_escape(c.evidence));
  m += fmt::format("\nStudy verdict: {} (a theorem that disagrees with the measurement fails the study).\n\n",
                   r.pass ? "PASS" : "FAIL");
  m += "## Figures\n\n";
  for (const Figure& f : r.figures) {
    m += fmt::format("![{}]({}.png)\n\n", f.title, f.name);
    if (!f.caption.empty()) m += f.caption + "\n\n";
  }
  m += "## Data\n\n";
  for (const auto& [name, t] : r.tables)
    m += fmt::format("- [{}.csv]({}.csv): {} rows; {}\n", name, name, t.rows.size(), t.spec.doc);
  m += "- [study.json](study.json): the full configuration, seed, tool version, claims and figure specifications\n";
  return m;
}

}  // namespace

std::string format_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return fmt::format("{}", x);
}

std::vector<std::string> write_result(const Result& r, const std::string& dir_name) {
  namespace fs = std::filesystem;
  const fs::path dir(dir_name);
  std::error_code ec;
  if (!fs::is_directory(dir, ec) && !fs::create_directories(dir, ec))
    throw InputError(fmt::format("--out {}: cannot create the directory ({})", dir_name, ec.message()));
  const Study& s = *r.study;
  nlohmann::json doc{{"schema", "ttrcheck-study"}, {"schema_version", 1}, {"study", s.name},
                     {"title", s.title},           {"source", s.source},  {"claim", s.claim},
                     {"tool", "ttrcheck"},         {"tool_version", kToolVersion},
                     {"seed", r.options.seed},     {"quick", r.options.quick}, {"config", r.config},
                     {"pass", r.pass},             {"conclusion", r.conclusion}};
  std::vector<std::string> written;
  doc["tables"] = nlohmann::json::array();
  for (const auto& [name, t] : r.tables) {
    const fs::path p = dir / (name + ".csv");
    io::write_text_atomic(p, csv(t));
    written.push_back(p.string());
    doc["tables"].push_back({{"name", name}, {"file", name + ".csv"}, {"columns", t.spec.columns},
                             {"doc", t.spec.doc}, {"rows", t.rows.size()}});
  }
  doc["figures"] = nlohmann::json::array();
  for (const Figure& f : r.figures) doc["figures"].push_back(figure_json(f));
  doc["claims"] = nlohmann::json::array();
  for (const Claim& c : r.claims)
    doc["claims"].push_back({{"id", c.id}, {"source", c.source}, {"statement", c.statement}, {"theorem", c.theorem},
                             {"verdict", verdict_name(c.verdict)}, {"evidence", c.evidence}});
  const fs::path js = dir / "study.json", md = dir / "summary.md";
  io::write_text_atomic(js, dump_json(doc));
  io::write_text_atomic(md, summary_md(r));
  written.push_back(js.string());
  written.push_back(md.string());
  return written;
}

}  // namespace ttr::study
