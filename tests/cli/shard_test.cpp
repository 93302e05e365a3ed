// Sharding (gate/shard.hpp): the partition covers every case exactly once, the
// shard is read from `--shard` or the scheduler's environment, and bad values
// are refused with one line and exit 2. The merge itself: merge_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gate/shard.hpp"
#include "oracles/error.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/ctest_gpu.hpp"

namespace {

using ttr::InputError;
using ttr::Shard;
using Env = std::map<std::string, std::string>;

ttr::EnvLookup lookup(const Env& env) {
  return [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

Shard resolve(const Env& env, const std::string& flag = "", std::uint64_t count = 0) {
  return ttr::resolve_shard(flag, count, lookup(env));
}

TEST(Shard, StridedOwnershipCoversEveryCaseOnce) {
  for (std::uint64_t n = 1; n <= 7; ++n)
    for (std::uint64_t k = 0; k < 100; ++k) {
      int owners = 0;
      for (std::uint64_t i = 0; i < n; ++i) owners += Shard{i, n, "--shard"}.owns(k);
      EXPECT_EQ(owners, 1) << "case " << k << " of " << n << " shards";
    }
}

TEST(Shard, CaseRangesAreContiguousAndCoverTheBudget) {
  for (std::int64_t n = 1; n <= 7; ++n)
    for (std::int64_t budget = 1; budget <= 40; ++budget) {
      std::int64_t next = 0, biggest = 0, smallest = budget;
      for (std::int64_t i = 0; i < n; ++i) {
        const auto [lo, hi] = Shard{static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(n), "x"}.case_range(budget);
        EXPECT_EQ(lo, next) << i << "/" << n << " of " << budget;
        EXPECT_LE(lo, hi);
        next = hi;
        biggest = std::max(biggest, hi - lo);
        smallest = std::min(smallest, hi - lo);
      }
      EXPECT_EQ(next, budget);
      EXPECT_LE(biggest - smallest, 1) << "balanced: " << n << " shards of " << budget;
    }
  // A time budget: disjoint seed ranges of 2^40 cases.
  EXPECT_EQ((Shard{2, 4, "x"}.case_range(0)), (std::pair<std::int64_t, std::int64_t>{2LL << 40, 3LL << 40}));
  EXPECT_EQ((Shard{}.case_range(500)), (std::pair<std::int64_t, std::int64_t>{0, 500}));
}

TEST(Shard, ParsesIOfN) {
  const Shard s = ttr::parse_shard("3/8");
  EXPECT_EQ(s.index, 3u);
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.text(), "3/8");
  for (const char* bad : {"8/8", "1/0", "0/0", "a/3", "-1/3", "1/3x", "1", "", "/", " 1/3", "1/+3", "1//3"})
    EXPECT_THROW(ttr::parse_shard(bad), InputError) << bad;
}

TEST(Shard, FlagBeforeEnvironment) {
  const Env env{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
  const Shard s = resolve(env, "2/3");
  EXPECT_EQ(s.text(), "2/3");
  EXPECT_EQ(s.source, "--shard");
  EXPECT_FALSE(resolve({}).sharded());
}

TEST(Shard, SlurmArrayNotStartingAtZero) {
  // sbatch --array=4-7: tasks 4..7 are shards 0..3.
  Env env{{"SLURM_ARRAY_TASK_ID", "6"}, {"SLURM_ARRAY_TASK_MIN", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
  Shard s = resolve(env);
  EXPECT_EQ(s.text(), "2/4");
  EXPECT_EQ(s.source, "SLURM_ARRAY_TASK_ID");
  // --array=1-7:2: tasks 1,3,5,7 are shards 0..3.
  env = {{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"},
         {"SLURM_ARRAY_TASK_STEP", "2"}};
  EXPECT_EQ(resolve(env).text(), "2/4");
  // A list with holes (--array=1,3,8) has no dense numbering: 8 - 1 = 7 >= 3.
  env = {{"SLURM_ARRAY_TASK_ID", "8"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "3"}};
  EXPECT_THROW(resolve(env), InputError);
  env = {{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_MIN", "0"}};  // no count
  EXPECT_THROW(resolve(env), InputError);
  env = {{"SLURM_ARRAY_TASK_ID", "x"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "2"}};
  EXPECT_THROW(resolve(env), InputError);
}

TEST(Shard, KubernetesNeedsTheCompletionCount) {
  const Env env{{"JOB_COMPLETION_INDEX", "3"}};
  EXPECT_THROW(resolve(env), InputError);
  EXPECT_EQ(resolve(env, "", 5).text(), "3/5");
  EXPECT_THROW(resolve(env, "", 3), InputError);  // index 3 of 3
  const Env with{{"JOB_COMPLETION_INDEX", "3"}, {"TTR_SHARD_COUNT", "4"}};
  EXPECT_EQ(resolve(with).text(), "3/4");
  EXPECT_EQ(resolve(with).source, "JOB_COMPLETION_INDEX");
  EXPECT_THROW(resolve({}, "", 4), InputError);  // --shard-count without an index
}

TEST(Shard, PytestXdistWorker) {
  Env env{{"PYTEST_XDIST_WORKER", "gw2"}, {"PYTEST_XDIST_WORKER_COUNT", "3"}};
  EXPECT_EQ(resolve(env).text(), "2/3");
  EXPECT_EQ(resolve(env).source, "PYTEST_XDIST_WORKER");
  env["PYTEST_XDIST_WORKER"] = "worker2";
  EXPECT_THROW(resolve(env), InputError);
  env = {{"PYTEST_XDIST_WORKER", "gw0"}};
  EXPECT_THROW(resolve(env), InputError);
}

// The GPU CTest allots a gpu-labelled test (RESOURCE_GROUPS gpus:1), which the
// GPU test binary makes its CUDA_VISIBLE_DEVICES.
TEST(Shard, CtestGpuIdFromTheResourceGroup) {
  const Env given{{"CTEST_RESOURCE_GROUP_COUNT", "1"}, {"CTEST_RESOURCE_GROUP_0_GPUS", "id:3,slots:1"}};
  EXPECT_EQ(ttr::test::ctest_gpu_id(lookup(given)), "3");
  const Env uuid{{"CTEST_RESOURCE_GROUP_COUNT", "1"}, {"CTEST_RESOURCE_GROUP_0_GPUS", "id:GPU-5d1c,slots:2"}};
  EXPECT_EQ(ttr::test::ctest_gpu_id(lookup(uuid)), "GPU-5d1c");
  EXPECT_EQ(ttr::test::ctest_gpu_id(lookup({})), std::nullopt);  // no resource spec: all GPUs stay visible
  const Env bad{{"CTEST_RESOURCE_GROUP_COUNT", "1"}, {"CTEST_RESOURCE_GROUP_0_GPUS", "slots:1"}};
  EXPECT_EQ(ttr::test::ctest_gpu_id(lookup(bad)), std::nullopt);
}

// The commands: bad values are one line and exit 2, and nothing is written.
TEST(ShardCli, BadShardIsOneLineAndExit2) {
  ttr::test::TempDir tmp;
  const std::vector<std::vector<std::string>> commands = {
      {"gate", "--layer", "linear_attn", "--no-cuda", "--out", tmp / "g"},
      {"fuzz", "--layer", "linear_attn", "--target", "cpu:fp32", "--budget", "4cases", "--out", tmp / "f"},
      {"vectors", "--layer", "linear_attn", "--suite", "tiny", "--no-oracle", "--out", tmp / "v"}};
  for (auto cmd : commands)
    for (const char* bad : {"4/4", "1/0", "x"}) {
      auto args = cmd;
      args.push_back("--shard");
      args.push_back(bad);
      const auto r = ttr::test::run_cli(args);
      EXPECT_EQ(r.exit_code, 2) << cmd[0] << " --shard " << bad;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_NE(r.err.find("--shard"), std::string::npos) << r.err;
    }
  EXPECT_TRUE(ttr::test::entries_of(tmp.path()).empty());
}

TEST(ShardCli, SaysWhereTheShardCameFrom) {
  ttr::test::TempDir tmp;
  ::setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  ::setenv("SLURM_ARRAY_TASK_MIN", "2", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "2", 1);
  const auto r = ttr::test::run_cli({"vectors", "--layer", "linear_attn", "--suite", "tiny", "--no-oracle", "--out",
                                     tmp / "v"});
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  ::unsetenv("SLURM_ARRAY_TASK_MIN");
  ::unsetenv("SLURM_ARRAY_TASK_COUNT");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("shard 1/2 from SLURM_ARRAY_TASK_ID\n"), std::string::npos) << r.err;
  ::setenv("JOB_COMPLETION_INDEX", "0", 1);
  const auto k = ttr::test::run_cli({"vectors", "--layer", "linear_attn", "--suite", "tiny", "--no-oracle", "--out",
                                     tmp / "k"});
  ::unsetenv("JOB_COMPLETION_INDEX");
  EXPECT_EQ(k.exit_code, 2);
  EXPECT_NE(k.err.find("--shard-count"), std::string::npos) << k.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "k"));
}

}  // namespace
