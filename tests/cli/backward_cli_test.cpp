// The backward direction through the file interface (`vectors --backward`,
// `oracle --backward`, `run --backward`, `check --backward`), checked against
// hand-derived values and the interface's error rules: a missing or misshapen
// cotangent, a NaN in `do`, a missing gradient → exit 2 naming it, nothing left
// behind; a planted one-row error fails `check` and names its row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "gpu/binding/device.hpp"
#include "oracles/io/safetensors.hpp"
#include "oracles/oracle.hpp"
#include "tests/support/cli.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::Tensor;
using ttr::TensorMap;
using ttr::test::CliResult;
using ttr::test::entries_of;
using ttr::test::run_cli;
using ttr::test::TempDir;

TensorMap<double> read_tensors(const std::string& path) {
  const auto f = ttr::io::read_safetensors(path);
  TensorMap<double> out;
  for (const auto& [name, raw] : f.tensors) {
    out[name] = Tensor<double>{raw.shape, 0.0};
    out[name].data = ttr::io::to_f64(raw, name);
  }
  return out;
}

void write_tensors(const std::string& path, const TensorMap<double>& t, ttr::io::DType dtype) {
  ttr::io::write_safetensors_atomic(path, ttr::to_file(t, dtype, {{"layer", "gated_delta_rule"}}));
}

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class BackwardCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const CliResult v = run_cli({"vectors", "--layer", "gated_delta_rule", "--suite", "tiny", "--backward", "--out",
                                 tmp_ / "v", "--seed", "5"});
    ASSERT_EQ(v.exit_code, 0) << v.err;
  }
  std::string in() const { return tmp_ / "v/gated_delta_rule.tiny.with_state.backward.inputs.safetensors"; }
  std::string stored() const { return tmp_ / "v/gated_delta_rule.tiny.with_state.backward.oracle.safetensors"; }
  TempDir tmp_;
};

