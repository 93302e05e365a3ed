// Varlen files through the CLI (docs/varlen.md): `vectors --suite varlen`,
// `oracle` (forward and backward) equal to the oracle of each sequence's own
// file, `run` + `check` passing, bad cu_seqlens refused with one line and exit 2
// (nothing written), `run --device cuda` taking the offsets, and the same bytes whatever
// the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/binding/device.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/varlen.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/bytes.hpp"

namespace ttr::test {
namespace {

namespace fs = std::filesystem;
using io::DType;
using io::RawTensor;
using io::TensorFile;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// The varlen suite's `chunk_edges` case of gated_delta_rule (cu_seqlens
// [0, 64, 65, 192, 200], h0 [4, 2, 16, 16]), inputs only, forward and backward.
struct Files {
  TempDir dir;
  std::string fwd, bwd;
  Files() {
    const CliResult r = run_cli({"vectors", "--layer", "gated_delta_rule", "--suite", "varlen", "--out", dir / "v",
                                 "--no-oracle", "--backward"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    fwd = dir / "v/gated_delta_rule.varlen.chunk_edges.inputs.safetensors";
    bwd = dir / "v/gated_delta_rule.varlen.chunk_edges.backward.inputs.safetensors";
  }
};

std::vector<std::int64_t> offsets(const TensorFile& f) {
  const RawTensor& t = f.tensors.at(kCuSeqlens);
  EXPECT_EQ(t.dtype, DType::I64);
  std::vector<std::int64_t> cu(static_cast<std::size_t>(t.shape.at(0)));
  std::memcpy(cu.data(), t.data.data(), cu.size() * 8);  // little-endian host (x86-64, aarch64)
  return cu;
}

// Sequence n's own file: per-token tensors ([1, T, ...]) rows cu[n]..cu[n+1],
// per-sequence tensors (leading dim N) row n, no cu_seqlens.
TensorFile own_file(const TensorFile& f, std::size_t n) {
  const std::vector<std::int64_t> cu = offsets(f);
  const std::int64_t T = cu.back(), N = static_cast<std::int64_t>(cu.size()) - 1;
  TensorFile out;
  out.metadata = f.metadata;
  for (const auto& [name, t] : f.tensors) {
    if (name == kCuSeqlens) continue;
    RawTensor s = t;
    if (t.shape.size() >= 2 && t.shape[0] == 1 && t.shape[1] == T) {
      const std::size_t row = t.data.size() / static_cast<std::size_t>(T);
      s.shape[1] = cu[n + 1] - cu[n];
      s.data.assign(t.data.begin() + cu[n] * row, t.data.begin() + cu[n + 1] * row);
    } else {
      EXPECT_EQ(t.shape.at(0), N) << name;
      const std::size_t row = t.data.size() / static_cast<std::size_t>(N);
      s.shape[0] = 1;
      s.data.assign(t.data.begin() + n * row, t.data.begin() + (n + 1) * row);
    }
    out.tensors.emplace(name, std::move(s));
  }
  return out;
}

// The oracle of the varlen file equals, byte for byte, the oracles of each
// sequence's own B = 1 file put in place (o rows, ht/dh0 row n).
void expect_oracle_is_per_sequence(const std::string& in, bool backward, const TempDir& dir) {
  std::vector<std::string> args = {"oracle", "--layer", "gated_delta_rule", "--in", in, "--out", dir / "all.st",
                                   "--bits", "64"};
  if (backward) args.push_back("--backward");
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const TensorFile all = io::read_safetensors(dir / "all.st");
  const TensorFile inputs = io::read_safetensors(in);
  const std::vector<std::int64_t> cu = offsets(inputs);
  const std::int64_t T = cu.back(), N = static_cast<std::int64_t>(cu.size()) - 1;
  for (std::size_t n = 0; n + 1 < cu.size(); ++n) {
    SCOPED_TRACE("sequence " + std::to_string(n));
    const std::string own = dir / ("own" + std::to_string(n) + ".st");
    io::write_safetensors_atomic(own, own_file(inputs, n));
    args[4] = own;
    args[6] = dir / ("own_oracle" + std::to_string(n) + ".st");
    const CliResult o = run_cli(args);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const TensorFile one = io::read_safetensors(args[6]);
    for (const auto& [name, t] : one.tensors) {
      const RawTensor& a = all.tensors.at(name);
      if (a.shape.size() >= 2 && a.shape[1] == T) {
        const std::size_t row = a.data.size() / static_cast<std::size_t>(T);
        EXPECT_TRUE(same_bytes(t.data.data(), a.data.data() + cu[n] * row, t.data.size())) << name;
      } else {
        ASSERT_EQ(a.shape.at(0), N) << name;
        const std::size_t row = a.data.size() / static_cast<std::size_t>(N);
        EXPECT_EQ(std::memcmp(t.data.data(), a.data.data() + n * row, row), 0) << name;
      }
    }
  }
}

TEST(VarlenCli, OracleEqualsEachSequencesOwnOracle) {
  const Files f;
  expect_oracle_is_per_sequence(f.fwd, false, f.dir);
  expect_oracle_is_per_sequence(f.bwd, true, f.dir);
}

TEST(VarlenCli, RunAndCheckForwardAndBackward) {
  const Files f;
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    const std::string in = backward ? f.bwd : f.fwd;
    std::vector<std::string> run = {"run", "--layer", "gated_delta_rule", "--in", in, "--out", f.dir / "cand.st",
                                    "--arith", "bf16", "--form", "chunk"};
    if (backward) run.push_back("--backward");
    const CliResult r = run_cli(run);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const TensorFile cand = io::read_safetensors(f.dir / "cand.st");
    if (backward) {
      EXPECT_EQ(cand.tensors.at("dh0").shape.at(0), 4);  // N = 4 sequences
    } else {
      EXPECT_EQ(cand.tensors.at("ht").shape.at(0), 4);
    }
    std::vector<std::string> check = {"check", "--layer", "gated_delta_rule", "--in", in, "--candidate",
                                      f.dir / "cand.st", "--form", "chunk", "--samples", "4"};
    if (backward) check.push_back("--backward");
    const CliResult c = run_cli(check);
    EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  }
}

// Same bytes whatever the thread count (TTR_THREADS; OMP_NUM_THREADS is OpenMP's).
TEST(VarlenCli, SameBytesWhateverTheThreadCount) {
  const Files f;
  std::string reports[2], oracles[2];
  for (int i = 0; i < 2; ++i) {
    ::setenv("TTR_THREADS", i == 0 ? "1" : "2", 1);
    const std::string o = f.dir / ("oracle" + std::to_string(i) + ".st");
    ASSERT_EQ(run_cli({"oracle", "--layer", "gated_delta_rule", "--in", f.fwd, "--out", o, "--bits", "64"}).exit_code,
              0);
    oracles[i] = slurp(o);
    const std::string rep = f.dir / ("report" + std::to_string(i) + ".json");
    ASSERT_EQ(run_cli({"run", "--layer", "gated_delta_rule", "--in", f.fwd, "--out", f.dir / "c.st", "--arith", "bf16",
                       "--form", "chunk"})
                  .exit_code,
              0);
    const CliResult c = run_cli({"check", "--layer", "gated_delta_rule", "--in", f.fwd, "--candidate", f.dir / "c.st",
                                 "--form", "chunk", "--samples", "3", "--report", rep});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    reports[i] = slurp(rep);
  }
  ::unsetenv("TTR_THREADS");
  EXPECT_EQ(oracles[0], oracles[1]);
  EXPECT_EQ(reports[0], reports[1]);
  ::setenv("TTR_THREADS", "zero", 1);
  const CliResult bad = run_cli({"oracle", "--layer", "gated_delta_rule", "--in", f.fwd, "--out", f.dir / "x.st"});
  ::unsetenv("TTR_THREADS");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("TTR_THREADS"), std::string::npos) << bad.err;
}

// The CLI's allocator settings (TTR_MALLOC, cli/main.cpp) change where freed memory
// goes, never a value: two threads, glibc's defaults against the tuned settings, the
// same report bytes; any other value is one error line, exit 2, and no report.
TEST(VarlenCli, SameBytesWhateverTheAllocatorSettings) {
  const Files f;
  ASSERT_EQ(run_cli({"run", "--layer", "gated_delta_rule", "--in", f.fwd, "--out", f.dir / "c.st", "--arith", "bf16",
                     "--form", "chunk"})
                .exit_code,
            0);
  ::setenv("TTR_THREADS", "2", 1);
  std::string reports[2];
  const char* modes[2] = {"glibc", "tuned"};
  for (int i = 0; i < 2; ++i) {
    ::setenv("TTR_MALLOC", modes[i], 1);
    const std::string rep = f.dir / (std::string("report.") + modes[i] + ".json");
    const CliResult c = run_cli({"check", "--layer", "gated_delta_rule", "--in", f.fwd, "--candidate", f.dir / "c.st",
                                 "--form", "chunk", "--samples", "3", "--report", rep});
    EXPECT_EQ(c.exit_code, 0) << modes[i] << ": " << c.err;
    reports[i] = slurp(rep);
  }
  ::setenv("TTR_MALLOC", "jemalloc", 1);
  const std::string bad_rep = f.dir / "report.bad.json";
  const CliResult bad = run_cli({"check", "--layer", "gated_delta_rule", "--in", f.fwd, "--candidate", f.dir / "c.st",
                                 "--form", "chunk", "--report", bad_rep});
  ::unsetenv("TTR_MALLOC");
  ::unsetenv("TTR_THREADS");
  ASSERT_FALSE(reports[0].empty());
  EXPECT_EQ(reports[0], reports[1]);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("TTR_MALLOC='jemalloc'"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(bad_rep));
}

RawTensor i64(std::vector<std::int64_t> v, std::vector<std::int64_t> shape) {
  std::vector<double> d(v.begin(), v.end());
  return io::from_f64(d, std::move(shape), DType::I64);
}

// Each bad cu_seqlens: exit 2, one line naming the culprit, no output file.
TEST(VarlenCli, BadOffsetsExitTwoNamingTheCulprit) {
  const Files f;
  const TensorFile good = io::read_safetensors(f.fwd);  // T = 200, N = 4, h0 [4, 2, 16, 16]
  struct Bad {
    const char* what;
    TensorFile file;
    const char* says;
  };
  std::vector<Bad> bad;
  auto with = [&](RawTensor cu) {
    TensorFile x = good;
    x.tensors[kCuSeqlens] = std::move(cu);
    return x;
  };
  bad.push_back({"decreasing", with(i64({0, 64, 63, 192, 200}, {5})), "non-decreasing"});
  bad.push_back({"not starting at 0", with(i64({1, 64, 65, 192, 200}, {5})), "start at 0"});
  bad.push_back({"last != T", with(i64({0, 64, 65, 192, 199}, {5})), "must equal T = 200"});
  bad.push_back({"wrong dtype", with(io::from_f64(std::vector<double>{0, 64, 65, 192, 200}, {5}, DType::F32)),
                 "expected I64"});
  bad.push_back({"wrong rank", with(i64({0, 64, 65, 192, 200}, {1, 5})), "rank"});
  bad.push_back({"h0 leading dim != N", with(i64({0, 64, 200}, {3})), "'h0'"});
  {
    // B = 2: two batch rows of the fixed-length kind, packed offsets on top.
    TensorFile x = good;
    for (auto& [name, t] : x.tensors)
      if (name != kCuSeqlens && t.shape.size() >= 2 && t.shape[1] == 200) {
        t.shape[0] = 2;
        t.shape[1] = 100;
      }
    bad.push_back({"B != 1", x, "B = 2"});
  }
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.what);
    const std::string in = f.dir / "bad.st";
    io::write_safetensors_atomic(in, b.file);
    const std::string out = f.dir / "out.st";
    const CliResult r = run_cli({"oracle", "--layer", "gated_delta_rule", "--in", in, "--out", out});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
    const bool names = r.err.find("cu_seqlens") != std::string::npos || r.err.find("'q'") != std::string::npos ||
                       r.err.find("'h0'") != std::string::npos;
    EXPECT_TRUE(names) << "names the culprit: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// The CUDA kernels take offsets (gpu/core/seqs.cuh; tests/gpu/varlen_gpu_test.cpp runs
// them): without a device the run is refused for the device alone, never for cu_seqlens.
TEST(VarlenCli, CudaRunTakesOffsets) {
  const Files f;
  const CliResult r = run_cli({"run", "--layer", "gated_delta_rule", "--in", f.fwd, "--out", f.dir / "c.st", "--arith",
                               "bf16", "--form", "chunk", "--device", "cuda"});
  if (device::status().usable()) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
  } else {
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.find("cu_seqlens"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--device cuda: skipped"), std::string::npos) << r.err;
  }
}

// The suites: varlen cases carry I64 offsets and [N, ...] states; production and
// int32_overflow have the shapes the docs state (generated here only as specs:
// their inputs are gigabytes).
TEST(VarlenCli, VarlenSuiteFiles) {
  const Files f;
  const TensorFile t = io::read_safetensors(f.dir / "v/gated_delta_rule.varlen.fla_boundaries.inputs.safetensors");
  EXPECT_EQ(offsets(t), (std::vector<std::int64_t>{0, 15, 100, 300, 1200, 2000}));
  EXPECT_EQ(t.tensors.at("h0").shape.at(0), 5);
  EXPECT_EQ(t.tensors.at("q").shape, (std::vector<std::int64_t>{1, 2000, 2, 16}));
  const TensorFile e = io::read_safetensors(f.dir / "v/gated_delta_rule.varlen.empty_sequences.inputs.safetensors");
  EXPECT_EQ(offsets(e), (std::vector<std::int64_t>{0, 0, 10, 10, 10, 40, 40}));
}

}  // namespace
}  // namespace ttr::test
