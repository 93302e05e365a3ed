// GPU tests of kla_kalman's chunked-scan backward kernel
// (gpu/kla_kalman/scan_backward.cu, `TTR_KERNEL(kla_kalman, cuda, chunk,
// backward)`) × {bf16, fp32} against the MPFR backward oracle (the hand-derived
// adjoint in moment coordinates, reference/kla_kalman/backward.hpp) under the
// error model of the CPU `chunk` backward form at C = 64 (gate/kernel_checks.hpp):
// the tiny and standard suites; chunk boundaries (T = 64, 65, 130, 200), N ≠ D,
// with and without the optional cotangents and initial states; the overflow
// regime that needs the scaled adjoint (p̄ = 0, small ā: Λ_T² dΛ_T beyond fp32
// while the gradients are not); a planted wrong gradient fails at its row; a
// full batch is bit-identical on a repeated run and per head equal to the head
// alone. Outputs are poisoned with NaN before every run. Label `gpu`; skipped
// without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <string>

#include "gate/error_model.hpp"
#include "gate/judge.hpp"
#include "gate/kernel_checks.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/gpu/gpu_checks.hpp"
#include "tests/support/kla_finding.hpp"

namespace ttr {
namespace {

using test::dims;
using test::report;
using test::worst_ratio;

const LayerEntry& kla() { return find_layer("kla_kalman"); }

TensorMap<double> run_backward(Tier dtype, const TensorMap<double>& in, const Config& cfg) {
  KernelOptions opt;
  opt.poison = true;
  return kla().kernel(Backend::cuda, Form::chunk, Direction::backward)->run(in, cfg, dtype, opt);
}

// Units in parallel (test::check_units): a check per dtype.
void check_units(const std::vector<test::CheckUnit>& units, std::uint64_t seed) {
  KernelCheckOptions o;
  o.forms = {Form::chunk};
  o.direction = Direction::backward;
  o.launch.poison = true;
  test::check_units(units, seed, o, 2, /*rounding=*/true);
}

std::vector<test::CheckUnit> suite_units(const std::string& suite, std::uint64_t seed, bool split) {
  std::vector<test::CheckUnit> units;
  const LayerSpec bspec = backward_spec(kla().spec);
  for (const VectorCase& c : suite_cases(kla().spec, suite)) {
    const TensorMap<double> in = generate_backward_inputs(kla().spec, c, seed);
    const Config cfg = Config::make(kla().spec, c.config);
    if (!split) {
      units.push_back({c.name, &kla(), in, cfg});
      continue;
    }
    for (std::int64_t b = 0; b < in.at("q").dim(0); ++b)
      for (std::int64_t h = 0; h < in.at("q").dim(2); ++h)
        units.push_back({fmt::format("{}_b{}h{}", c.name, b, h), &kla(), test::slice_head(bspec, in, b, h), cfg});
  }
  return units;
}

TEST(CudaKlaBackward, KernelIsDeclaredWithTheChunkBackwardModel) {
  const KernelImpl* k = kla().kernel(Backend::cuda, Form::chunk, Direction::backward);
  ASSERT_NE(k, nullptr) << "run --device cuda --backward and the gate find it through the registry";
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const ModelSpec ms = kernel_model(kla(), Form::chunk, dtype, 8, 1, Direction::backward);
    EXPECT_EQ(ms.form, Form::chunk);
    EXPECT_EQ(ms.direction, Direction::backward);
    EXPECT_EQ(ms.chunk_size, kKernelChunkSize);
  }
}

TEST(CudaKlaBackward, TinySuitePassesTheModel) {
  TTR_REQUIRE_DEVICE();
  check_units(suite_units("tiny", 41, false), 41);
}

TEST(CudaKlaBackward, StandardSuitePassesTheModel) {
  TTR_REQUIRE_DEVICE();
  check_units(suite_units("standard", 42, true), 42);
}

// Chunk boundaries of the forward grid the adjoint scans run over (the reversed
// sequence's partial chunk is the forward's last): T = 64, 65, 130, 200; N ≠ D;
// D = 80; with every optional input and cotangent, and without any.
TEST(CudaKlaBackward, ChunkBoundariesAndOptionalInputs) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const std::vector<VectorCase> cases = {{"t64", "", dims(1, 64, 1, 8, 16), states, {}},
                                         {"t65", "", dims(1, 65, 2, 16, 8), states, {}},
                                         {"t130_d80", "", dims(1, 130, 1, 4, 80), states, {}},
                                         {"t200_n16_d64", "", dims(2, 200, 2, 16, 64), states, {}}};
  std::vector<test::CheckUnit> units;
  for (const VectorCase& c : cases) {
    TensorMap<double> in = generate_backward_inputs(kla().spec, c, 43);
    const Config cfg = Config::make(kla().spec, c.config);
    units.push_back({c.name, &kla(), in, cfg});
    for (const char* name : {"lambda_init", "eta_init", "do_var", "dlambda_T", "deta_T"}) in.erase(name);
    units.push_back({c.name + "_bare", &kla(), in, cfg});
  }
  check_units(units, 43);
}

