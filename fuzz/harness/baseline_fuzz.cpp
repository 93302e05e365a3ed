// Fuzz harness: the baseline reader behind `ttrcheck baseline compare`
// (gate/report_read.hpp: parse_baseline_text).
//
// Invariants of an accepted baseline: factor >= 1 and floor >= 0 (finite: the
// growth limit factor × max(ratio, floor) must mean something), and no recorded
// ratio is NaN or negative (docs/schemas/baseline.schema.json: a number >= 0 or "inf").
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz/harness/fuzz_support.hpp"
#include "oracles/error.hpp"
#include "gate/report_read.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ttr::BaselineDoc b;
  try {
    b = ttr::parse_baseline_text(text, "fuzz.baseline.json");
  } catch (const ttr::InputError&) {
    return 0;
  }
  TTR_FUZZ_REQUIRE(std::isfinite(b.factor) && b.factor >= 1.0, "baseline reader passed factor < 1");
  TTR_FUZZ_REQUIRE(std::isfinite(b.floor) && b.floor >= 0.0, "baseline reader passed floor < 0");
  for (const auto& [id, row] : b.ratios)
    for (const auto& [name, r] : row)  // docs/schemas/baseline.schema.json: a number >= 0 or "inf"
      TTR_FUZZ_REQUIRE(r >= 0.0, "baseline reader passed a NaN or negative ratio for " + id + " " + name);
  return 0;
}
