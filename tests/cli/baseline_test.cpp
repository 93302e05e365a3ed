// `ttrcheck baseline record|compare`: the same report passes; a ratio grown 3x
// fails naming the check even under the threshold; growth below the floor does
// not; missing checks fail, new ones are listed; malformed reports exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/cli.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ttr::test::CliResult;
using ttr::test::entries_of;
using ttr::test::run_cli;
using ttr::test::TempDir;

const std::string kId = "gated_delta_rule/chunk/bf16/tiny.basic";

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// One real report of `ttrcheck check` (the chunk form in bf16 on tiny inputs),
// the template the tests edit.
class CliBaseline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const std::string vec = (dir_->path() / "vectors").string();
    ASSERT_EQ(run_cli({"vectors", "--layer", "gated_delta_rule", "--suite", "tiny", "--seed", "3", "--out", vec})
                  .exit_code,
              0);
    const std::string in = vec + "/gated_delta_rule.tiny.basic.inputs.safetensors";
    const std::string cand = *dir_ / "cand.safetensors";
    ASSERT_EQ(run_cli({"run", "--layer", "gated_delta_rule", "--in", in, "--out", cand, "--arith", "bf16", "--form",
                       "chunk"})
                  .exit_code,
              0);
    const CliResult r = run_cli({"check", "--layer", "gated_delta_rule", "--in", in, "--candidate", cand, "--oracle",
                                 vec + "/gated_delta_rule.tiny.basic.oracle.safetensors", "--report",
                                 *dir_ / "report.json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    report_ = new json(json::parse(slurp(*dir_ / "report.json")));
  }
  static void TearDownTestSuite() {
    delete report_;
    delete dir_;
  }

  // The real report with o's ratio set to `ratio` (and the id renamed when asked).
  static json report_with(double ratio, const std::string& id = kId) {
    json r = *report_;
    r["checks"][0]["tensors"][0]["max_ratio"] = ratio;
    r["checks"][0]["id"] = id;
    return r;
  }
  std::string save(const json& doc, const std::string& name) {
    write(work_ / name, doc.dump(2));
    return work_ / name;
  }
  std::string record(const std::vector<std::string>& reports, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"baseline", "record", "--out", work_ / "baseline.json"};
    for (const auto& r : reports) args.insert(args.end(), {"--report", r});
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult res = run_cli(args);
    EXPECT_EQ(res.exit_code, 0) << res.out << res.err;
    return work_ / "baseline.json";
  }
  CliResult compare(const std::string& baseline, const std::vector<std::string>& reports,
                    std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"baseline", "compare", "--baseline", baseline};
    for (const auto& r : reports) args.insert(args.end(), {"--report", r});
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  }

  TempDir work_;
  static json* report_;

 private:
  static TempDir* dir_;
};
TempDir* CliBaseline::dir_ = nullptr;
json* CliBaseline::report_ = nullptr;

TEST_F(CliBaseline, SameReportPasses) {
  const std::string rep = save(*report_, "r.json");
  const CliResult r = compare(record({rep}), {rep});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 checks compared, 0 regressions, 0 missing, 0 new: PASS"), std::string::npos) << r.out;
  const json b = json::parse(slurp(work_ / "baseline.json"));
  EXPECT_EQ(b["schema"], "ttrcheck-baseline");
  EXPECT_EQ(b["factor"], 2.0);
  EXPECT_EQ(b["floor"], 0.05);
  EXPECT_EQ(b["checks"][kId]["o"], (*report_)["checks"][0]["tensors"][0]["max_ratio"]);
}

TEST_F(CliBaseline, RatioGrownThreeTimesFailsNamingTheCheck) {
  const std::string base = record({save(report_with(0.5), "old.json")});
  // 1.5 is still far under the threshold 8: the report itself passes.
  const CliResult r = compare(base, {save(report_with(1.5), "new.json")});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("regression: " + kId + " o: ratio 0.5 -> 1.5 (limit 1 = 2 x max(0.5, floor 0.05))"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
  // A larger factor, given on the command line or recorded, lets it pass.
  EXPECT_EQ(compare(base, {work_ / "new.json"}, {"--factor", "4"}).exit_code, 0);
  EXPECT_EQ(compare(record({work_ / "old.json"}, {"--factor", "4"}), {work_ / "new.json"}).exit_code, 0);
}

TEST_F(CliBaseline, GrowthBelowTheFloorPasses) {
  // 0.01 -> 0.03 is threefold growth of noise: judged against 2 x 0.05.
  const std::string base = record({save(report_with(0.01), "old.json")});
  EXPECT_EQ(compare(base, {save(report_with(0.03), "new.json")}).exit_code, 0);
  EXPECT_EQ(compare(base, {save(report_with(0.11), "worse.json")}).exit_code, 1);
}

TEST_F(CliBaseline, NonFiniteRatioIsARegression) {
  const std::string base = record({save(report_with(0.5), "old.json")});
  json nan = report_with(0.5);
  nan["checks"][0]["tensors"][0]["max_ratio"] = "inf";
  const CliResult r = compare(base, {save(nan, "nan.json")});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("regression: " + kId + " o: ratio 0.5 -> inf"), std::string::npos) << r.out;
}