// The vectors hold the forward inputs, every cotangent, and gradients that the
// oracle command recomputes bit for bit; the gradients include dh0 (h0 given).
TEST_F(BackwardCli, VectorsCarryCotangentsAndTheGradientOracle) {
  const TensorMap<double> x = read_tensors(in());
  for (const char* name : {"q", "k", "v", "g", "beta", "h0", "do", "dht"}) EXPECT_TRUE(x.count(name)) << name;
  const TensorMap<double> grads = read_tensors(stored());
  for (const char* name : {"dq", "dk", "dv", "dg", "dbeta", "dh0"}) EXPECT_TRUE(grads.count(name)) << name;
  const CliResult o = run_cli({"oracle", "--backward", "--layer", "gated_delta_rule", "--in", in(), "--out",
                               tmp_ / "g.safetensors"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(read_tensors(tmp_ / "g.safetensors").at("dv").data, grads.at("dv").data);
  EXPECT_EQ(ttr::io::read_safetensors(tmp_ / "g.safetensors").metadata.at("direction"), "backward");
}

// dv at the last token with dht = 0: only o_T reads v_T, through S_T's write
// k_T β_T (v_T − ...)ᵀ, so dv_T = scale·β_T (k_T·q_T) do_T (hand-derived).
TEST_F(BackwardCli, LastTokenValueGradientIsTheHandDerivedOne) {
  TensorMap<double> x = read_tensors(in());
  x.erase("dht");
  write_tensors(tmp_ / "nodht.safetensors", x, ttr::io::DType::F64);
  ASSERT_EQ(run_cli({"oracle", "--backward", "--layer", "gated_delta_rule", "--in", tmp_ / "nodht.safetensors",
                     "--out", tmp_ / "g.safetensors"})
                .exit_code,
            0);
  const TensorMap<double> g = read_tensors(tmp_ / "g.safetensors");
  const auto& q = x.at("q");
  const std::int64_t B = q.dim(0), L = q.dim(1), H = q.dim(2), K = q.dim(3), V = x.at("v").dim(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(K));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t t = L - 1, row = (b * L + t) * H + h;
      double kq = 0;
      for (std::int64_t i = 0; i < K; ++i) kq += x.at("k").data[row * K + i] * q.data[row * K + i];
      for (std::int64_t j = 0; j < V; ++j) {
        const double want = scale * x.at("beta").data[row] * kq * x.at("do").data[row * V + j];
        EXPECT_NEAR(g.at("dv").data[row * V + j], want, 1e-14 * (1 + std::fabs(want))) << "b=" << b << " h=" << h;
      }
    }
}

TEST_F(BackwardCli, CertifiedGradientsEncloseThePointValue) {
  const CliResult o = run_cli({"oracle", "--backward", "--certified", "--layer", "gated_delta_rule", "--in", in(),
                               "--out", tmp_ / "c.safetensors"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const TensorMap<double> c = read_tensors(tmp_ / "c.safetensors");
  for (const char* name : {"dq", "dk", "dv", "dg", "dbeta", "dh0"}) {
    const auto &x = c.at(name), &lo = c.at(std::string(name) + ".lower"), &hi = c.at(std::string(name) + ".upper");
    for (std::size_t i = 0; i < x.data.size(); ++i) {
      EXPECT_LE(lo.data[i], x.data[i]) << name << " " << i;
      EXPECT_LE(x.data[i], hi.data[i]) << name << " " << i;
      // The enclosure is tight at 256 bits and stored outward-rounded in F64: at
      // most a couple of float64 ulps wide.
      EXPECT_LE(hi.data[i] - lo.data[i], 0x1p-51 * std::max(std::fabs(lo.data[i]), std::fabs(hi.data[i])) + 1e-300)
          << name << " " << i;
    }
  }
}

// The exact gradients rounded to bf16 pass `check --backward`; one token's row
// of dk replaced fails and is named; a NaN in dg fails and is named; a missing
// dk is bad input.
TEST_F(BackwardCli, CheckJudgesGradients) {
  TensorMap<double> grads = read_tensors(stored());
  write_tensors(tmp_ / "bf16.safetensors", grads, ttr::io::DType::BF16);
  const CliResult pass = run_cli({"check", "--backward", "--layer", "gated_delta_rule", "--in", in(), "--candidate",
                                  tmp_ / "bf16.safetensors", "--oracle", stored()});
  EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;

  TensorMap<double> bad = grads;
  auto& dk = bad.at("dk");  // [B,T,H,K]: token (b=1, t=3, h=0)
  const std::int64_t K = dk.dim(3), row = (1 * dk.dim(1) + 3) * dk.dim(2) + 0;
  for (std::int64_t i = 0; i < K; ++i) dk.data[row * K + i] = -2 * dk.data[row * K + i] + 0.5;
  write_tensors(tmp_ / "bad.safetensors", bad, ttr::io::DType::F32);
  const CliResult fail = run_cli({"check", "--backward", "--layer", "gated_delta_rule", "--in", in(), "--candidate",
                                  tmp_ / "bad.safetensors", "--dtype", "fp32"});
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  EXPECT_NE(fail.out.find("dk"), std::string::npos) << fail.out;
  EXPECT_NE(fail.out.find("(1,3,0)"), std::string::npos) << fail.out;

  TensorMap<double> nan = grads;
  nan.at("dg").data[2] = std::nan("");
  write_tensors(tmp_ / "nan.safetensors", nan, ttr::io::DType::F32);
  const CliResult n = run_cli({"check", "--backward", "--layer", "gated_delta_rule", "--in", in(), "--candidate",
                               tmp_ / "nan.safetensors", "--dtype", "fp32", "--oracle", stored()});
  EXPECT_EQ(n.exit_code, 1) << n.out << n.err;
  EXPECT_NE(n.out.find("dg"), std::string::npos) << n.out;

  TensorMap<double> missing = grads;
  missing.erase("dk");
  write_tensors(tmp_ / "missing.safetensors", missing, ttr::io::DType::F32);
  const CliResult m = run_cli({"check", "--backward", "--layer", "gated_delta_rule", "--in", in(), "--candidate",
                               tmp_ / "missing.safetensors", "--oracle", stored(), "--report", tmp_ / "r.json"});
  EXPECT_EQ(m.exit_code, 2) << m.out << m.err;
  EXPECT_NE(m.err.find("missing tensor 'dk'"), std::string::npos) << m.err;
  EXPECT_FALSE(fs::exists(tmp_ / "r.json"));
}

// Every bad-input case of the backward interface exits 2 naming the tensor and
// leaves no output behind.
TEST_F(BackwardCli, BadCotangentsAreRefused) {
  const TensorMap<double> x = read_tensors(in());
  const auto refused = [&](const TensorMap<double>& inputs, const std::string& needle) {
    write_tensors(tmp_ / "bad_in.safetensors", inputs, ttr::io::DType::F64);
    const std::string before = bytes_of(tmp_ / "bad_in.safetensors");
    const CliResult r = run_cli({"oracle", "--backward", "--layer", "gated_delta_rule", "--in",
                                 tmp_ / "bad_in.safetensors", "--out", (tmp_.path() / "out" / "g.safetensors").string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(bytes_of(tmp_ / "bad_in.safetensors"), before);
    EXPECT_TRUE(entries_of(tmp_.path() / "out").empty());
  };
  fs::create_directories(tmp_.path() / "out");
  TensorMap<double> no_do = x;
  no_do.erase("do");
  refused(no_do, "'do'");
  TensorMap<double> short_do = x;
  short_do.at("do").shape.back() += 1;
  short_do.at("do").data.resize(static_cast<std::size_t>(short_do.at("do").numel()), 0.0);
  refused(short_do, "'do'");
  TensorMap<double> nan_do = x;
  nan_do.at("do").data[0] = std::nan("");
  refused(nan_do, "'do'");
  TensorMap<double> bad_dht = x;
  bad_dht.at("dht").shape = {2, 1, 2, 3, 1};
  refused(bad_dht, "'dht'");
  // A forward file (no cotangents at all) given to --backward.
  refused(read_tensors(tmp_ / "v/gated_delta_rule.tiny.with_state.inputs.safetensors"), "'do'");
}

TEST_F(BackwardCli, RunComputesTheBackwardInAnArithmetic) {
  const CliResult r = run_cli({"run", "--backward", "--layer", "gated_delta_rule", "--in", in(), "--out",
                               tmp_ / "r.safetensors", "--arith", "fp32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const CliResult c = run_cli({"check", "--backward", "--layer", "gated_delta_rule", "--in", in(), "--candidate",
                               tmp_ / "r.safetensors", "--oracle", stored(), "--form", "sequential"});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  // The CUDA backward kernels (chunk and fused recurrent) are found through the
  // registry: without a device both forms reach the device check (a missing
  // kernel would be named instead), and nothing is written.
  if (!ttr::device::status().usable())  // with a device, tests/gpu/ covers the kernels
    for (const char* form : {"chunk", "sequential"}) {
      const CliResult cuda = run_cli({"run", "--backward", "--device", "cuda", "--layer", "gated_delta_rule", "--form",
                                      form, "--in", in(), "--out", tmp_ / "x.safetensors", "--arith", "fp32"});
      EXPECT_EQ(cuda.exit_code, 2) << form;
      EXPECT_NE(cuda.err.find("--device cuda: skipped: "), std::string::npos) << form << ": " << cuda.err;
      EXPECT_FALSE(std::filesystem::exists(tmp_ / "x.safetensors")) << form;
    }
}

}  // namespace
