// GPU tests of GKA's recurrent backward kernel (gpu/gka/sequential_backward.cu,
// `TTR_KERNEL(gka, cuda, sequential, backward)`, solver = chebyshev): bf16 and
// fp32 against the MPFR backward oracle (reference/gka/backward.hpp, the
// hand-derived adjoint) under the model gate/kernel_checks.hpp gives it (the
// sequential backward form's, gka declaring no chunk backward form) on the tiny
// suite; checkpoint segments (T = 130: 64 + 64 + 2 tokens), every optional input
// with its gradient (β, α, h0, hkk0) and both state cotangents, a fixed λ, K and V
// padded to 16, use_qk_l2norm_in_kernel, fewer steps with ω₀ = 0; a planted wrong
// gradient fails; repeated runs are bit-identical and a batch's heads equal the
// same heads run alone. Outputs are poisoned with NaN before every run. Label
// `gpu`; skipped without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "gate/error_model.hpp"
#include "gate/judge.hpp"
#include "gate/kernel_checks.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

using test::dims;
using test::report;
using test::worst_ratio;

const LayerEntry& gka() { return find_layer("gka"); }

// The gate's GKA configuration (solver = chebyshev, the kernels' only solver)
// added to each case's own.
std::vector<VectorCase> with_gate_config(std::vector<VectorCase> cases) {
  for (VectorCase& c : cases)
    for (const auto& kv : gate_config(gka().spec)) c.config.push_back(kv);
  return cases;
}

KernelCheckOptions backward_options() {
  KernelCheckOptions o;
  o.forms = {Form::sequential};
  o.direction = Direction::backward;
  o.launch.poison = true;
  return o;
}

TensorMap<double> run_backward(Tier dtype, const TensorMap<double>& in, const Config& cfg) {
  KernelOptions opt;
  opt.poison = true;
  return gka().kernel(Backend::cuda, Form::sequential, Direction::backward)->run(in, cfg, dtype, opt);
}

// Cases in parallel (test::check_units), reported in order: per case the kernel
// in bf16 and in fp32.
void check_cases(const std::vector<VectorCase>& cases, std::uint64_t seed) {
  std::vector<test::CheckUnit> units;
  for (const VectorCase& c : cases)
    units.push_back({c.name, &gka(), generate_backward_inputs(gka().spec, c, seed), Config::make(gka().spec, c.config)});
  test::check_units(units, seed, backward_options(), 2, /*rounding=*/true);
}

// Discoverable through the registry (run --device cuda --backward), and judged by
// the sequential backward form's model: gka's chunk backward form is another
// algorithm (Alg. 2 reverses the iteration the kernel stores), not its model.
TEST(CudaGkaBackward, KernelIsDeclaredWithTheSequentialModel) {
  ASSERT_NE(gka().kernel(Backend::cuda, Form::sequential, Direction::backward), nullptr);
  EXPECT_EQ(gka().kernel(Backend::cuda, Form::chunk, Direction::backward), nullptr);
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const ModelSpec ms = kernel_model(gka(), Form::sequential, dtype, 8, 1, Direction::backward);
    EXPECT_EQ(ms.form, Form::sequential) << tier_name(dtype);
    EXPECT_TRUE(ms.also.empty()) << tier_name(dtype);
    EXPECT_EQ(ms.dtype, dtype);
  }
}

TEST(CudaGkaBackward, TinySuitePassesTheModel) {
  TTR_REQUIRE_DEVICE();
  check_cases(with_gate_config(suite_cases(gka().spec, "tiny")), 71);
}

