#include "gate/report_read.hpp"

#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <tuple>

#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"

namespace ttr {
namespace {

using nlohmann::json;

// `where_` by value as a view: GCC 13's -Wdangling-reference flags a returned
// reference whenever a temporary std::string is bound to a reference parameter.
const json& field(const json& obj, const char* key, json::value_t type, std::string_view where_,
                  const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw InputError(fmt::format("{}: {} has no field '{}'", path, where_, key));
  const bool ok = type == json::value_t::number_float ? it->is_number() : it->type() == type;
  if (!ok) throw InputError(fmt::format("{}: {} field '{}' has the wrong type ({})", path, where_, key, it->type_name()));
  return *it;
}

// docs/schemas/report.schema.json: a ratio is a number >= 0, "inf" or "nan". The
// writer never emits a negative one; a reader that took "-inf" or -1.5 would let
// a hand-edited report record a "ratio" no growth rule can judge.
double ratio_from_json(const json& v, const std::string& where_, const std::string& path) {
  if (v.is_number() && v.get<double>() >= 0.0) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "nan") return NAN;
  }
  throw InputError(fmt::format("{}: {} field 'max_ratio' is {}; expected a number >= 0, \"inf\" or \"nan\"", path,
                               where_, v.dump()));
}

// The message of a nlohmann exception without its "[json.exception.<kind>.<id>] " prefix.
std::string json_message(const json::exception& e) {
  const std::string what = e.what();
  const auto cut = what.find("] ");
  return cut == std::string::npos ? what : what.substr(cut + 2);
}

// docs/schemas/baseline.schema.json: a number >= 0 or "inf".
double baseline_ratio(const json& v, const std::string& path, const std::string& where_) {
  if (v.is_number() && v.get<double>() >= 0.0) return v.get<double>();
  if (v == "inf") return INFINITY;
  throw InputError(fmt::format("{}: {}: ratio {} is not a number >= 0 or \"inf\"", path, where_, v.dump()));
}

}  // namespace

std::vector<ReportedCheck> parse_report(const std::string& path) { return parse_report_text(io::read_text_file(path), path); }

std::vector<ReportedCheck> parse_report_text(const std::string& text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond double's range (1e999),
    // which nlohmann does not count as a parse error.
    throw InputError(fmt::format("{}: not valid JSON: {}", path, json_message(e)));
  }
  if (!doc.is_object()) throw InputError(fmt::format("{}: not a ttrcheck report (not a JSON object)", path));
  const auto schema = doc.find("schema");
  if (schema == doc.end() || *schema != kReportSchema)
    throw InputError(fmt::format("{}: not a ttrcheck report (field 'schema' is not \"{}\")", path, kReportSchema));
  const json& version = field(doc, "schema_version", json::value_t::number_unsigned, "the report", path);
  if (version != kReportSchemaVersion)
    throw InputError(fmt::format("{}: report schema_version {} is not supported (this ttrcheck reads {})", path,
                                 version.dump(), kReportSchemaVersion));
  std::vector<ReportedCheck> out;
  std::set<std::string> ids;
  for (const json& c : field(doc, "checks", json::value_t::array, "the report", path)) {
    const std::string at = fmt::format("check #{}", out.size() + 1);
    if (!c.is_object()) throw InputError(fmt::format("{}: {} is not an object", path, at));
    ReportedCheck rc;
    rc.id = field(c, "id", json::value_t::string, at, path).get<std::string>();
    if (!ids.insert(rc.id).second) throw InputError(fmt::format("{}: check id '{}' appears twice", path, rc.id));
    const std::string in = fmt::format("check '{}'", rc.id);
    rc.pass = field(c, "pass", json::value_t::boolean, in, path).get<bool>();
    for (const json& t : field(c, "tensors", json::value_t::array, in, path)) {
      if (!t.is_object()) throw InputError(fmt::format("{}: {} has a tensor entry that is not an object", path, in));
      ReportedTensor rt;
      rt.name = field(t, "name", json::value_t::string, in + " tensor", path).get<std::string>();
      const std::string tn = fmt::format("check '{}' tensor '{}'", rc.id, rt.name);
      rt.present = field(t, "present", json::value_t::boolean, tn, path).get<bool>();
      const auto mr = t.find("max_ratio");
      if (mr == t.end()) throw InputError(fmt::format("{}: {} has no field 'max_ratio'", path, tn));
      rt.max_ratio = ratio_from_json(*mr, tn, path);
      rt.pass = field(t, "pass", json::value_t::boolean, tn, path).get<bool>();
      rc.tensors.push_back(std::move(rt));
    }
    out.push_back(std::move(rc));
  }
  return out;
}

BaselineDoc parse_baseline_text(const std::string& text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON (byte {})", path, e.byte));
  } catch (const json::exception& e) {  // out_of_range: a number beyond double's range (1e999)
    throw InputError(fmt::format("{}: not valid JSON: {}", path, json_message(e)));
  }
  if (!doc.is_object() || doc.value("schema", json()) != kBaselineSchema)
    throw InputError(fmt::format("{}: not a ttrcheck baseline (field 'schema' is not \"{}\")", path, kBaselineSchema));
  if (doc.value("schema_version", json()) != kBaselineSchemaVersion)
    throw InputError(fmt::format("{}: baseline schema_version {} is not supported (this ttrcheck reads {})", path,
                                 doc.value("schema_version", json()).dump(), kBaselineSchemaVersion));
  BaselineDoc b;
  for (auto [key, dst, min] : {std::tuple{"factor", &b.factor, 1.0}, std::tuple{"floor", &b.floor, 0.0}}) {
    const json v = doc.value(key, json());
    if (!v.is_number() || !(v.get<double>() >= min))
      throw InputError(fmt::format("{}: field '{}' must be a number >= {}", path, key, min));
    *dst = v.get<double>();
  }
  const json checks = doc.value("checks", json());
  if (!checks.is_object()) throw InputError(fmt::format("{}: field 'checks' must be an object", path));
  for (const auto& [id, tensors] : checks.items()) {
    if (!tensors.is_object()) throw InputError(fmt::format("{}: check '{}' must map tensor names to ratios", path, id));
    auto& row = b.ratios[id];
    for (const auto& [name, v] : tensors.items())
      row[name] = baseline_ratio(v, path, fmt::format("check '{}' tensor '{}'", id, name));
  }
  return b;
}

}  // namespace ttr
