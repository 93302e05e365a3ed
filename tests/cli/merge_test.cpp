// `ttrcheck merge`: N shards merged equal the unsharded run with the same total
// budget, file for file and byte for byte (gate report and JUnit, fuzz
// reproducers and campaign.json, vectors and manifest, baselines); shards that
// do not belong together are refused with one line, exit 2, nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "oracles/io/safetensors.hpp"
#include "tests/support/cli.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::test::run_cli;
using ttr::test::TempDir;
using Args = std::vector<std::string>;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::vector<std::string> sorted_files(const fs::path& dir) {
  auto v = ttr::test::entries_of(dir);
  std::sort(v.begin(), v.end());
  return v;
}

void expect_same_tree(const fs::path& a, const fs::path& b) {
  const auto files = sorted_files(a);
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files, sorted_files(b));
  for (const auto& f : files) EXPECT_TRUE(slurp(a / f) == slurp(b / f)) << f << " differs";
}

void run_ok(Args args) {
  const auto r = run_cli(args);
  ASSERT_LE(r.exit_code, 1) << args[0] << ": " << r.err;  // fuzz with a mutant exits 1
}

// Runs `cmd` unsharded into dir/single and as n shards into dir/s<i>; merges
// the shards into dir/merged.
void shard_and_merge(const TempDir& dir, const Args& cmd, int n) {
  Args single = cmd;
  single.insert(single.end(), {"--out", dir / "single"});
  run_ok(single);
  Args merge = {"merge", "--out", dir / "merged"};
  for (int i = 0; i < n; ++i) {
    Args a = cmd;
    a.insert(a.end(), {"--out", dir / ("s" + std::to_string(i)), "--shard", std::to_string(i) + "/" + std::to_string(n)});
    run_ok(a);
    merge.push_back(dir / ("s" + std::to_string(i)));
  }
  const auto r = run_cli(merge);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

const Args kGate = {"gate",    "--layer", "simple_gla", "--layer",  "gated_delta_rule", "--case",   "small",
                    "--seeds", "3",       "--no-cuda",  "--threads", "1"};
// The kaczmarz mutant makes NaN findings from several shards, two of which
// minimise to the same reproducer (a cross-shard duplicate), and more findings
// than --max-findings keeps.
const Args kFuzz = {"fuzz", "--layer", "kaczmarz_delta_rule", "--target", "cpu:fp32", "--mutant", "kaczmarz-eps-dropped",
                    "--budget", "60cases", "--seed", "1", "--max-findings", "4"};

TEST(Merge, GateShardsGiveTheUnshardedReportAndJunit) {
  TempDir t;
  shard_and_merge(t, kGate, 3);
  expect_same_tree(t.path() / "single", t.path() / "merged");
  // Every shard ran a part: 2 layers x 3 seeds = 6 units, two per shard: one of
  // simple_gla (chunk and scan x bf16, fp32, forward and backward: 8 checks), one
  // of gated_delta_rule (chunk x bf16, fp32, forward and backward: 4).
  for (int i = 0; i < 3; ++i) {
    const auto doc = nlohmann::json::parse(slurp(t.path() / ("s" + std::to_string(i)) / "report.json"));
    EXPECT_EQ(doc["checks"].size(), 12u) << i;
    for (const auto& u : doc["shard"]["check_units"]) EXPECT_EQ(u[1].get<int>() % 3, i);
  }
}

TEST(Merge, FuzzShardsGiveTheUnshardedCampaign) {
  TempDir t;
  shard_and_merge(t, kFuzz, 4);
  expect_same_tree(t.path() / "single", t.path() / "merged");
  const auto campaign = nlohmann::json::parse(slurp(t.path() / "merged" / "campaign.json"));
  EXPECT_FALSE(campaign.contains("shard"));
  EXPECT_EQ(campaign["cases"], 60);
  // Reproducers are distinct (deduplicated): no two inputs files hold the same tensors.
  std::set<std::string> inputs;
  for (const auto& f : sorted_files(t.path() / "merged"))
    if (f.ends_with(".inputs.safetensors")) {
      const auto file = ttr::io::read_safetensors(t.path() / "merged" / f);
      std::string key;
      for (const auto& [name, x] : file.tensors) key += name + std::string(x.data.begin(), x.data.end());
      EXPECT_TRUE(inputs.insert(key).second) << f << " repeats another reproducer";
    }
  // Kept per kind: at most --max-findings (duplicates included, as the campaign counts them).
  EXPECT_LE(campaign["findings"].size() + campaign["duplicates"].size(), 4u);
}

TEST(Merge, VectorsShardsGiveTheUnshardedSuite) {
  TempDir t;
  shard_and_merge(t, {"vectors", "--layer", "all", "--suite", "tiny", "--seed", "3", "--no-oracle"}, 3);
  expect_same_tree(t.path() / "single", t.path() / "merged");
}

TEST(Merge, ShardBaselinesGiveTheUnshardedBaseline) {
  TempDir t;
  shard_and_merge(t, kGate, 3);
  ASSERT_EQ(run_cli({"baseline", "record", "--report", t / "single/report.json", "--out", t / "b.json"}).exit_code, 0);
  Args merge = {"merge", "--out", t / "bm.json"};
  for (int i = 0; i < 3; ++i) {
    const std::string b = t / ("b" + std::to_string(i) + ".json");
    ASSERT_EQ(run_cli({"baseline", "record", "--report", t / ("s" + std::to_string(i) + "/report.json"), "--out", b})
                  .exit_code,
              0);
    merge.push_back(b);
  }
  ASSERT_EQ(run_cli(merge).exit_code, 0);
  EXPECT_EQ(slurp(t / "b.json"), slurp(t / "bm.json"));
  merge.pop_back();  // a shard's baseline missing
  merge[2] = t / "bm2.json";
  const auto r = run_cli(merge);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing shard 2"), std::string::npos) << r.err;
}

// One line on stderr containing `what`, exit 2, and no output directory.
void expect_refused(const Args& merge, const std::string& what) {
  const auto r = run_cli(merge);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(merge[2])) << merge[2];
}

