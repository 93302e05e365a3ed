// `ttrcheck study`: the list, bad usage (exit 2, nothing written), the files a
// study writes, determinism across thread counts, and the plotting step (figures
// and summary.html, or one line saying why not).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/study/study_support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace ttr::test;

TEST(StudyCli, ListNamesEveryStudyWithItsClaim) {
  const CliResult r = run_cli({"study", "--list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"gka-remark1", "gka-regularisation", "sweep-length", "sweep-chunk", "sweep-dtype",
                           "sweep-keys", "sweep-decay"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  EXPECT_NE(r.out.find("GKA Remark 1"), std::string::npos);
}

TEST(StudyCli, BadUsageWritesNothing) {
  TempDir tmp;
  const fs::path out = tmp.path() / "out";
  CliResult r = run_cli({"study", "no-such-study", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown study 'no-such-study'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gka-remark1"), std::string::npos) << "lists the known studies: " << r.err;
  EXPECT_FALSE(fs::exists(out));
  r = run_cli({"study", "gka-remark1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  // --out naming an existing regular file.
  const fs::path file = tmp.path() / "file";
  std::ofstream(file) << "x";
  r = run_cli({"study", "gka-remark1", "--quick", "--out", file.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(slurp_file(file), "x");
  r = run_cli({"study", "gka-remark1", "--seed", "-1", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(fs::exists(out));
}

TEST(StudyCli, WritesDataConfigurationAndSummary) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "remark1";
  const CliResult r = run_quick_study("gka-remark1", dir, {"--no-plots", "--seed", "7"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json doc = nlohmann::json::parse(slurp_file(dir / "study.json"));
  EXPECT_EQ(doc["schema"], "ttrcheck-study");
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["study"], "gka-remark1");
  EXPECT_EQ(doc["seed"], 7u);
  EXPECT_EQ(doc["quick"], true);
  EXPECT_FALSE(doc["tool_version"].get<std::string>().empty());
  EXPECT_EQ(doc["config"]["a"], 0.02);
  ASSERT_EQ(doc["tables"].size(), 3u);
  for (const auto& t : doc["tables"]) {
    const Csv csv = read_csv(dir / t["file"].get<std::string>());
    EXPECT_EQ(csv.columns, t["columns"].get<std::vector<std::string>>());
    EXPECT_EQ(csv.rows.size(), t["rows"].get<std::size_t>());
    EXPECT_GT(csv.rows.size(), 0u);
  }
  EXPECT_FALSE(doc["figures"].empty());
  EXPECT_FALSE(doc["claims"].empty());
  const std::string md = slurp_file(dir / "summary.md");
  EXPECT_NE(md.find("GKA Remark 1"), std::string::npos);
  EXPECT_NE(md.find("| claim |"), std::string::npos);
  EXPECT_NE(r.out.find("--no-plots"), std::string::npos) << "says the figures were not drawn";
}

TEST(StudyCli, SameSeedSameBytesWhateverTheThreads) {
  TempDir tmp;
  ASSERT_EQ(run_cli({"study", "gka-remark1", "--quick", "--no-plots", "--threads", "1", "--out", tmp / "a"}).exit_code, 0);
  ASSERT_EQ(run_cli({"study", "gka-remark1", "--quick", "--no-plots", "--threads", "3", "--out", tmp / "b"}).exit_code, 0);
  ASSERT_EQ(run_cli({"study", "gka-remark1", "--quick", "--no-plots", "--seed", "1", "--out", tmp / "c"}).exit_code, 0);
  for (const char* f : {"residuals.csv", "weights.csv", "remark1.csv", "study.json", "summary.md"})
    EXPECT_EQ(slurp_file(tmp.path() / "a" / f), slurp_file(tmp.path() / "b" / f)) << f;
  EXPECT_NE(slurp_file(tmp.path() / "a" / "residuals.csv"), slurp_file(tmp.path() / "c" / "residuals.csv"))
      << "another seed, other inputs";
}

// With python3 and matplotlib: PNG and SVG figures and a self-contained
// summary.html (inline SVG, no external reference). Without: one line, exit 0.
TEST(StudyCli, FiguresOrOneLineSayingWhyNot) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "s";
  const CliResult r = run_quick_study("gka-remark1", dir, {});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  if (r.out.find("figures: not drawn:") != std::string::npos) {
    EXPECT_FALSE(fs::exists(dir / "summary.html"));
    GTEST_SKIP() << "python3 with matplotlib not available: " << r.out;
  }
  for (const char* f : {"remark1_residuals.png", "remark1_residuals.svg", "remark1_weights.png", "remark1_weights.svg"})
    EXPECT_GT(fs::file_size(dir / f), 1000u) << f;
  const std::string html = slurp_file(dir / "summary.html");
  EXPECT_GE(std::count(html.begin(), html.end(), '\n'), 10);
  std::size_t svgs = 0;
  for (std::size_t p = 0; (p = html.find("<svg", p)) != std::string::npos; ++p) ++svgs;
  EXPECT_EQ(svgs, 2u);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org"));  // only XML namespaces, no fetches
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(StudyCli, MissingPythonIsOneLineAndTheNumbersStillWritten) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "s";
  ::setenv("TTRCHECK_PYTHON", "/nonexistent/python3", 1);
  const CliResult r = run_quick_study("gka-remark1", dir, {});
  ::unsetenv("TTRCHECK_PYTHON");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("figures: not drawn: python3 was not found"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "residuals.csv"));
  EXPECT_TRUE(fs::exists(dir / "summary.md"));
  EXPECT_FALSE(fs::exists(dir / "summary.html"));
}

}  // namespace
