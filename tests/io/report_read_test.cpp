// Tests of the report and baseline readers (gate/report_read.hpp), on texts
// written here by hand; the fuzz harnesses (fuzz/harness/report_fuzz.cpp,
// baseline_fuzz.cpp) hold them to the same invariants on mutated input.
#include "gate/report_read.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "oracles/error.hpp"

namespace {

using ttr::InputError;

std::string report_with_ratio(const std::string& ratio) {
  return R"({"schema": "ttrcheck-report", "schema_version": 1, "checks": [
    {"id": "kda/chunk/bf16/c", "pass": true, "tensors": [
      {"name": "o", "present": true, "max_ratio": )" + ratio + R"(, "pass": true}]}]})";
}

std::string baseline_with(const std::string& factor, const std::string& ratio) {
  return R"({"schema": "ttrcheck-baseline", "schema_version": 1, "factor": )" + factor +
         R"(, "floor": 0.05, "checks": {"kda/chunk/bf16/c": {"o": )" + ratio + "}}}";
}

// The message must start with the source and contain `part`.
void expect_rejected(const std::string& what, auto parse, const std::string& part) {
  try {
    parse();
    ADD_FAILURE() << "accepted: " << what;
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("src.json: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

TEST(ReportRead, ReadsRatiosAsWritten) {
  const auto checks = ttr::parse_report_text(report_with_ratio("0.25"), "src.json");
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].id, "kda/chunk/bf16/c");
  ASSERT_EQ(checks[0].tensors.size(), 1u);
  EXPECT_EQ(checks[0].tensors[0].max_ratio, 0.25);
  EXPECT_TRUE(std::isinf(ttr::parse_report_text(report_with_ratio("\"inf\""), "src.json")[0].tensors[0].max_ratio));
  EXPECT_TRUE(std::isnan(ttr::parse_report_text(report_with_ratio("\"nan\""), "src.json")[0].tensors[0].max_ratio));
}

// Regressions found by the report harness: ratios the schema forbids, and a
// number beyond double's range, which escaped as nlohmann's out_of_range.
TEST(ReportRead, RejectsNegativeRatiosAndOverflowingNumbers) {
  for (const std::string r : {"-1.5", "\"-inf\"", "-0.000001"})
    expect_rejected(r, [&] { ttr::parse_report_text(report_with_ratio(r), "src.json"); }, "expected a number >= 0");
  expect_rejected("1e999", [&] { ttr::parse_report_text(report_with_ratio("1e999"), "src.json"); },
                  "not valid JSON: number overflow");
}

TEST(BaselineRead, ReadsFactorFloorAndRatios) {
  const ttr::BaselineDoc b = ttr::parse_baseline_text(baseline_with("3", "\"inf\""), "src.json");
  EXPECT_EQ(b.factor, 3.0);
  EXPECT_EQ(b.floor, 0.05);
  EXPECT_TRUE(std::isinf(b.ratios.at("kda/chunk/bf16/c").at("o")));
  EXPECT_EQ(ttr::parse_baseline_text(baseline_with("1", "0"), "src.json").ratios.at("kda/chunk/bf16/c").at("o"), 0.0);
}

// Regressions found by the baseline harness.
TEST(BaselineRead, RejectsNegativeRatiosAndOverflowingNumbers) {
  expect_rejected("-2", [&] { ttr::parse_baseline_text(baseline_with("2", "-2"), "src.json"); },
                  "is not a number >= 0");
  expect_rejected("factor 1e999", [&] { ttr::parse_baseline_text(baseline_with("1e999", "1"), "src.json"); },
                  "not valid JSON: number overflow");
  expect_rejected("ratio -1e999", [&] { ttr::parse_baseline_text(baseline_with("2", "-1e999"), "src.json"); },
                  "not valid JSON: number overflow");
}

}  // namespace
