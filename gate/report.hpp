// Reports of checks against the error model (docs/reports.md): the versioned JSON
// document (docs/schemas/report.schema.json), JUnit XML for CI systems, the short
// table `ttrcheck check` prints, and reading a report back for baselines. Shared
// by `check` and `gate`. Nothing time-dependent goes into a report, so the same
// inputs and seed give byte-identical files.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "gate/error_model.hpp"
#include "gate/report_read.hpp"  // parse_report (and the schema constants)

namespace ttr {

// A check with its id "<layer>/<form>/<dtype>/<case or file>", unique in a report.
using NamedCheck = std::pair<std::string, CheckResult>;

std::string check_id(const CheckResult& r, const std::string& case_name);

// A row's place as the tables print it: "(0,4,1)"; a state row "(0,-,1)"; varlen
// "(0,104,1) seq 2 t 4", "(2,-,1) seq 2".
std::string location_str(const Location& l);

// The note of a failing tensor whose worst row is bounded by the subnormal floor alone
// (TensorVerdict::worst_at_floor): "dg fails at (0,0,0), where the exact value and the
// model are 0: …"; "" for any other tensor. The check table prints it below the rows,
// `check --explain-policy` beside each failing policy.
std::string floor_line(const TensorVerdict& t);

// A double as JSON: finite values as numbers, the others as the strings "inf",
// "-inf", "nan" (JSON has no such numbers; the schema allows exactly these).
nlohmann::json json_number(double x);

nlohmann::json check_json(const std::string& id, const CheckResult& r);
// A range note (gate/range.hpp) as the report's `range` object.
nlohmann::json range_json(const RangeNote& note, bool excused);
// The oracle note (tier, estimated own error, escalated slices) as the report's
// `oracle` object (null when the check has none), and as one line of text.
nlohmann::json oracle_json(const OracleNote& note);
std::string oracle_line(const OracleNote& note);
// "pass", "fail", or "range" (non-finite failures excused as a range finding).
const char* verdict_name(const CheckResult& r);

// `kind`: "check" (ttrcheck check) or "gate" (ttrcheck gate); anything else is a
// programming error (std::invalid_argument). The top-level threshold is the
// checks' common one (kRatioThreshold when there are none, null if they differ).
nlohmann::json report_json(const std::string& kind, const std::vector<NamedCheck>& checks);

// Every JSON file we write: two-space indentation, a final newline, invalid UTF-8
// in user-supplied names (file names) replaced rather than failing.
std::string dump_json(const nlohmann::json& doc);

// Atomic writers (temporary beside the target, then rename): InputError
// "<path>: cannot write: <reason>" and nothing left behind on failure.
void write_report(const std::string& path, const nlohmann::json& doc);
void write_junit(const std::string& path, const std::string& xml);

// One <testcase> per check (classname: the layer, name: the id); a failing check
// carries a <failure> naming each failing tensor, its ratio and its location.
std::string junit_xml(const std::string& suite_name, const std::vector<NamedCheck>& checks);

// One fixed-width line per output tensor: check id, tensor, max abs error, max
// ratio, worst (b,t,h) (the first non-finite failure where there is one), NaN and
// Inf counts, PASS/FAIL/absent; then a verdict line.
void print_table(std::FILE* out, const std::vector<NamedCheck>& checks);

}  // namespace ttr
