// Fuzz harness: the report reader behind `ttrcheck baseline record|compare`
// (gate/report_read.hpp: parse_report_text).
//
// Invariants of an accepted report: check ids are unique (the reader promises
// it; baselines key on them); a ratio is >= 0, +inf or NaN, as the schema
// (docs/schemas/report.schema.json) says.
#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz/harness/fuzz_support.hpp"
#include "oracles/error.hpp"
#include "gate/report_read.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<ttr::ReportedCheck> checks;
  try {
    checks = ttr::parse_report_text(text, "fuzz.report.json");
  } catch (const ttr::InputError&) {
    return 0;
  }
  std::set<std::string> ids;
  for (const auto& c : checks) {
    TTR_FUZZ_REQUIRE(ids.insert(c.id).second, "report reader passed a repeated check id '" + c.id + "'");
    for (const auto& t : c.tensors)
      // docs/schemas/report.schema.json: a ratio is a number >= 0, "inf" or "nan".
      TTR_FUZZ_REQUIRE(std::isnan(t.max_ratio) || t.max_ratio >= 0.0,
                       "report reader passed a negative ratio for " + c.id + " " + t.name);
  }
  return 0;
}
