// The CUDA target of the CLI where no kernel can run (CI: no GPU, and the
// default build has no CUDA kernels): `gate` reports it as skipped, clearly, and
// keeps its exit code; `run --device cuda` fails with one line naming why (exit
// 2) and writes nothing. On the lent GPU, tests/gpu/ and scripts/gpu-check run them.
#include <gtest/gtest.h>

#include "gpu/binding/device.hpp"
#include "tests/support/cli.hpp"

namespace {

using ttr::test::run_cli;

TEST(CudaTargetCli, GateReportsTheCudaTargetSkippedWithoutADevice) {
  if (ttr::device::status().usable()) GTEST_SKIP() << "a CUDA device is present: tests/gpu/ covers this";
  ttr::test::TempDir dir;
  const auto r = run_cli({"gate", "--cuda-only", "--seeds", "1", "--out", dir / "report"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cuda target (gpu/ kernels, chunk size 64): skipped: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS: 0 checks"), std::string::npos) << r.out;
}

TEST(CudaTargetCli, RunOnCudaWithoutADeviceIsAUsageErrorNamingWhy) {
  if (ttr::device::status().usable()) GTEST_SKIP() << "a CUDA device is present: tests/gpu/ covers this";
  ttr::test::TempDir dir;
  for (const char* layer : {"gated_delta_rule", "gla"})
    ASSERT_EQ(run_cli({"vectors", "--layer", layer, "--suite", "tiny", "--no-oracle", "--out", dir / "v"}).exit_code, 0);
  const std::string in = dir / "v/gated_delta_rule.tiny.basic.inputs.safetensors";
  const auto r = run_cli({"run", "--device", "cuda", "--layer", "gated_delta_rule", "--form", "chunk", "--arith",
                          "bf16", "--in", in, "--out", dir / "o.safetensors"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--device cuda: skipped: "), std::string::npos) << r.err;
  EXPECT_TRUE(ttr::test::entries_of(dir.path()) == std::vector<std::string>{"v"});
  // A layer without CUDA kernels is named as such whatever the device.
  const auto g = run_cli({"run", "--device", "cuda", "--layer", "gla", "--form", "chunk", "--arith", "bf16", "--in",
                          dir / "v/gla.tiny.basic.inputs.safetensors", "--out", dir / "o.safetensors"});
  EXPECT_EQ(g.exit_code, 2);
  EXPECT_NE(g.err.find("no CUDA chunk kernel"), std::string::npos) << g.err;
  // A mutant the CUDA kernels do not carry is refused whatever the device; one
  // they carry gets as far as the device check.
  const auto cpu_only = run_cli({"run", "--device", "cuda", "--layer", "gated_delta_rule", "--form", "chunk",
                                 "--arith", "bf16", "--in", in, "--out", dir / "o.safetensors", "--mutant",
                                 "ut-beta-dropped"});
  EXPECT_EQ(cpu_only.exit_code, 2);
  EXPECT_NE(cpu_only.err.find("planted in the CPU forms only"), std::string::npos) << cpu_only.err;
  const auto cuda_mutant = run_cli({"run", "--device", "cuda", "--layer", "gated_delta_rule", "--form", "chunk",
                                    "--arith", "bf16", "--in", in, "--out", dir / "o.safetensors", "--mutant",
                                    "dbeta-sign-flipped"});
  EXPECT_EQ(cuda_mutant.exit_code, 2);
  EXPECT_EQ(cuda_mutant.err.find("planted in the CPU forms only"), std::string::npos) << cuda_mutant.err;
  EXPECT_TRUE(ttr::test::entries_of(dir.path()) == std::vector<std::string>{"v"});
}

}  // namespace