// Checkpoint segments of 64 tokens (T = 130: two full and a partial one), every
// optional input and cotangent, K, V padded to 16, a fixed λ, the in-kernel L2
// norm with fewer steps and ω₀ = 0 (then ρ-independent c_0 and the momentum
// weights start at 0), and write gates at their edges (β ∈ {0, 1}; β = 0 from the
// start leaves H_t = 0 exactly: λ_t = 0 tokens, through which no gradient flows).
TEST(CudaGkaBackward, SegmentsOptionsAndPadding) {
  TTR_REQUIRE_DEVICE();
  Regime opt, edges;
  opt.optional_inputs = true;
  edges.beta_edges = true;  // not decay_edges: γ = 1e-30 decays would underflow fp32's H_t to 0 where MPFR's is not
  check_cases(with_gate_config({
                  {"t130_optional", "", dims(1, 130, 1, 16, 16), opt, {}},
                  {"t70_k20_v12_optional_fixed_lambda", "", dims(1, 70, 1, 20, 12), opt, {{"lambda", "0.3"}}},
                  {"t40_l2norm_iters7", "", dims(1, 40, 2, 16, 16), {},
                   {{"use_qk_l2norm_in_kernel", "true"}, {"iters", "7"}, {"omega0", "0"}}},
                  {"t60_beta_edges", "", dims(1, 60, 2, 16, 16), edges, {}},
              }),
              72);
}

// A planted bug must fail: the kernel's gradients on other inputs (another seed)
// against this oracle, and one token's dk row with its sign flipped (found at
// that token).
TEST(CudaGkaBackward, WrongGradientsFailTheJudge) {
  TTR_REQUIRE_DEVICE();
  const VectorCase c = with_gate_config({{"small", "", dims(1, 50, 2, 16, 16), {}, {}}})[0];
  const TensorMap<double> in = generate_backward_inputs(gka().spec, c, 5),
                          other = generate_backward_inputs(gka().spec, c, 6);
  const Config cfg = Config::make(gka().spec, c.config);
  Judge judge(gka(), in, cfg, {Tier::mpfr, 128}, Direction::backward);
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const std::string what = tier_name(dtype);
    const ModelSpec ms = kernel_model(gka(), Form::sequential, dtype, 8, 5, Direction::backward);
    const TensorMap<double> good = run_backward(dtype, in, cfg);
    EXPECT_TRUE(judge(good, ms).pass) << what;
    EXPECT_FALSE(judge(run_backward(dtype, other, cfg), ms).pass) << what;
    TensorMap<double> bad = good;
    Tensor<double>& dk = bad.at("dk");
    const std::int64_t K = dk.dim(3), H = dk.dim(2), t = 37;
    for (std::int64_t i = 0; i < K; ++i) dk.data[static_cast<std::size_t>((t * H + 1) * K + i)] *= -1.0;
    const CheckResult r = judge(bad, ms);
    EXPECT_FALSE(r.pass) << what;
    for (const TensorVerdict& v : r.tensors)
      if (v.name == "dk") {
        EXPECT_FALSE(v.pass) << what;
        EXPECT_EQ(v.worst.t, t) << what;
        EXPECT_EQ(v.worst.h, 1) << what;
      }
  }
}

// B·H = 64 heads with every optional input: a repeated run is bit-identical (no
// atomics: every sum in a fixed order), and sampled heads equal, bit for bit, the
// same head run alone.
TEST(CudaGkaBackward, RepeatedRunsAndHeadsAloneAreBitIdentical) {
  TTR_REQUIRE_DEVICE();
  Regime opt;
  opt.optional_inputs = true;
  const VectorCase big = with_gate_config({{"batch", "", dims(4, 100, 16, 32, 32), opt, {}}})[0];
  const TensorMap<double> in = generate_backward_inputs(gka().spec, big, 31);
  const Config cfg = Config::make(gka().spec, big.config);
  const LayerSpec bspec = backward_spec(gka().spec);
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const std::string what = tier_name(dtype);
    const auto first = run_backward(dtype, in, cfg);
    EXPECT_EQ(first.size(), 8u) << what;  // dq, dk, dv, dg, dbeta, dalpha, dh0, dhkk0
    test::expect_same_bits(first, run_backward(dtype, in, cfg), what);
    for (const auto& [b, h] : std::vector<test::Head>{{0, 0}, {3, 15}}) {
      const auto alone = run_backward(dtype, test::slice_head(bspec, in, b, h), cfg);
      test::expect_head_equals_alone(bspec, first, alone, {b, h}, what);
    }
  }
}

}  // namespace
}  // namespace ttr
