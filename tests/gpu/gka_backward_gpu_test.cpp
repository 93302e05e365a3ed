// GPU tests of GKA's backward kernels, solver = chebyshev: the chunk backward
// (gpu/gka/chunk_backward.cu, `TTR_KERNEL(gka, cuda, chunk, backward)`, GKA Alg. 2
// for all tokens of a chunk at once) and the recurrent one
// (gpu/gka/sequential_backward.cu, the GPU's own reference). bf16 and fp32 against
// the MPFR backward oracle (reference/gka/backward.hpp, the hand-derived adjoint)
// under the models gate/kernel_checks.hpp gives them (the chunk kernel: the chunk
// backward form's at C = 64; the recurrent kernel: the sequential backward form's,
// gka's chunk backward being another algorithm), and against each other (their
// models in quadrature), on the tiny suite; chunk and checkpoint boundaries
// (T = 130: 64 + 64 + 2 tokens; T = 200), every optional input with its gradient
// (β, α, h0, hkk0) and both state cotangents, a fixed λ, K and V padded to 16,
// use_qk_l2norm_in_kernel, fewer steps with ω₀ = 0, tokens with H_t = 0 under a
// fixed λ (ρ = 0, where Alg. 2 cannot reverse); a planted wrong gradient fails;
// repeated runs are bit-identical and a batch's heads equal the same heads run
// alone. Outputs are poisoned with NaN before every run. Label `gpu`; skipped
// without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "gate/error_model.hpp"
#include "gate/judge.hpp"
#include "gate/kernel_checks.hpp"
#include "gate/mutants.hpp"
#include "oracles/error.hpp"
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

// Both kernels, and the chunk kernel against the recurrent one (their models in
// quadrature: "chunk ≡ recurrent within the model").
KernelCheckOptions backward_options() {
  KernelCheckOptions o;
  o.forms = {Form::chunk, Form::sequential};
  o.cross = true;
  o.direction = Direction::backward;
  o.launch.poison = true;
  return o;
}

TensorMap<double> run_backward(Form form, Tier dtype, const TensorMap<double>& in, const Config& cfg) {
  KernelOptions opt;
  opt.poison = true;
  return gka().kernel(Backend::cuda, form, Direction::backward)->run(in, cfg, dtype, opt);
}

// Cases in parallel (test::check_units), reported in order: per case and dtype the
// chunk kernel, the recurrent kernel and the two against each other.
void check_cases(const std::vector<VectorCase>& cases, std::uint64_t seed) {
  std::vector<test::CheckUnit> units;
  for (const VectorCase& c : cases)
    units.push_back({c.name, &gka(), generate_backward_inputs(gka().spec, c, seed), Config::make(gka().spec, c.config)});
  test::check_units(units, seed, backward_options(), 6, /*rounding=*/true);
}

