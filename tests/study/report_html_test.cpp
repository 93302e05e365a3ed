// `ttrcheck report DIR --html`: the page from hand-written reports and baselines
// (verdicts, histograms, worst checks, the trend over baselines), bad input (exit 2,
// nothing written), and one line when python3/matplotlib are missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <vector>

#include "tests/study/study_support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace ttr::test;

std::string check_json(const std::string& id, double ratio, bool pass) {
  const std::string r = ratio < 0 ? "\"inf\"" : std::to_string(ratio);
  return R"({"id": ")" + id + R"(", "layer": "gka", "dtype": "bf16", "model_form": "chunk", "chunk_size": 16,
    "threshold": 8.0, "pass": )" + (pass ? "true" : "false") + R"(, "tensors": [
    {"name": "o", "present": true, "elements": 64, "rows": 4, "max_abs_error": 0.001, "max_ratio": )" + r + R"(,
     "worst": {"b": 0, "t": 3, "h": 1}, "nan_count": 0, "inf_count": 0, "nonfinite_failures": 0,
     "first_nonfinite": null, "pass": )" + (pass ? "true" : "false") + "}]}";
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

fs::path report_dir(const TempDir& tmp) {
  const fs::path d = tmp.path() / "gate";
  fs::create_directories(d);
  write(d / "report.json", R"({"schema": "ttrcheck-report", "schema_version": 1, "kind": "gate", "tool_version": "0.1.0",
    "threshold": 8.0, "pass": false, "checks": [)" + check_json("gka/chunk/bf16/small/0", 1.5, true) + ", " +
                               check_json("kda/chunk/bf16/small/0", 12.25, false) + "]}\n");
  auto baseline = [&](const std::string& name, double a, double b) {
    write(tmp.path() / name, R"({"schema": "ttrcheck-baseline", "schema_version": 1, "tool_version": "0.1.0", "factor": 2.0, "floor": 0.05,
      "checks": {"gka/chunk/bf16/small/0": {"o": )" + std::to_string(a) + R"(}, "kda/chunk/bf16/small/0": {"o": )" +
                                     std::to_string(b) + "}}}\n");
  };
  baseline("b1.json", 1.0, 2.0);
  baseline("b2.json", 1.2, 6.0);
  return d;
}

TEST(ReportHtml, VerdictsHistogramsWorstRowsAndTrend) {
  TempDir tmp;
  const fs::path d = report_dir(tmp);
  const fs::path page = tmp.path() / "page.html";
  const CliResult r = run_cli({"report", d.string(), "--html", "--out", page.string(), "--baseline", tmp / "b1.json",
                               "--baseline", tmp / "b2.json"});
  if (r.exit_code == 2 && r.err.find("needs python3 with matplotlib") != std::string::npos) {
    EXPECT_FALSE(fs::exists(page));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    GTEST_SKIP() << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 report file(s), 2 checks, 2 baseline(s)"), std::string::npos) << r.out;
  const std::string html = slurp_file(page);
  EXPECT_NE(html.find("kda/chunk/bf16/small/0"), std::string::npos);
  EXPECT_NE(html.find("12.2"), std::string::npos) << "the failing ratio in the worst-checks table";
  EXPECT_NE(html.find("class='fail'>FAIL"), std::string::npos);
  EXPECT_NE(html.find("Trend over baselines"), std::string::npos);
  // kda's ratio 2 -> 6 -> 12.25: the largest growth (6.1x), listed first.
  EXPECT_LT(html.find("<td>kda/chunk/bf16/small/0</td><td>6.12</td>"), html.find("<td>gka/chunk/bf16/small/0</td><td>1.5</td>"));
  std::size_t svgs = 0;
  for (std::size_t p = 0; (p = html.find("<svg", p)) != std::string::npos; ++p) ++svgs;
  EXPECT_EQ(svgs, 2u) << "ratio histograms and the trend, inline";
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
}

// A fuzz campaign as fuzz/reproducer.cpp writes it: campaign.json and a note per
// finding. Two campaigns (one per target) in subdirectories of the report directory.
void write_campaign(const fs::path& d, const std::string& target, int cases, int nonfinite,
                    const std::vector<std::tuple<std::string, std::string, std::string>>& findings) {
  fs::create_directories(d);
  std::string list;
  for (const auto& [stem, kind, r] : findings) {
    list += (list.empty() ? "\"" : ", \"") + stem + "\"";
    const bool nan = r == "\"inf\"";
    write(d / (stem + ".json"), R"({"tool_version": "0.1.0", "finding": ")" + stem + R"(", "kind": ")" + kind +
                                    R"(", "layer": "gka", "target": ")" + target + R"(", "case": 17, "family": "spiky_keys",
      "original": {"T": 256}, "minimised": {"T": 5},
      "check": {"pass": false, "threshold": 8.0, "tensors": [
        {"name": "o", "present": true, "max_ratio": )" + r + R"(, "worst": {"b": 0, "t": 4, "h": 1},
         "nan_count": )" + (nan ? "3" : "0") + R"(, "inf_count": 0, "nonfinite_failures": )" + (nan ? "3" : "0") +
                                    (nan ? R"(, "first_nonfinite": {"b": 0, "t": 2, "h": 1})" : "") + R"(, "pass": false},
        {"name": "ht", "present": false}]},
      "replay": {"check": "ttrcheck check --layer gka --in )" + stem + R"(.inputs.safetensors", "expected_exit": 1}})");
  }
  write(d / "campaign.json", R"({"tool_version": "0.1.0", "layer": "gka", "target": ")" + target +
                                 R"(", "form": "chunk", "chunk_size": 16, "mutant": "none", "objective": "nan", "seed": 1,
    "budget": ")" + std::to_string(cases) + R"(cases", "cases": )" + std::to_string(cases) +
                                 R"(, "nonfinite_cases": )" + std::to_string(nonfinite) +
                                 R"(, "range_cases": 0, "strict_range": false, "oracle_nonfinite_cases": 0,
    "best_ratio_screened": 2.5, "best_ratio_confirmed": -1, "first_finding_case": 17, "findings": [)" + list +
                                 R"(], "duplicates": [{"case": 40, "kind": "nonfinite", "same_as": "x"}]})");
}

