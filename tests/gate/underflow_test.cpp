// Gradual underflow in the error model (reference/core/mca.hpp): below a
// format's smallest normal number rounding is absolute (≤ u·min_normal), and the
// Monte Carlo model must say so, or a correct chunk kernel whose e^{b_t} or
// Q ⊙ e^{b} falls into the subnormal range fails the gate.
//
// The regression inputs (tests/gate/data/gdn_chunk_underflow_*.safetensors) were
// found by the libFuzzer layer harness (docs/fuzzing-harnesses.md): gated_delta_rule
// with a chunk's cumulative log decay below −88 (ln of fp32's smallest normal
// ≈ −87.3). Outputs there are ~5e-38 while other tokens are ~1e3; the chunk form
// keeps only the bits above 2^-133 (bf16) or 2^-149 (fp32) of them. With a purely
// relative model the check failed at exactly those tokens (bf16 ratio 81.5, fp32
// 3.55e3 at C = 8); the sequential form, which never forms e^{b_t}, passed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference/core/mca.hpp"
#include "tests/support/cli.hpp"

namespace ttr::test {
namespace {

// Perturbations of subnormal values are absolute, up to u·min_normal (half the
// subnormal spacing), and use that whole interval; normal values keep the
// relative bound.
TEST(McaUnderflow, SubnormalRangeIsPerturbedAbsolutely) {
  struct Case {
    McaFormat f;
    double u, min_normal;
  };
  for (const Case c : {Case{McaFormat::fp32, 0x1p-24, 0x1p-126}, Case{McaFormat::bf16, 0x1p-8, 0x1p-126},
                       Case{McaFormat::fp16, 0x1p-11, 0x1p-14}}) {
    mca_seed(3, 0.0, McaFormat::any, c.u, c.f);
    double worst_abs = 0, worst_rel_normal = 0;
    for (int i = 0; i < 20000; ++i) {
      const double tiny = c.min_normal * (0.001 + 0.9 * i / 20000.0) * (1 + 1e-9);  // subnormal, mostly inexact
      const double y = McaPolicy::narrow(McaReal(tiny)).value();
      worst_abs = std::max(worst_abs, std::fabs(y - tiny));
      const double big = c.min_normal * (3.0 + i * 1e-3) * (1 + 1e-9);
      worst_rel_normal = std::max(worst_rel_normal, std::fabs(McaPolicy::narrow(McaReal(big)).value() - big) / big);
    }
    const double eta = c.u * c.min_normal;
    EXPECT_LE(worst_abs, eta);
    EXPECT_GT(worst_abs, 0.9 * eta);                 // absolute: far above u·|x| for small x
    EXPECT_LE(worst_rel_normal, c.u);
    EXPECT_GT(worst_rel_normal, 0.9 * c.u);
    EXPECT_EQ(McaPolicy::narrow(McaReal(0.0)).value(), 0.0);  // zero stays zero
  }
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
}

// The fuzz findings replay through `ttrcheck run` + `ttrcheck check` and pass in
// both dtypes at the chunk sizes they were found at.
// The Monte Carlo tier's power-of-two scaling (mca_exponent, mca_ldexp: the exponent
// field read and written directly) gives std::frexp's exponent and std::ldexp's value,
// bit for bit, on random doubles of every binade and sign, scaled by every shift that
// keeps, leaves or crosses the normal range, and on zeros, subnormals, ±inf and NaN.
TEST(McaUnderflow, ExponentFieldScalingEqualsTheLibrary) {
  const auto same = [](double a, double b) {
    std::uint64_t x, y;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y || (std::isnan(a) && std::isnan(b));
  };
  std::vector<double> xs = {0.0, -0.0, 0x1p-1074, -0x1p-1074, 0x1p-1022, 0x1.fffffffffffffp-1023, 0x1p-1023,
                            1.0, -1.0, 0.5, 0x1.fffffffffffffp+1023, -0x1p+1023,
                            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::uint64_t b = rng();
    double x;
    std::memcpy(&x, &b, sizeof x);
    xs.push_back(x);
  }
  const int shifts[] = {0, 1, -1, 7, -7, 52, -52, 300, -300, 1022, -1022, 1023, -1023, 1074, -1074, 1075,
                        -1075, 2046, -2046, 2100, -2100, 1 << 20, -(1 << 20)};
  int checked = 0;
  for (double x : xs) {
    int e_lib = 0;
    if (x != 0.0 && std::isfinite(x)) std::frexp(x, &e_lib);
    ASSERT_EQ(mca_exponent(x), e_lib) << x;
    for (int s : shifts) {
      ASSERT_TRUE(same(mca_ldexp(x, s), std::ldexp(x, s))) << x << " * 2^" << s;
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(xs.size() * std::size(shifts)));
}

TEST(McaUnderflow, GdnChunkFormWithSubnormalDecaysPassesTheCheck) {
  const TempDir dir;
  struct Finding {
    const char* file;
    int chunk;
  };
  for (const Finding f : {Finding{"gdn_chunk_underflow_c8", 8}, Finding{"gdn_chunk_underflow_c16_a", 16},
                          Finding{"gdn_chunk_underflow_c16_b", 16}})
    for (const char* dtype : {"bf16", "fp32"}) {
      const std::string in = (source_dir() / "tests/gate/data" / (std::string(f.file) + ".safetensors")).string();
      const std::string out = dir / (std::string(f.file) + "_" + dtype + ".safetensors");
      const std::string C = std::to_string(f.chunk);
      const CliResult run = run_cli({"run", "--layer", "gated_delta_rule", "--in", in, "--out", out, "--arith", dtype,
                                     "--form", "chunk", "--chunk-size", C});
      ASSERT_EQ(run.exit_code, 0) << run.err;
      const CliResult check = run_cli({"check", "--layer", "gated_delta_rule", "--in", in, "--candidate", out,
                                       "--dtype", dtype, "--chunk-size", C});
      EXPECT_EQ(check.exit_code, 0) << f.file << " " << dtype << "\n" << check.out << check.err;
    }
}

}  // namespace
}  // namespace ttr::test