// The regime the scaled adjoint exists for (tests/backward/kla_scan_backward_test.cpp):
// p̄ = 0, ā = 2^-8, T = 7, Λ_T ≈ 2^112: the terminal values Λ_T² dΛ_T, Λ_T η_T dη_T
// overflow fp32 while every gradient but dp̄ is an ordinary fp32 number.
TEST(CudaKlaBackward, OverflowRegimeIsFiniteAndPasses) {
  TTR_REQUIRE_DEVICE();
  const Config cfg = Config::make(kla().spec, {{"scale", "0.5"}});
  const TensorMap<double> in = test::kla_backward_case(7, std::ldexp(1.0, -8), 0.0, 0.0625);
  Judge judge(kla(), in, cfg, Arith{Tier::mpfr, 256}, Direction::backward);
  for (Tier dtype : {Tier::fp32, Tier::bf16}) {
    const TensorMap<double> got = run_backward(dtype, in, cfg);
    const CheckResult r = judge(got, kernel_model(kla(), Form::chunk, dtype, 8, 1, Direction::backward));
    report({GateCheck{fmt::format("kla_kalman/cuda-chunk-backward/{}/overflow_regime/1", tier_name(dtype)), r}});
    EXPECT_TRUE(r.pass) << tier_name(dtype);
    EXPECT_FALSE(r.range.beyond) << tier_name(dtype);
    for (const TensorVerdict& t : r.tensors) {
      EXPECT_EQ(t.nonfinite_failures, 0) << tier_name(dtype) << " " << t.name;
      if (t.name != "dp_bar") {  // dp̄ ~ Λ² is beyond fp32 here, faithfully inf
        EXPECT_EQ(t.nan_count + t.inf_count, 0) << tier_name(dtype) << " " << t.name;
      }
    }
  }
}

// A planted bug must fail: another seed's gradients against this oracle, and one
// token's dk row doubled (located at its token and head).
TEST(CudaKlaBackward, WrongGradientsFailTheJudge) {
  TTR_REQUIRE_DEVICE();
  const VectorCase c{"small", "", dims(1, 100, 2, 8, 16), {}, {}};
  const TensorMap<double> in = generate_backward_inputs(kla().spec, c, 5),
                          other = generate_backward_inputs(kla().spec, c, 6);
  const Config cfg = Config::make(kla().spec, c.config);
  Judge judge(kla(), in, cfg, {Tier::mpfr, 128}, Direction::backward);
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const ModelSpec ms = kernel_model(kla(), Form::chunk, dtype, 8, 5, Direction::backward);
    const TensorMap<double> good = run_backward(dtype, in, cfg);
    EXPECT_TRUE(judge(good, ms).pass) << tier_name(dtype);
    EXPECT_FALSE(judge(run_backward(dtype, other, cfg), ms).pass) << tier_name(dtype);
    TensorMap<double> bad = good;
    Tensor<double>& dk = bad.at("dk");
    const std::int64_t N = dk.dim(3), H = dk.dim(2), t = 77;
    for (std::int64_t i = 0; i < N; ++i) dk.data[static_cast<std::size_t>((t * H + 1) * N + i)] *= 2.0;
    const CheckResult r = judge(bad, ms);
    EXPECT_FALSE(r.pass) << tier_name(dtype);
    for (const TensorVerdict& v : r.tensors)
      if (v.name == "dk") {
        EXPECT_FALSE(v.pass) << tier_name(dtype);
        EXPECT_EQ(v.worst.t, t) << tier_name(dtype);
        EXPECT_EQ(v.worst.h, 1) << tier_name(dtype);
      }
  }
}

// B·H = 256 heads × 3 chunks: a repeated run is bit-identical (no atomics: dā, dp̄
// are summed per chunk, then over chunks and batch rows in order), and the
// per-token gradients of sampled heads equal, bit for bit, the same head run alone
// (dā, dp̄ sum over the batch rows: compared on a one-row batch instead).
TEST(CudaKlaBackward, FullGpuBatchIsPerHeadExactAndDeterministic) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const LayerSpec bspec = backward_spec(kla().spec);
  const VectorCase big{"fill", "", dims(8, 150, 32, 16, 32), states, {}};
  const TensorMap<double> in = generate_backward_inputs(kla().spec, big, 31);
  const Config cfg = Config::make(kla().spec, big.config);
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const std::string what = tier_name(dtype);
    const auto first = run_backward(dtype, in, cfg);
    EXPECT_EQ(first.size(), 8u) << what;  // dq, dk, dv, dlambda_v, da_bar, dp_bar, dlambda_init, deta_init
    test::expect_same_bits(first, run_backward(dtype, in, cfg), what);
    for (const auto& [b, h] : std::vector<test::Head>{{0, 0}, {3, 17}, {7, 31}}) {
      const auto alone = run_backward(dtype, test::slice_head(bspec, in, b, h), cfg);
      test::expect_head_equals_alone(bspec, first, alone, {b, h}, what, {"da_bar", "dp_bar"});
    }
  }
}

}  // namespace
}  // namespace ttr