TEST(ReportHtml, FuzzCampaignsAsTables) {
  TempDir tmp;
  const fs::path d = tmp.path() / "fuzz";
  write_campaign(d / "cpu-bf16", "cpu:bf16", 300, 2,
                 {{"gka.bf16.chunk.nonfinite.0", "nonfinite", "\"inf\""}, {"gka.bf16.chunk.ratio.0", "ratio", "12.75"}});
  write_campaign(d / "cpu-fp32", "cpu:fp32", 200, 0, {});
  const fs::path page = tmp.path() / "fuzz.html";
  const CliResult r = run_cli({"report", d.string(), "--html", "--out", page.string()});
  if (r.exit_code == 2 && r.err.find("needs python3 with matplotlib") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 fuzz campaign(s)"), std::string::npos) << r.out;
  const std::string html = slurp_file(page);
  // Per-target counts: cases, NaN/Inf cases, finding kinds, duplicates, verdict.
  EXPECT_NE(html.find("<tr><td>cpu:bf16</td><td>gka</td><td>1</td><td>300</td><td>2</td><td>0</td><td>0</td>"
                      "<td>2.5 / </td><td>1 / 1 / 0 / 0</td><td>1</td><td class='fail'>FAIL</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr><td>cpu:fp32</td><td>gka</td><td>1</td><td>200</td><td>0</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class='pass'>PASS</td></tr>"), std::string::npos) << "cpu:fp32 has no findings";
  // Findings: the worst tensor, its first failing row, the minimisation, the replay command.
  EXPECT_NE(html.find("cpu-bf16/gka.bf16.chunk.nonfinite.0"), std::string::npos);
  EXPECT_NE(html.find("<td>o</td><td>inf</td><td>(0,2,1)</td><td>3</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>o</td><td>12.8</td><td>(0,4,1)</td><td>0</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("256 &rarr; 5"), std::string::npos);
  EXPECT_NE(html.find("<li>gka.bf16.chunk.ratio.0: <code>ttrcheck check --layer gka --in "
                      "gka.bf16.chunk.ratio.0.inputs.safetensors</code></li>"),
            std::string::npos);
  // The ratio histogram (one finite ratio, one NaN/Inf tensor), inline; no raw JSON dump.
  EXPECT_NE(html.find("cpu:bf16: 2 tensors, 1 NaN/Inf"), std::string::npos);
  std::size_t svgs = 0;
  for (std::size_t p = 0; (p = html.find("<svg", p)) != std::string::npos; ++p) ++svgs;
  EXPECT_EQ(svgs, 1u);
  EXPECT_EQ(html.find("\"tool_version\""), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);

  // A campaign.json naming a finding without its note: exit 2, the note named, nothing written.
  fs::remove(d / "cpu-bf16" / "gka.bf16.chunk.ratio.0.json");
  fs::remove(page);
  const CliResult bad = run_cli({"report", d.string(), "--html", "--out", page.string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("gka.bf16.chunk.ratio.0.json"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(page));
}

TEST(ReportHtml, BadInputWritesNothing) {
  TempDir tmp;
  const fs::path empty = tmp.path() / "empty";
  fs::create_directories(empty);
  CliResult r = run_cli({"report", empty.string(), "--html"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no ttrcheck report"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(empty / "report.html"));
  const fs::path d = report_dir(tmp);
  write(d / "broken.json", R"({"schema": "ttrcheck-report", "schema_version": 1, "checks": [{"id": 3}]})");
  r = run_cli({"report", d.string(), "--html"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("broken.json"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "report.html"));
  fs::remove(d / "broken.json");
  r = run_cli({"report", d.string(), "--html", "--baseline", tmp / "missing.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  r = run_cli({"report", d.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--html"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "report.html"));
}

TEST(ReportHtml, WithoutPythonOneLineAndNothingWritten) {
  TempDir tmp;
  const fs::path d = report_dir(tmp);
  ::setenv("TTRCHECK_PYTHON", "/nonexistent/python3", 1);
  const CliResult r = run_cli({"report", d.string(), "--html"});
  ::unsetenv("TTRCHECK_PYTHON");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "ttrcheck: error: report --html needs python3 with matplotlib: python3 was not found\n");
  EXPECT_FALSE(fs::exists(d / "report.html"));
}

}  // namespace