TEST_F(CliBaseline, MissingCheckFailsAndNewCheckIsListed) {
  const std::string a = save(report_with(0.5), "a.json");
  const std::string b = save(report_with(0.5, "gated_delta_rule/chunk/bf16/tiny.other"), "b.json");
  const std::string base = record({a, b});
  const CliResult missing = compare(base, {a});
  EXPECT_EQ(missing.exit_code, 1) << missing.out;
  EXPECT_NE(missing.out.find("missing: gated_delta_rule/chunk/bf16/tiny.other: in the baseline, not in the report"),
            std::string::npos)
      << missing.out;

  const std::string only_a = record({a});
  const CliResult fresh = compare(only_a, {a, b});
  EXPECT_EQ(fresh.exit_code, 0) << fresh.out;
  EXPECT_NE(fresh.out.find("new: gated_delta_rule/chunk/bf16/tiny.other: not in the baseline"), std::string::npos)
      << fresh.out;
}

TEST_F(CliBaseline, TensorNoLongerReturnedIsMissing) {
  const std::string base = record({save(*report_, "r.json")});
  json r = *report_;
  r["checks"][0]["tensors"][1]["present"] = false;
  const CliResult res = compare(base, {save(r, "no_ht.json")});
  EXPECT_EQ(res.exit_code, 1) << res.out;
  EXPECT_NE(res.out.find("missing: " + kId + " ht: in the baseline, absent from the report"), std::string::npos)
      << res.out;
}

TEST_F(CliBaseline, MalformedReportsExit2WithOneLineAndNoBaseline) {
  const std::string out = (work_.path() / "out" / "baseline.json").string();
  fs::create_directories(work_.path() / "out");
  json wrong_version = *report_;
  wrong_version["schema_version"] = 99;
  json no_ratio = *report_;
  no_ratio["checks"][0]["tensors"][0].erase("max_ratio");
  json twice = *report_;
  twice["checks"].push_back(twice["checks"][0]);
  json negative = *report_;
  negative["checks"][0]["tensors"][0]["max_ratio"] = -1.5;
  json minus_inf = *report_;
  minus_inf["checks"][0]["tensors"][0]["max_ratio"] = "-inf";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{ not json", "not valid JSON"},
      {"[]", "not a ttrcheck report"},
      {wrong_version.dump(), "schema_version 99 is not supported"},
      {no_ratio.dump(), "has no field 'max_ratio'"},
      {twice.dump(), "appears twice"},
      // Found by fuzz/harness/report_fuzz.cpp: a number beyond double's range is
      // nlohmann's out_of_range, not a parse_error, and ended as "internal error"
      // (exit 3); negative ratios and "-inf" were accepted against the schema.
      {R"({"schema": "ttrcheck-report", "schema_version": 1, "checks": [], "x": 1e999})", "number overflow"},
      {negative.dump(), "expected a number >= 0"},
      {minus_inf.dump(), "expected a number >= 0"}};
  for (const auto& [text, message] : cases) {
    const std::string rep = work_ / "bad.json";
    write(rep, text);
    const CliResult r = run_cli({"baseline", "record", "--report", rep, "--out", out});
    EXPECT_EQ(r.exit_code, 2) << text;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(rep + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_TRUE(entries_of(work_.path() / "out").empty()) << text;
  }
  const CliResult r = compare(work_ / "bad.json", {save(*report_, "r.json")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a ttrcheck baseline"), std::string::npos) << r.err;
}

// Found by fuzz/harness/baseline_fuzz.cpp: a baseline whose factor (or any
// number) overflows double ended as "internal error" (exit 3); a negative
// recorded ratio was accepted against docs/schemas/baseline.schema.json.
TEST_F(CliBaseline, MalformedBaselineNumbersExit2WithOneLine) {
  const std::string rep = save(*report_, "r.json");
  const std::string base = record({rep});
  json good = json::parse(slurp(base));
  json negative = good;
  negative["checks"][kId]["o"] = -2.0;
  std::string huge = good.dump();  // compact: ..."factor":2.0,...
  const auto at = huge.find("\"factor\":");
  ASSERT_NE(at, std::string::npos) << huge;
  huge.replace(at, huge.find(',', at) - at, "\"factor\":1e999");
  ASSERT_NE(huge.find("1e999"), std::string::npos) << huge;
  const std::vector<std::pair<std::string, std::string>> cases = {{huge, "number overflow"},
                                                                  {negative.dump(), "is not a number >= 0"}};
  for (const auto& [text, message] : cases) {
    const std::string bad = work_ / "bad_baseline.json";
    write(bad, text);
    const CliResult r = compare(bad, {rep});
    EXPECT_EQ(r.exit_code, 2) << text << "\n" << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_NE(r.err.find(bad + ": "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

TEST_F(CliBaseline, SameCheckInTwoReportsExits2) {
  const std::string a = save(*report_, "a.json"), b = save(*report_, "b.json");
  const CliResult r = run_cli({"baseline", "record", "--report", a, "--report", b, "--out", work_ / "x.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("also appears in"), std::string::npos) << r.err;
}

}  // namespace
