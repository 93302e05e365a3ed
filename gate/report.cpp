#include "gate/report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <stdexcept>

#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"
#include "oracles/oracle.hpp"

namespace ttr {
namespace {

using nlohmann::json;

json location_json(const Location& l) {
  json j = {{"b", l.b}, {"t", l.t < 0 ? json(nullptr) : json(l.t)}, {"h", l.h}};
  if (l.sequence >= 0) {  // varlen
    j["sequence"] = l.sequence;
    j["token"] = l.token < 0 ? json(nullptr) : json(l.token);
  }
  return j;
}

std::string ratio_str(double r) {
  if (std::isnan(r)) return "nan";
  if (std::isinf(r)) return r > 0 ? "inf" : "-inf";
  return fmt::format("{:.3g}", r);
}

// The row a reader should look at: the first non-finite failure when there is
// one (that is where a NaN hunt starts), else the row of the largest ratio.
const Location& where(const TensorVerdict& t) { return t.nonfinite_failures > 0 ? t.first_nonfinite : t.worst; }

// Names from users (file names) may hold invalid UTF-8: replaced by U+FFFD so the
// XML stays well-formed, the same way dump_json replaces them.
std::string valid_utf8(const std::string& s) {
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

// XML 1.0 text or attribute content. Control characters XML cannot carry are
// written as \xNN; in attributes tab and newlines become character references so
// attribute-value normalisation keeps them.
std::string xml_escape(const std::string& raw, bool attribute) {
  std::string out;
  for (const char ch : valid_utf8(raw)) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\'': out += attribute ? "&apos;" : "'"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      default:
        if (c < 0x20u || c == 0x7Fu) out += fmt::format("\\x{:02x}", c);
        else out += ch;
    }
  }
  return out;
}

// "range: <intermediate> = <value> beyond fp32's 3.40e+38 (operation *)".
std::string range_line(const CheckResult& r) {
  const RangeNote& n = r.range;
  return fmt::format("range: {} = {:.3g} beyond {}'s largest finite value {:.3g} (operation {} of the {} form)",
                     n.intermediate.empty() ? "an unnamed intermediate" : n.intermediate, n.value, n.format, n.limit,
                     n.operation, form_name(n.form));
}

// One line per failing tensor, for JUnit's failure message and body.
std::vector<std::string> failure_lines(const CheckResult& r) {
  std::vector<std::string> lines;
  for (const auto& t : r.tensors) {
    if (t.pass || !t.present) continue;
    std::string s = fmt::format("{}: max ratio {} > {} at (b,t,h) {}", t.name, ratio_str(t.max_ratio),
                                ratio_str(r.threshold), location_str(t.worst));
    if (t.nonfinite_failures > 0)
      s += fmt::format("; {} non-finite where the oracle is finite ({} NaN, {} Inf), first at {}", t.nonfinite_failures,
                       t.nan_count, t.inf_count, location_str(t.first_nonfinite));
    s += fmt::format("; max abs error {:.3e}", t.max_abs_error);
    lines.push_back(std::move(s));
  }
  if (r.range.beyond) lines.push_back(range_line(r) + " (--strict-range: counted as a failure)");
  if (lines.empty()) lines.push_back("failed");  // compare() fails only through a tensor; kept for safety of the XML
  return lines;
}

// The threshold every check shares; kRatioThreshold for none, nullopt when they differ.
std::optional<double> common_threshold(const std::vector<NamedCheck>& checks) {
  if (checks.empty()) return kRatioThreshold;
  for (const auto& c : checks)
    if (c.second.threshold != checks.front().second.threshold) return std::nullopt;
  return checks.front().second.threshold;
}

}  // namespace

// "(0,4,1)"; a state row has no token: "(0,-,1)". Varlen: "(0,104,1) seq 2 t 4",
// "(2,-,1) seq 2".
std::string location_str(const Location& l) {
  std::string s = l.t < 0 ? fmt::format("({},-,{})", l.b, l.h) : fmt::format("({},{},{})", l.b, l.t, l.h);
  if (l.sequence >= 0) s += l.token >= 0 ? fmt::format(" seq {} t {}", l.sequence, l.token) : fmt::format(" seq {}", l.sequence);
  return s;
}

std::string floor_line(const TensorVerdict& t) {
  if (t.pass || !t.present || !t.worst_at_floor || t.nonfinite_failures > 0) return {};
  return fmt::format("{} fails at {}, where the exact value and the model are 0: the subnormal floor alone bounds "
                     "that row, whatever the kernel's arithmetic",
                     t.name, location_str(t.worst));
}

std::string check_id(const CheckResult& r, const std::string& case_name) {
  return fmt::format("{}/{}/{}/{}", r.layer, form_name(r.model_form), policy_name(r.dtype, r.policy), case_name);
}

