// Reading reports and baselines back (docs/reports.md): the parsers of the JSON
// documents `ttrcheck check|gate` and `ttrcheck baseline record` write. Light (no
// layer, tier or error-model code), so the parser fuzz harnesses (fuzz/) link
// them without the oracle runners.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ttr {

inline constexpr const char* kReportSchema = "ttrcheck-report";
inline constexpr int kReportSchemaVersion = 1;

// What a baseline needs from a report.
struct ReportedTensor {
  std::string name;
  bool present = true;
  double max_ratio = 0.0;  // may be inf (a non-finite failure)
  bool pass = true;
};
struct ReportedCheck {
  std::string id;
  bool pass = true;
  std::vector<ReportedTensor> tensors;
};

// Reads a report written by check_json/report_json, in the file's order.
// InputError "<source>: <problem>" for invalid JSON, another schema or
// schema_version, a missing or mistyped field, or a repeated check id.
std::vector<ReportedCheck> parse_report_text(const std::string& text, const std::string& source);
// The same from a file; also InputError for an unreadable file.
std::vector<ReportedCheck> parse_report(const std::string& path);

inline constexpr const char* kBaselineSchema = "ttrcheck-baseline";
inline constexpr int kBaselineSchemaVersion = 1;

// A baseline (`ttrcheck baseline record`): per check id, per tensor, the recorded
// error ratio (a number or +inf), and the growth rule factor x max(ratio, floor).
struct BaselineDoc {
  double factor = 2.0, floor = 0.05;
  std::map<std::string, std::map<std::string, double>> ratios;
};

// InputError "<source>: <problem>" for invalid JSON, another schema or version,
// a factor < 1 or floor < 0 (or not numbers), or a ratio that is neither a
// number nor "inf".
BaselineDoc parse_baseline_text(const std::string& text, const std::string& source);

}  // namespace ttr