TEST(Merge, RefusesShardsThatDoNotBelongTogether) {
  TempDir t;
  const Args cmd = {"fuzz", "--layer", "linear_attn", "--target", "cpu:fp32", "--budget", "8cases", "--seed", "1"};
  for (int i = 0; i < 3; ++i) {
    Args a = cmd;
    a.insert(a.end(), {"--out", t / ("s" + std::to_string(i)), "--shard", std::to_string(i) + "/3"});
    run_ok(a);
  }
  Args other = cmd;
  other[other.size() - 1] = "2";  // seed 2
  other.insert(other.end(), {"--out", t / "seed2", "--shard", "2/3"});
  run_ok(other);
  Args four = cmd;
  four.insert(four.end(), {"--out", t / "four", "--shard", "2/4"});
  run_ok(four);
  run_ok({"vectors", "--layer", "linear_attn", "--suite", "tiny", "--no-oracle", "--out", t / "vec", "--shard", "0/3"});
  run_ok({"fuzz", "--layer", "linear_attn", "--target", "cpu:fp32", "--budget", "8cases", "--out", t / "plain"});

  expect_refused({"merge", "--out", t / "m", t / "s0", t / "s1"}, "missing shard 2");
  expect_refused({"merge", "--out", t / "m", t / "s0", t / "s1", t / "s1"}, "given twice");
  expect_refused({"merge", "--out", t / "m", t / "s0", t / "s1", t / "seed2"}, "seed: 2 vs 1");
  expect_refused({"merge", "--out", t / "m", t / "s0", t / "s1", t / "four"}, "one of 3 shards");
  expect_refused({"merge", "--out", t / "m", t / "s0", t / "s1", t / "vec"}, "a vectors output");
  expect_refused({"merge", "--out", t / "m", t / "s0", t / "s1", t / "plain"}, "no 'shard' record");
  // Another tool version.
  auto doc = nlohmann::json::parse(slurp(t / "s1/campaign.json"));
  doc["tool_version"] = "0.0.9";
  fs::create_directory(t / "old");
  spit(t / "old/campaign.json", doc.dump(2) + "\n");
  expect_refused({"merge", "--out", t / "m", t / "s0", t / "old", t / "s2"}, "different tool versions");
  // The output must be new or empty.
  fs::create_directory(t / "full");
  spit(t / "full/x", "x");
  const auto r = run_cli({"merge", "--out", t / "full", t / "s0", t / "s1", t / "s2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not empty"), std::string::npos) << r.err;
  EXPECT_EQ(sorted_files(t / "full"), std::vector<std::string>{"x"});
  // And the three shards do merge.
  EXPECT_EQ(run_cli({"merge", "--out", t / "m", t / "s0", t / "s1", t / "s2"}).exit_code, 0);
}