json json_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

json range_json(const RangeNote& note, bool excused) {
  return {{"intermediate", note.intermediate.empty() ? json(nullptr) : json(note.intermediate)},
          {"operation", note.operation},
          {"format", note.format},
          {"value", json_number(note.value)},
          {"limit", json_number(note.limit)},
          {"excused", excused}};
}

std::string oracle_line(const OracleNote& note) {
  const OracleProvenance& p = note.provenance;
  std::string s = fmt::format("oracle {}", p.tier);
  if (!std::isnan(note.error_ratio)) s += fmt::format(", estimated own error {:.2g} of the bound", note.error_ratio);
  if (p.tier.rfind("dd", 0) == 0 || !p.escalated.empty())
    s += fmt::format(", {} of {} {} slice{} escalated to MPFR", p.escalated.size(), p.slices, p.unit,
                     p.slices == 1 ? "" : "s");
  if (!p.reason.empty() && p.tier != "dd") s += fmt::format(" ({}{})", p.escalated.empty() ? "" : "first: ", p.reason);
  return s;
}

json oracle_json(const OracleNote& note) {
  const OracleProvenance& p = note.provenance;
  if (p.tier.empty()) return nullptr;
  json escalated = json::array();
  for (const OracleSlice& s : p.escalated)
    escalated.push_back({{"b", s.b < 0 ? json(nullptr) : json(s.b)}, {"h", s.h < 0 ? json(nullptr) : json(s.h)}});
  return {{"tier", p.tier},
          {"unit", p.unit.empty() ? json(nullptr) : json(p.unit)},
          {"slices", p.slices},
          {"escalated", std::move(escalated)},
          {"reason", p.reason.empty() ? json(nullptr) : json(p.reason)},
          {"estimated_error_ratio", std::isnan(note.error_ratio) ? json(nullptr) : json_number(note.error_ratio)}};
}

const char* verdict_name(const CheckResult& r) {
  if (!r.pass) return "fail";
  return r.range.beyond && r.range_excused ? "range" : "pass";
}

json check_json(const std::string& id, const CheckResult& r) {
  json tensors = json::array();
  for (const auto& t : r.tensors) {
    tensors.push_back({{"name", t.name},
                       {"present", t.present},
                       {"elements", t.elements},
                       {"rows", t.rows},
                       {"max_abs_error", json_number(t.max_abs_error)},
                       {"max_ratio", json_number(t.max_ratio)},
                       {"worst", t.present ? location_json(t.worst) : json(nullptr)},
                       {"nan_count", t.nan_count},
                       {"inf_count", t.inf_count},
                       {"nonfinite_failures", t.nonfinite_failures},
                       {"first_nonfinite", t.nonfinite_failures > 0 ? location_json(t.first_nonfinite) : json(nullptr)},
                       {"pass", t.pass}});
    if (t.worst_at_floor) tensors.back()["worst_at_floor"] = true;
  }
  json doc = {{"id", id},
          {"layer", r.layer},
          {"dtype", tier_name(r.dtype)},
          {"model_form", form_name(r.model_form)},
          {"direction", direction_name(r.direction)},
          {"chunk_size", r.chunk_size},
          {"threshold", json_number(r.threshold)},
          {"pass", r.pass},
          {"verdict", verdict_name(r)},
          {"range", r.range.beyond ? range_json(r.range, r.range_excused) : json(nullptr)},
          {"oracle", oracle_json(r.oracle)},
          {"tensors", std::move(tensors)}};
  // A foreign kernel's policy (gate/policies.hpp); absent for the dtype's own, so
  // reports of native checks are unchanged.
  if (r.policy != Policy::native) doc["policy"] = policy_name(r.dtype, r.policy);
  if (r.model_samples > 0) doc["model_samples"] = r.model_samples;
  return doc;
}

json report_json(const std::string& kind, const std::vector<NamedCheck>& checks) {
  if (kind != "check" && kind != "gate") throw std::invalid_argument("report_json: kind must be check or gate");
  json arr = json::array();
  bool pass = true;
  for (const auto& [id, r] : checks) {
    arr.push_back(check_json(id, r));
    pass = pass && r.pass;
  }
  const auto t = common_threshold(checks);
  return {{"schema", kReportSchema},
          {"schema_version", kReportSchemaVersion},
          {"kind", kind},
          {"tool_version", kToolVersion},
          {"threshold", t ? json_number(*t) : json(nullptr)},
          {"pass", pass},
          {"checks", std::move(arr)}};
}