// Discoverable through the registry (run --device cuda --backward --form chunk|
// sequential). The chunk kernel is judged by the chunk backward form's model at
// C = 64 (its narrowing points are the form's); the recurrent kernel by the
// sequential backward form's alone: gka's chunk backward form is another algorithm
// (Alg. 2 reverses the iteration the recurrent kernel stores), not its model.
TEST(CudaGkaBackward, KernelsAreDeclaredWithTheirModels) {
  ASSERT_NE(gka().kernel(Backend::cuda, Form::sequential, Direction::backward), nullptr);
  ASSERT_NE(gka().kernel(Backend::cuda, Form::chunk, Direction::backward), nullptr);
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const ModelSpec seq = kernel_model(gka(), Form::sequential, dtype, 8, 1, Direction::backward);
    EXPECT_EQ(seq.form, Form::sequential) << tier_name(dtype);
    EXPECT_TRUE(seq.also.empty()) << tier_name(dtype);
    EXPECT_EQ(seq.dtype, dtype);
    const ModelSpec chunk = kernel_model(gka(), Form::chunk, dtype, 8, 1, Direction::backward);
    EXPECT_EQ(chunk.form, Form::chunk) << tier_name(dtype);
    EXPECT_EQ(chunk.chunk_size, kKernelChunkSize) << tier_name(dtype);
    EXPECT_EQ(chunk.dtype, dtype);
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

// The chunk kernel's own edges: T = 200 (three full chunks and a partial one) at
// K = 64, V = 48 with every optional input; a partial first-and-only chunk; and a
// fixed λ with β = 0 on the first tokens (H_c = 0 there: ρ_c = 0, where Alg. 2
// cannot reverse and the kernel takes ξ_{i−2} = ξ_{i−1}; gate/mutants.hpp's
// zero_write_prefix input), beside β at its edges under a fixed λ.
TEST(CudaGkaBackward, ChunkEdgesWideHeadsAndFlatTokens) {
  TTR_REQUIRE_DEVICE();
  Regime opt, edges;
  opt.optional_inputs = true;
  edges.beta_edges = true;
  std::vector<VectorCase> cases = with_gate_config({
      {"t200_k64_optional", "", dims(1, 200, 1, 64, 48), opt, {}},
      {"t33_one_partial_chunk", "", dims(2, 33, 2, 32, 16), opt, {}},
      {"t90_fixed_lambda_beta_edges", "", dims(1, 90, 2, 16, 16), edges, {{"lambda", "0.5"}}},
  });
  std::vector<test::CheckUnit> units;
  for (const VectorCase& c : cases)
    units.push_back({c.name, &gka(), generate_backward_inputs(gka().spec, c, 73), Config::make(gka().spec, c.config)});
  // ρ = 0 tokens: a fixed λ and no write on the first 3 tokens (β = 0, no hkk0).
  {
    VectorCase c = with_gate_config({{"t100_fixed_lambda_zero_prefix", "", dims(1, 100, 2, 16, 16), {}, {{"lambda", "0.4"}}}})[0];
    TensorMap<double> in = generate_backward_inputs(gka().spec, c, 74);
    plant_special_input(SpecialInput::zero_write_prefix, gka().spec, in);
    units.push_back({c.name, &gka(), std::move(in), Config::make(gka().spec, c.config)});
  }
  test::check_units(units, 73, backward_options(), 6, /*rounding=*/true);
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
  for (Form form : {Form::chunk, Form::sequential})
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const std::string what = std::string(form_name(form)) + " " + tier_name(dtype);
    const ModelSpec ms = kernel_model(gka(), form, dtype, 8, 5, Direction::backward);
    const TensorMap<double> good = run_backward(form, dtype, in, cfg);
    EXPECT_TRUE(judge(good, ms).pass) << what;
    EXPECT_FALSE(judge(run_backward(form, dtype, other, cfg), ms).pass) << what;
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

// The chunk backward's products two ways (gpu/gka/chunk_backward_ops.cuh, gemm):
// 64×64 tiles staged in shared memory, and (TTR_GPU_GKA_BACKWARD_GEMM=naive) a
// thread per output element reading the operands directly. Each output is the same
// sequence of fmaf in both, so every gradient must agree bit for bit — on K = 128
// with every optional input (three chunks, the last partial), K = 20 V = 12 padded
// with a fixed λ, and β at its edges (λ = 0 and ρ = 0 tokens), in both dtypes.
TEST(CudaGkaBackward, TiledProductsEqualTheNaiveOnesBitForBit) {
  TTR_REQUIRE_DEVICE();
  Regime opt, edges;
  opt.optional_inputs = true;
  edges.beta_edges = true;
  const std::vector<VectorCase> cases = with_gate_config({
      {"t150_k128_optional", "", dims(1, 150, 2, 128, 128), opt, {}},
      {"t70_k20_v12_fixed_lambda", "", dims(2, 70, 1, 20, 12), opt, {{"lambda", "0.3"}}},
      {"t90_beta_edges", "", dims(1, 90, 2, 32, 16), edges, {}},
  });
  for (const VectorCase& c : cases)
    for (Tier dtype : {Tier::bf16, Tier::fp32}) {
      const std::string what = c.name + " " + tier_name(dtype);
      const TensorMap<double> in = generate_backward_inputs(gka().spec, c, 57);
      const Config cfg = Config::make(gka().spec, c.config);
      const TensorMap<double> tiled = run_backward(Form::chunk, dtype, in, cfg);
      TensorMap<double> naive;
      {
        const test::ScopedEnv gemm("TTR_GPU_GKA_BACKWARD_GEMM", "naive");
        naive = run_backward(Form::chunk, dtype, in, cfg);
      }
      if (&c == &cases.front()) {  // a value the switch does not know is refused, not taken for the default
        const test::ScopedEnv gemm("TTR_GPU_GKA_BACKWARD_GEMM", "tiled");
        EXPECT_THROW(run_backward(Form::chunk, dtype, in, cfg), InputError) << what;
      }
      test::expect_same_bits(tiled, naive, what);
      for (const auto& [name, t] : tiled)
        for (double x : t.data) ASSERT_TRUE(std::isfinite(x)) << what << " " << name;
    }
}

// One token from zero initial states: dg is exactly 0. The gate enters through
// ζ_0 = e^{g_0}, which multiplies H_0 = S_0 = 0, and through M̃_{0,0} = β_0, which does
// not depend on it; so both kernels must return 0, not a rounding residue. The chunk
// kernel once formed M̃_{0,0}'s two cancelling terms by two fmaf, the second returning
// the first's rounding error (dg = 2⁻¹³ with dht = 100 and v = 176: the CUDA
// chunk-and-recurrent property's shrunk case, 2026-12-06). Values and state
// cotangents scaled by 2⁸ (exact) so that the products are large.
TEST(CudaGkaBackward, OneTokenFromZeroStatesHasNoGateGradient) {
  TTR_REQUIRE_DEVICE();
  // Every optional input but the initial states: β drawn, so that dβ is an output
  // whose size says the case's products are large.
  Regime opt;
  opt.optional_inputs = true;
  const VectorCase one = with_gate_config({{"one_token", "", dims(2, 1, 4, 32, 16), opt, {}}})[0];
  TensorMap<double> in = generate_backward_inputs(gka().spec, one, 43);
  in.erase("h0");
  in.erase("hkk0");
  ASSERT_TRUE(in.count("beta"));
  for (const char* name : {"v", "dht"}) {
    ASSERT_TRUE(in.count(name)) << name;
    for (double& x : in.at(name).data) x *= 256.0;
  }
  for (const char* iters : {"1", "5"}) {
    auto sets = one.config;
    std::erase_if(sets, [](const auto& kv) { return kv.first == "iters"; });
    sets.emplace_back("iters", iters);
    const Config cfg = Config::make(gka().spec, sets);
    for (Form form : {Form::chunk, Form::sequential})
      for (Tier dtype : {Tier::bf16, Tier::fp32}) {
        const TensorMap<double> g = run_backward(form, dtype, in, cfg);
        for (std::size_t i = 0; i < g.at("dg").data.size(); ++i)
          EXPECT_EQ(g.at("dg").data[i], 0.0)
              << form_name(form) << " " << tier_name(dtype) << " iters=" << iters << " (b, h) flat " << i;
        double big = 0.0;  // the case must make products whose rounding shows: |dβ| ≫ 2⁻¹³
        for (double x : g.at("dbeta").data) big = std::max(big, std::abs(x));
        EXPECT_GT(big, 1.0) << form_name(form) << " " << tier_name(dtype);
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
  for (Form form : {Form::chunk, Form::sequential})
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    const std::string what = std::string(form_name(form)) + " " + tier_name(dtype);
    const auto first = run_backward(form, dtype, in, cfg);
    EXPECT_EQ(first.size(), 8u) << what;  // dq, dk, dv, dg, dbeta, dalpha, dh0, dhkk0
    test::expect_same_bits(first, run_backward(form, dtype, in, cfg), what);
    for (const auto& [b, h] : std::vector<test::Head>{{0, 0}, {3, 15}}) {
      const auto alone = run_backward(form, dtype, test::slice_head(bspec, in, b, h), cfg);
      test::expect_head_equals_alone(bspec, first, alone, {b, h}, what);
    }
  }
}

}  // namespace
}  // namespace ttr
