// Bad input to the Kalman-family layers through the ttrcheck executable: each is a
// user error, so (docs/design.md, "Errors and exit codes") exit code 2, exactly one line on stderr that
// names the culprit tensor or config key, and no output file (nor a temporary) left.
// Inputs come from `ttrcheck vectors --suite tiny --no-oracle` and are edited with the
// safetensors reader/writer; every edit keeps the file otherwise valid, so the single
// defect is the one reported (a control run on the unedited file must succeed).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "oracles/io/safetensors.hpp"
#include "tests/support/cli.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::test::CliResult;
using ttr::test::entries_of;
using ttr::test::run_cli;
using ttr::test::TempDir;

class KalmanCli : public testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(tmp_.path() / "vec");
    fs::create_directories(tmp_.path() / "in");
    fs::create_directories(out_dir());
  }
  fs::path out_dir() const { return tmp_.path() / "out"; }
  std::string out() const { return (out_dir() / "result.safetensors").string(); }

  // The tiny suite's `basic` inputs of `layer`, written by the CLI.
  fs::path vectors(const std::string& layer) {
    const fs::path dir = tmp_.path() / "vec" / layer;
    const CliResult r = run_cli({"vectors", "--layer", layer, "--suite", "tiny", "--out", dir.string(), "--no-oracle"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const fs::path p = dir / (layer + ".tiny.basic.inputs.safetensors");
    EXPECT_TRUE(fs::exists(p)) << p;
    return p;
  }

  // A copy of `src` with element `index` of `tensor` set to `value` (same dtype).
  std::string edited(const fs::path& src, const std::string& tensor, std::size_t index, double value,
                     const std::string& name) {
    ttr::io::TensorFile f = ttr::io::read_safetensors(src);
    ttr::io::RawTensor& raw = f.tensors.at(tensor);
    std::vector<double> x = ttr::io::to_f64(raw, tensor);
    EXPECT_LT(index, x.size());
    x[index] = value;
    raw = ttr::io::from_f64(x, raw.shape, raw.dtype);
    const fs::path p = tmp_.path() / "in" / name;
    ttr::io::write_safetensors_atomic(p, f);
    return p.string();
  }

  // Both commands that read a layer's inputs must reject the file the same way.
  void expect_rejected(const std::string& layer, const std::string& in, const std::vector<std::string>& extra,
                       const std::vector<std::string>& culprits) {
    for (const std::string cmd : {"oracle", "run"}) {
      SCOPED_TRACE(cmd);
      std::vector<std::string> args = {cmd, "--layer", layer, "--in", in, "--out", out()};
      if (cmd == "run") args.insert(args.end(), {"--arith", "fp64"});
      args.insert(args.end(), extra.begin(), extra.end());
      const CliResult r = run_cli(args);
      EXPECT_EQ(r.exit_code, 2) << "stderr: " << r.err;
      ASSERT_FALSE(r.err.empty());
      EXPECT_EQ(r.err.back(), '\n') << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr must be one line:\n" << r.err;
      for (const auto& c : culprits) EXPECT_NE(r.err.find(c), std::string::npos) << "'" << c << "' not in: " << r.err;
      EXPECT_TRUE(entries_of(out_dir()).empty()) << "left behind: " << entries_of(out_dir()).front();
    }
  }

  void expect_accepted(const std::string& layer, const std::string& in, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"oracle", "--layer", layer, "--in", in, "--out", out()};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    fs::remove(out());
  }

 private:
  TempDir tmp_;
};

TEST_F(KalmanCli, KlaLambdaVNotPositive) {
  const fs::path src = vectors("kla_kalman");
  expect_accepted("kla_kalman", src.string());  // control: the unedited file is valid
  expect_rejected("kla_kalman", edited(src, "lambda_v", 3, 0.0, "lv0.safetensors"), {}, {"'lambda_v'"});
  expect_rejected("kla_kalman", edited(src, "lambda_v", 0, -1.5, "lvneg.safetensors"), {}, {"'lambda_v'"});
}

TEST_F(KalmanCli, KlaABarOutsideZeroOne) {
  const fs::path src = vectors("kla_kalman");
  expect_rejected("kla_kalman", edited(src, "a_bar", 1, 0.0, "a0.safetensors"), {}, {"'a_bar'"});
  expect_rejected("kla_kalman", edited(src, "a_bar", 2, 1.5, "a15.safetensors"), {}, {"'a_bar'"});
  // The closed end of (0, 1] is valid.
  expect_accepted("kla_kalman", edited(src, "a_bar", 2, 1.0, "a1.safetensors"));
}

TEST_F(KalmanCli, KlaPBarNegative) {
  const fs::path src = vectors("kla_kalman");
  expect_rejected("kla_kalman", edited(src, "p_bar", 0, -0.125, "pneg.safetensors"), {}, {"'p_bar'"});
  expect_accepted("kla_kalman", edited(src, "p_bar", 0, 0.0, "p0.safetensors"));  // p̄ = 0 is valid
}

TEST_F(KalmanCli, KlaBadConfig) {
  const fs::path src = vectors("kla_kalman");
  expect_rejected("kla_kalman", src.string(), {"--set", "lambda0=0"}, {"'lambda0'"});
}

TEST_F(KalmanCli, GkaBadConfig) {
  const fs::path src = vectors("gka");
  expect_accepted("gka", src.string(), {"--set", "a=0.5"});
  expect_rejected("gka", src.string(), {"--set", "a=0"}, {"'a'"});
  expect_rejected("gka", src.string(), {"--set", "solver=foo"}, {"'solver'"});
  expect_rejected("gka", src.string(), {"--set", "iters=-3"}, {"'iters'"});
  expect_rejected("gka", src.string(), {"--set", "lambda=0"}, {"'lambda'"});
}

TEST_F(KalmanCli, KalmanFilterBadInput) {
  const fs::path src = vectors("kalman_filter");
  expect_rejected("kalman_filter", src.string(), {"--set", "lambda=-1"}, {"'lambda'"});
}

}  // namespace