std::string dump_json(const json& doc) { return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n"; }

void write_report(const std::string& path, const json& doc) { io::write_text_atomic(path, dump_json(doc)); }

void write_junit(const std::string& path, const std::string& xml) { io::write_text_atomic(path, xml); }

std::string junit_xml(const std::string& suite_name, const std::vector<NamedCheck>& checks) {
  const auto failures = std::count_if(checks.begin(), checks.end(), [](const NamedCheck& c) { return !c.second.pass; });
  const auto skipped = std::count_if(checks.begin(), checks.end(), [](const NamedCheck& c) {
    return std::string(verdict_name(c.second)) == "range";
  });
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"ttrcheck\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n", checks.size(), failures);
  x += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
                   xml_escape(suite_name, true), checks.size(), failures, skipped);
  for (const auto& [id, r] : checks) {
    x += fmt::format("    <testcase classname=\"{}\" name=\"{}\">\n", xml_escape(r.layer, true), xml_escape(id, true));
    if (r.pass && r.range.beyond && r.range_excused) {
      x += fmt::format("      <skipped message=\"{}\"/>\n", xml_escape(range_line(r), true));
    } else if (!r.pass) {
      const auto lines = failure_lines(r);
      std::string body;
      for (const auto& l : lines) body += l + "\n";
      x += fmt::format("      <failure type=\"error-ratio\" message=\"{}\">{}</failure>\n",
                       xml_escape(fmt::format("{}", fmt::join(lines, "; ")), true), xml_escape(body, false));
    }
    // Every tensor's numbers, so a CI page shows how close a passing check came.
    std::string out;
    for (const auto& t : r.tensors)
      out += t.present ? fmt::format("{}: max ratio {} at {}, max abs error {:.3e}, NaN {}, Inf {}, {}\n", t.name,
                                     ratio_str(t.max_ratio), location_str(where(t)), t.max_abs_error, t.nan_count,
                                     t.inf_count, t.pass ? "pass" : "FAIL")
                       : fmt::format("{}: absent from the candidate\n", t.name);
    x += fmt::format("      <system-out>{}</system-out>\n", xml_escape(out, false));
    x += "    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

void print_table(std::FILE* out, const std::vector<NamedCheck>& checks) {
  const std::vector<std::string> head = {"check", "tensor", "max abs err", "max ratio", "worst (b,t,h)", "NaN", "Inf",
                                         "verdict"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& [id, r] : checks)
    for (const auto& t : r.tensors) {
      if (!t.present) {
        rows.push_back({id, t.name, "-", "-", "-", "-", "-", "absent"});
        continue;
      }
      const bool excused = r.range.beyond && r.range_excused && (t.nonfinite_failures > 0 || t.max_ratio > r.threshold);
      rows.push_back({id, t.name, fmt::format("{:.3e}", t.max_abs_error), ratio_str(t.max_ratio),
                      location_str(where(t)), std::to_string(t.nan_count), std::to_string(t.inf_count),
                      excused ? "RANGE" : t.pass ? "PASS" : "FAIL"});
    }
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  // Text columns left-aligned, numbers right-aligned, two spaces apart.
  const auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const bool left = c < 2 || c == row.size() - 1;
      s += left ? fmt::format("{:<{}}", row[c], width[c]) : fmt::format("{:>{}}", row[c], width[c]);
      if (c + 1 < row.size()) s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::fprintf(out, "%s\n", s.c_str());
  };
  line(head);
  for (const auto& row : rows) line(row);
  for (const auto& [id, r] : checks)
    if (r.range.beyond) std::fprintf(out, "%s: %s\n", id.c_str(), range_line(r).c_str());
  for (const auto& [id, r] : checks)
    for (const TensorVerdict& t : r.tensors)
      if (const std::string f = floor_line(t); !f.empty()) std::fprintf(out, "%s: %s\n", id.c_str(), f.c_str());
  for (const auto& [id, r] : checks)
    if (!r.oracle.provenance.tier.empty()) std::fprintf(out, "%s: %s\n", id.c_str(), oracle_line(r.oracle).c_str());
  const auto failed = std::count_if(checks.begin(), checks.end(), [](const NamedCheck& c) { return !c.second.pass; });
  const auto t = common_threshold(checks);
  const std::string threshold = t ? "error ratio threshold " + ratio_str(*t) : "thresholds per check";
  const auto ranged = std::count_if(checks.begin(), checks.end(), [](const NamedCheck& c) {
    return std::string(verdict_name(c.second)) == "range";
  });
  const std::string excused = ranged ? fmt::format(", {} range finding{} excused", ranged, ranged == 1 ? "" : "s") : "";
  if (failed == 0)
    std::fprintf(out, "verdict: PASS (%zu check%s%s, %s)\n", checks.size(), checks.size() == 1 ? "" : "s",
                 excused.c_str(), threshold.c_str());
  else
    std::fprintf(out, "verdict: FAIL (%td of %zu check%s failed, %s)\n", failed, checks.size(),
                 checks.size() == 1 ? "" : "s", threshold.c_str());
}

}  // namespace ttr
