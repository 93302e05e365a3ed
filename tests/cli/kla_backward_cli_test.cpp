// kla_kalman's chunk and scan backward forms (reference/kla_kalman/scan_backward.hpp)
// through the file interface, as a user runs them: `vectors --backward` on the
// tiny suite, `run --backward --form scan|chunk --arith bf16|fp32`, then `check
// --backward` under the same form and dtype passes (the correct kernels pass their
// own gradient model); the same gradients with one token's dk row doubled fail
// and name the tensor and the row.
#include <gtest/gtest.h>

#include <string>

#include "oracles/io/safetensors.hpp"
#include "oracles/oracle.hpp"
#include "tests/support/cli.hpp"

namespace {

using ttr::Tensor;
using ttr::TensorMap;
using ttr::test::CliResult;
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

TEST(KlaBackwardCli, ScanAndChunkBackwardPassCheckAndAPlantedRowFails) {
  TempDir tmp;
  const CliResult v = run_cli({"vectors", "--layer", "kla_kalman", "--suite", "tiny", "--backward", "--out",
                               tmp / "v", "--seed", "3"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const std::string in = tmp / "v/kla_kalman.tiny.with_state.backward.inputs.safetensors";
  const std::string oracle = tmp / "v/kla_kalman.tiny.with_state.backward.oracle.safetensors";
  for (const char* form : {"scan", "chunk"})
    for (const char* arith : {"bf16", "fp32"}) {
      const std::string what = std::string(form) + " " + arith;
      const std::string out = tmp / (std::string("g_") + form + "_" + arith + ".safetensors");
      const CliResult r = run_cli({"run", "--backward", "--layer", "kla_kalman", "--in", in, "--out", out, "--form",
                                   form, "--arith", arith, "--chunk-size", "2"});
      ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
      const CliResult pass = run_cli({"check", "--backward", "--layer", "kla_kalman", "--in", in, "--candidate", out,
                                      "--oracle", oracle, "--form", form, "--dtype", arith, "--chunk-size", "2"});
      EXPECT_EQ(pass.exit_code, 0) << what << ": " << pass.out << pass.err;

      // dk is [B,T,H,N] = [2,5,1,3]: double the row of token (b=1, t=3, h=0).
      TensorMap<double> bad = read_tensors(out);
      Tensor<double>& dk = bad.at("dk");
      const std::int64_t N = dk.dim(3), row = (1 * dk.dim(1) + 3) * dk.dim(2) + 0;
      for (std::int64_t i = 0; i < N; ++i) dk.data[row * N + i] = 2 * dk.data[row * N + i] + 0.25;
      const std::string bad_path = tmp / (std::string("bad_") + form + "_" + arith + ".safetensors");
      ttr::io::write_safetensors_atomic(bad_path, ttr::to_file(bad, ttr::io::DType::F32, {{"layer", "kla_kalman"}}));
      const CliResult fail = run_cli({"check", "--backward", "--layer", "kla_kalman", "--in", in, "--candidate",
                                      bad_path, "--oracle", oracle, "--form", form, "--dtype", arith, "--chunk-size",
                                      "2"});
      EXPECT_EQ(fail.exit_code, 1) << what << ": " << fail.out << fail.err;
      bool named = false;
      for (std::size_t p = fail.out.find("dk"); p != std::string::npos; p = fail.out.find("dk", p + 1)) {
        const std::size_t eol = fail.out.find('\n', p);
        const std::string line = fail.out.substr(p, eol - p);
        named = named || (line.find("(1,3,0)") != std::string::npos && line.find("FAIL") != std::string::npos);
      }
      EXPECT_TRUE(named) << what << ": the dk line names row (1,3,0) and fails\n" << fail.out;
    }
}

}  // namespace
