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

// Sharding: `--shard i/N` runs cases k ≡ i (mod N) and writes study-shard.json;
// `ttrcheck merge` of all N shards writes the unsharded run's files byte for byte
// (the expectation: the unsharded run itself), for N = 2 and 3, shards given in
// any order. kla-precision-growth's tables hold integers, text, inf and nan.
TEST(StudyCli, ShardsMergeIntoTheUnshardedBytes) {
  TempDir tmp;
  const std::vector<std::string> common = {"study", "kla-precision-growth", "--quick", "--no-plots", "--seed", "3"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(a);
  };
  ASSERT_EQ(with({"--out", tmp / "whole"}).exit_code, 0);
  const std::vector<std::string> files = {"precision.csv", "ratios.csv", "failure.csv", "exact.csv", "study.json",
                                          "summary.md"};
  for (int n : {2, 3}) {
    std::vector<std::string> merge = {"merge"};
    for (int i = n - 1; i >= 0; --i) {  // given in reverse order
      const std::string dir = tmp / ("s" + std::to_string(n) + "_" + std::to_string(i));
      const CliResult r = with({"--shard", std::to_string(i) + "/" + std::to_string(n), "--out", dir});
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
      EXPECT_TRUE(fs::exists(fs::path(dir) / "study-shard.json"));
      EXPECT_FALSE(fs::exists(fs::path(dir) / "study.json")) << "a shard writes no assessed result";
      merge.push_back(dir);
    }
    const std::string out = tmp / ("merged" + std::to_string(n));
    merge.insert(merge.end(), {"--out", out});
    const CliResult m = run_cli(merge);
    ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
    EXPECT_NE(m.out.find("merged " + std::to_string(n) + " shards of study kla-precision-growth"), std::string::npos)
        << m.out;
    for (const std::string& f : files) {
      ASSERT_TRUE(fs::exists(fs::path(out) / f)) << f;
      EXPECT_EQ(slurp_file(fs::path(out) / f), slurp_file(tmp.path() / "whole" / f)) << "N = " << n << ": " << f;
    }
  }
  // Shards that do not make one run: exit 2, one line naming the culprit, nothing written.
  const CliResult missing = run_cli({"merge", tmp / "s3_0", tmp / "s3_2", "--out", tmp / "bad1"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("shard 1/3 is missing"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(tmp.path() / "bad1"));
  const CliResult twice = run_cli({"merge", tmp / "s2_0", tmp / "s2_0", tmp / "s2_1", "--out", tmp / "bad2"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.err.find("given twice"), std::string::npos) << twice.err;
  EXPECT_FALSE(fs::exists(tmp.path() / "bad2"));
  ASSERT_EQ(run_cli({"study", "kla-precision-growth", "--quick", "--no-plots", "--seed", "4", "--shard", "1/2",
                     "--out", tmp / "other"}).exit_code,
            0);
  const CliResult mixed = run_cli({"merge", tmp / "s2_0", tmp / "other", "--out", tmp / "bad3"});
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("a shard of another run"), std::string::npos) << mixed.err;
  EXPECT_FALSE(fs::exists(tmp.path() / "bad3"));
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
