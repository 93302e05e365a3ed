// GPU tests of kla_kalman's CUDA kernels (gpu/kla_kalman/): the chunked two-level
// scan and the sequential kernel × {bf16, fp32} against the MPFR oracle under the
// gate's error model (gate/kernel_checks.hpp) on the tiny and standard suites, chunk
// vs sequential, T not a multiple of the chunk (64), a batch that fills the GPU,
// and bit-identical repeated runs. Label `gpu`; without a device every test is
// skipped ("skipped: no CUDA device").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <thread>

#include "gate/kernel_checks.hpp"
#include "tests/gpu/gpu_checks.hpp"
#include "gate/error_model.hpp"
#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "tests/support/kla_finding.hpp"

namespace ttr {
namespace {

using test::check_unit;
using test::run_kernel;

using test::dims;
using test::expect_pass;
using test::report;
using test::worst_ratio;

void check_cases(const std::vector<VectorCase>& cases, std::uint64_t seed, bool split = false) {
  test::check_cases(find_layer("kla_kalman"), cases, seed, split);
}

TEST(CudaKla, TinySuitePassesTheGate) {
  TTR_REQUIRE_DEVICE();
  check_cases(suite_cases(find_layer("kla_kalman").spec, "tiny"), 41);
}

TEST(CudaKla, StandardSuitePassesTheGate) {
  TTR_REQUIRE_DEVICE();
  // B=2 T=1024 H=4 N=D=64: one unit per head (8 in parallel).
  check_cases(suite_cases(find_layer("kla_kalman").spec, "standard"), 42, /*split=*/true);
}

// Chunk boundaries: T = 64 (one full chunk), 65 (one token past it), 130 and 200
// (partial last chunks), with and without initial states, N ≠ D, D not a multiple
// of the 64 columns a block owns (D = 80: a second, partial column tile).
TEST(CudaKla, ChunkBoundariesAndInitialStates) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  check_cases({{"t64", "", dims(1, 64, 1, 8, 16), {}, {}},
               {"t65_init", "", dims(1, 65, 2, 16, 8), states, {}},
               {"t130_d80_init", "", dims(1, 130, 1, 4, 80), states, {}},
               {"t200_n16_d64", "", dims(2, 200, 2, 16, 64), {}, {}}},
              43);
}

// The fuzz finding that made the paper's representation overflow (58 of 600 CUDA
// cases; shrunk to T = 5, tests/support/kla_finding.hpp): the scaled chunk and
// recurrent kernels are finite and pass in both dtypes; the unscaled one still returns NaN, and
// the judge calls that a range finding (Λ_t beyond fp32 in that form's exact
// computation), not a kernel failure, unless --strict-range.
TEST(CudaKla, OverflowFindingPassesScaledAndIsRangeUnscaled) {
  TTR_REQUIRE_DEVICE();
  const LayerEntry& e = find_layer("kla_kalman");
  const TensorMap<double> in = test::kla_overflow_finding();
  const Config cfg = Config::make(e.spec, {});
  Judge judge(e, in, cfg, {Tier::mpfr, 128});
  for (double x : judge.oracle().at("o").data) ASSERT_TRUE(std::isfinite(x) && x != 0);
  for (Tier dtype : {Tier::fp32, Tier::bf16}) {
    SCOPED_TRACE(tier_name(dtype));
    for (Form f : {Form::chunk, Form::sequential}) {  // both scaled (the recurrent one since 2026-11-26)
      const TensorMap<double> good = run_kernel("kla_kalman", f, dtype, in, cfg);
      EXPECT_EQ(test::nans(good.at("o")) + test::nans(good.at("o_var")) + test::nans(good.at("eta_T")), 0)
          << form_name(f);
      const CheckResult ok = judge(good, kernel_model(e, f, dtype, 8, 1));
      EXPECT_TRUE(ok.pass) << form_name(f) << ": max ratio " << worst_ratio(ok);
      EXPECT_FALSE(ok.range.beyond) << form_name(f);
    }

    const TensorMap<double> bad = run_kernel("kla_kalman", Form::chunk_unscaled, dtype, in, cfg);
    EXPECT_GT(test::nans(bad.at("o")), 0) << "the paper's representation should still overflow here";
    const CheckResult r = judge(bad, kernel_model(Form::chunk_unscaled, dtype, 8, 1));
    EXPECT_TRUE(r.range.beyond);
    EXPECT_EQ(r.range.intermediate, "precision Λ_t = P_t(Λ_0)");
    EXPECT_TRUE(r.pass) << "a range finding is not a failure by default";
  }
}

// A planted bug must fail: outputs of other inputs (another seed) against this
// oracle are far outside the model.
TEST(CudaKla, WrongOutputFailsTheComparison) {
  TTR_REQUIRE_DEVICE();
  const LayerEntry& e = find_layer("kla_kalman");
  const VectorCase c{"small", "", dims(1, 100, 2, 8, 16), {}, {}};
  const TensorMap<double> in = generate_inputs(e.spec, c, 5), other = generate_inputs(e.spec, c, 6);
  const Config cfg = Config::make(e.spec, c.config);
  const TensorMap<double> oracle = run_layer(e, Form::sequential, {Tier::mpfr, 128}, in, cfg).values;
  ModelSpec ms;
  ms.chunk_size = kKernelChunkSize;
  ms.dtype = Tier::bf16;
  const ErrorModel model = model_errors(e, in, cfg, oracle, ms);
  EXPECT_TRUE(compare(e.spec, oracle, model, run_kernel("kla_kalman", Form::chunk, Tier::bf16, in, cfg)).pass);
  EXPECT_FALSE(
      compare(e.spec, oracle, model, run_kernel("kla_kalman", Form::chunk, Tier::bf16, other, cfg)).pass);
}

// B·H = 256 heads × 3 chunks × 2 column tiles: sampled heads equal the same head
// run alone bit for bit, the single-head chunk runs pass the oracle, and a repeated
// run is bit-identical (test::check_full_batch).
TEST(CudaKla, FullGpuBatchIsPerHeadExactAndDeterministic) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const std::vector<test::Head> heads = {{0, 0}, {3, 17}, {7, 31}};
  test::check_full_batch(find_layer("kla_kalman"), {"fill", "", dims(8, 150, 32, 16, 96), states, {}}, 51, heads,
                         heads);
}

}  // namespace
}  // namespace ttr