TEST(Merge, RefusesAnEditedGateReport) {
  TempDir t;
  for (int i = 0; i < 2; ++i)
    run_ok({"gate", "--layer", "linear_attn", "--case", "small", "--seeds", "2", "--no-cuda", "--out",
            t / ("s" + std::to_string(i)), "--shard", std::to_string(i) + "/2"});
  const std::string original = slurp(t / "s1/report.json");
  // A ratio lowered by hand: the gate's JUnit file still says otherwise (the
  // merge rewrites both from the checks and would launder the edit).
  auto doc = nlohmann::json::parse(original);
  doc["checks"][0]["tensors"][0]["max_ratio"] = 0.001;
  spit(t / "s1/report.json", doc.dump(2) + "\n");
  expect_refused({"merge", "--out", t / "m", t / "s0", t / "s1"}, "s1/junit.xml: does not match its report.json");
  // A verdict that is not its checks': the report is not what its checks give.
  doc = nlohmann::json::parse(original);
  doc["pass"] = false;
  spit(t / "s1/report.json", doc.dump(2) + "\n");
  expect_refused({"merge", "--out", t / "m", t / "s0", t / "s1"}, "not as this ttrcheck writes it");
  spit(t / "s1/report.json", original);
  EXPECT_EQ(run_cli({"merge", "--out", t / "m", t / "s0", t / "s1"}).exit_code, 0);
}

// A check with a range finding (gate/range.hpp) merges with it: the merge reads
// the `range` object back (before, a shard holding one was refused as "not as
// this ttrcheck writes it", since the rewritten report lost it). The finding is
// planted in a real shard's report, as the gate writes one: verdict "range", the
// failures excused.
TEST(Merge, KeepsARangeFinding) {
  TempDir t;
  for (int i = 0; i < 2; ++i)
    run_ok({"gate", "--layer", "linear_attn", "--case", "small", "--seeds", "2", "--no-cuda", "--out",
            t / ("s" + std::to_string(i)), "--shard", std::to_string(i) + "/2"});
  auto doc = nlohmann::json::parse(slurp(t / "s1/report.json"));
  const nlohmann::json range = {{"intermediate", "U"}, {"operation", "+"}, {"format", "fp32"},
                                {"value", "inf"},      {"limit", 3.4028234663852886e38}, {"excused", true}};
  nlohmann::json& check = doc["checks"][0];
  ASSERT_TRUE(check["pass"].get<bool>());
  check["range"] = range;
  check["verdict"] = "range";
  const std::string id = check["id"].get<std::string>();
  spit(t / "s1/report.json", doc.dump(2) + "\n");
  fs::remove(t / "s1/junit.xml");  // written before the edit; the report is the record here
  const auto r = run_cli({"merge", "--out", t / "m", t / "s0", t / "s1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto merged = nlohmann::json::parse(slurp(t / "m/report.json"));
  int found = 0;
  for (const auto& c : merged["checks"])
    if (c["id"] == id) {
      ++found;
      EXPECT_EQ(c["range"], range);
      EXPECT_EQ(c["verdict"], "range");
    } else {
      EXPECT_TRUE(c["range"].is_null()) << c["id"];
    }
  EXPECT_EQ(found, 1);
  // The JUnit file the merge writes names the finding.
  EXPECT_NE(slurp(t / "m/junit.xml").find("beyond fp32"), std::string::npos);
}

}  // namespace
