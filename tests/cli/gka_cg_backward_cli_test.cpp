// GKA's CG solver through the backward file interface: `oracle --backward --set
// solver=cg` writes gradients (reverse mode over CG's iterates); `run --backward
// --arith fp64` agrees with them to float64's reach; `--certified` encloses them
// where MPFI can bound CG's divisors (2 steps on the tiny suite) and otherwise
// refuses with one line and exit 2, writing nothing (forward and backward; it used
// to abort inside Boost's noexcept interval comparison).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "oracles/io/safetensors.hpp"
#include "tests/support/cli.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::test::CliResult;
using ttr::test::run_cli;
using ttr::test::TempDir;

std::vector<double> tensor(const std::string& path, const std::string& name) {
  const auto f = ttr::io::read_safetensors(path);
  return ttr::io::to_f64(f.tensors.at(name), name);
}

class GkaCgCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const CliResult v = run_cli({"vectors", "--layer", "gka", "--suite", "tiny", "--backward", "--no-oracle", "--out",
                                 tmp_ / "v", "--seed", "3"});
    ASSERT_EQ(v.exit_code, 0) << v.err;
  }
  std::string in() const { return tmp_ / "v/gka.tiny.with_state.backward.inputs.safetensors"; }
  std::string fwd_in() const { return tmp_ / "v/gka.tiny.with_state.inputs.safetensors"; }
  TempDir tmp_;
};

TEST_F(GkaCgCli, OracleRunAndCertifiedEnclosure) {
  const std::string o = tmp_ / "o.safetensors", r = tmp_ / "r.safetensors";
  const CliResult a = run_cli({"oracle", "--backward", "--certified", "--layer", "gka", "--in", in(), "--out", o,
                               "--set", "solver=cg", "--set", "iters=2"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CliResult b = run_cli({"run", "--backward", "--layer", "gka", "--in", in(), "--out", r, "--arith", "fp64",
                               "--set", "solver=cg", "--set", "iters=2"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  for (const char* name : {"dq", "dk", "dv", "dg", "dh0"}) {
    const auto x = tensor(o, name), lo = tensor(o, std::string(name) + ".lower"),
               hi = tensor(o, std::string(name) + ".upper"), y = tensor(r, name);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_LE(lo[i], x[i]) << name << " " << i;
      EXPECT_LE(x[i], hi[i]) << name << " " << i;
      num = std::max(num, std::abs(y[i] - x[i]));
      den = std::max(den, std::abs(x[i]));
    }
    EXPECT_GT(den, 0.0) << name;
    EXPECT_LT(num / den, 1e-10) << name;  // 2 CG steps, T = 5: a few hundred roundings
  }
}

TEST_F(GkaCgCli, CertifiedRefusesWhereMpfiCannotEncloseCgsDivisors) {
  for (const bool backward : {true, false}) {
    const std::string out = tmp_ / "bad.safetensors";
    std::vector<std::string> args{"oracle", "--certified", "--layer", "gka", "--in", backward ? in() : fwd_in(),
                                  "--out",  out,           "--set",   "solver=cg", "--set", "iters=6"};
    if (backward) args.insert(args.begin() + 1, "--backward");
    const CliResult c = run_cli(args);
    EXPECT_EQ(c.exit_code, 2) << c.err;
    EXPECT_NE(c.err.find("solver=cg"), std::string::npos) << c.err;
    EXPECT_NE(c.err.find("contains 0"), std::string::npos) << c.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

}  // namespace
