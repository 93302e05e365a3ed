// GPU tests of the delta family's backward kernels — fused recurrent
// (gpu/family/delta_sequential_backward.cu) and chunk (gpu/family/
// delta_chunk_backward.cu), `TTR_KERNEL(<layer>, cuda, sequential|chunk,
// backward)`: every layer that declares them × bf16/fp32 against the MPFR
// backward oracle (the hand-derived adjoint, reference/family/delta_backward.hpp)
// under the backward error model (gate/kernel_checks.hpp: the chunk backward
// form's at C = 64; the recurrent kernel in fp32 with the sequential backward
// form's model in quadrature), and chunk against recurrent (their models in
// quadrature); T not a multiple of 64 (several chunks and checkpoint segments,
// a partial last one), K = V = 128, K ≠ V, h0/dht, use_qk_l2norm_in_kernel; a
// planted wrong gradient fails; repeated runs are bit-identical and a full batch
// equals its heads run alone. Outputs are poisoned with NaN before every run (an
// unwritten element fails as NaN). Label `gpu`; skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <string>

#include "gate/error_model.hpp"
#include "gate/judge.hpp"
#include "gate/kernel_checks.hpp"
#include "gpu/api.hpp"
#include "oracles/error.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

using test::dims;
using test::report;
using test::worst_ratio;

const std::vector<std::string>& backward_layers() {
  static const std::vector<std::string> l = [] {
    std::vector<std::string> r;
    for (const LayerEntry& e : registry())  // the delta family's (gka's own: gka_backward_gpu_test.cpp)
      if (e.spec.family == "delta" && e.kernel(Backend::cuda, Form::sequential, Direction::backward))
        r.push_back(e.spec.name);
    return r;
  }();
  return l;
}

KernelCheckOptions backward_options() {
  KernelCheckOptions o;
  o.forms = {Form::chunk, Form::sequential};
  o.cross = true;
  o.direction = Direction::backward;
  o.launch.poison = true;
  return o;
}

TensorMap<double> run_backward(const std::string& layer, Form form, Tier dtype, const TensorMap<double>& in,
                               const Config& cfg, bool keep_ut_inverse = false) {
  KernelOptions opt;
  opt.poison = true;
  opt.keep_ut_inverse = keep_ut_inverse;
  return find_layer(layer).kernel(Backend::cuda, form, Direction::backward)->run(in, cfg, dtype, opt);
}

// Units in parallel (test::check_units), reported in order; each unit gives, per
// dtype, the chunk kernel, the recurrent kernel and chunk vs recurrent.
void check_units(const std::vector<test::CheckUnit>& units, std::uint64_t seed) {
  test::check_units(units, seed, backward_options(), 6, /*rounding=*/true);
}

// A suite's cases for every layer with the kernel; `split`: one unit per head.
void run_suite(const std::string& suite, std::uint64_t seed, bool split) {
  std::vector<test::CheckUnit> units;
  for (const std::string& name : backward_layers()) {
    const LayerEntry& e = find_layer(name);
    for (const VectorCase& c : suite_cases(e.spec, suite)) {
      const TensorMap<double> in = generate_backward_inputs(e.spec, c, seed);
      const Config cfg = Config::make(e.spec, c.config);
      if (!split) {
        units.push_back({c.name, &e, in, cfg});
        continue;
      }
      const std::int64_t B = in.at("q").dim(0), H = in.at("q").dim(2);
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h)
          units.push_back({fmt::format("{}_b{}h{}", c.name, b, h), &e, test::slice_head(backward_spec(e.spec), in, b, h), cfg});
    }
  }
  check_units(units, seed);
}

TEST(CudaDeltaBackward, KernelsAreDeclared) {
  // Discoverable through the registry (run --device cuda --backward, the gate).
  EXPECT_EQ(backward_layers(), (std::vector<std::string>{"delta_rule", "gated_delta_rule", "kda", "kaczmarz_delta_rule",
                                                         "precond_gated_delta_rule"}));
  for (const std::string& l : backward_layers())
    EXPECT_NE(find_layer(l).kernel(Backend::cuda, Form::chunk, Direction::backward), nullptr) << l;
}

TEST(CudaDeltaBackward, TinySuitePassesTheModel) {
  TTR_REQUIRE_DEVICE();
  run_suite("tiny", 41, false);
}

TEST(CudaDeltaBackward, StandardSuitePassesTheModel) {
  TTR_REQUIRE_DEVICE();
  run_suite("standard", 42, true);
}

// Segment boundaries of the kernel's checkpoints (64 tokens): T = 64, 65, 130,
// 200; K = V = 128; K ≠ V (padded to 16); h0 and dht; use_qk_l2norm_in_kernel.
TEST(CudaDeltaBackward, SegmentBoundariesWideHeadsAndL2Norm) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const std::vector<std::pair<std::string, std::string>> l2 = {{"use_qk_l2norm_in_kernel", "true"}};
  const std::vector<VectorCase> cases = {
      {"t64", "", dims(1, 64, 1, 32, 32), {}, {}},
      {"t65_h0_l2", "", dims(1, 65, 2, 32, 48), states, l2},
      {"t130_k128", "", dims(1, 130, 1, 128, 128), states, {}},
      {"t200_k96_v16_l2", "", dims(2, 200, 1, 96, 16), {}, l2},
      {"t70_k20_v12_h0", "", dims(1, 70, 1, 20, 12), states, {}},
  };
  std::vector<test::CheckUnit> units;
  for (const std::string& name : backward_layers()) {
    const LayerEntry& e = find_layer(name);
    for (const VectorCase& c : cases) {
      const TensorMap<double> in = generate_backward_inputs(e.spec, c, 51);
      units.push_back({c.name, &e, in, Config::make(e.spec, c.config)});
    }
  }
  check_units(units, 51);
}

// One token without an initial state, and a last chunk of one token: dg (and for
// per-key gates each of its K columns) is exactly 0 at T = 1, since the gate
// scales S_0 = 0 and its pairs' terms cancel; the model allows only the subnormal
// floor there, so a rounding residue of terms that cancel fails (GKA's chunk
// kernel had one, docs/gpu-gka.md; until 2026-12-06 this family's chunk kernel
// formed the terms with decay factor e^0 — the diagonal pairs, the last token's
// state-write term — on both sides, docs/gpu.md).
TEST(CudaDeltaBackward, OneTokenFromZeroStatePassesTheModel) {
  TTR_REQUIRE_DEVICE();
  const std::vector<VectorCase> cases = {
      {"t1", "", dims(2, 1, 3, 16, 16), {}, {}},
      {"t1_k7_v5", "", dims(1, 1, 2, 7, 5), {}, {}},
      {"t65", "", dims(1, 65, 2, 32, 16), {}, {}},
  };
  std::vector<test::CheckUnit> units;
  for (const std::string& name : backward_layers()) {
    const LayerEntry& e = find_layer(name);
    for (const VectorCase& c : cases) {
      const TensorMap<double> in = generate_backward_inputs(e.spec, c, 53);
      ASSERT_FALSE(in.count("h0")) << name << " " << c.name;
      units.push_back({c.name, &e, in, Config::make(e.spec, c.config)});
    }
  }
  check_units(units, 53);
}

// The gate term db_last += e^{b_last} Σ_j dS_end,ij S_0,ij reads the chunk states as the
// state pass stored them, narrowed (reference/family/delta_chunk_backward.hpp; the
// CPU form's hand case is tests/backward/chunk_backward_test.cpp's): q = k = 0 and
// g = 0 leave the state at h0 and dS at dht throughout, so every token's dg is
// Σ_ij dht_ij S_0,ij (scalar gate) or Σ_j dht_ij S_0,ij for key i (per-key gate).
// h0 = 1 + 2^-10, dht = 1: bf16 stores S_0 as 1, so dg is exactly K·V (or V); fp32
// keeps it, K·V·(1 + 2^-10) (or V·(1 + 2^-10)); every partial sum is exact in fp32.
// Three chunks (T = 130), K = V = 128 (the compiled-shape path) and K = 32, V = 16.
TEST(CudaDeltaBackward, GateTermReadsTheStoredNarrowedState) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const double h0 = 1.0 + std::ldexp(1.0, -10);
  for (const char* layer : {"gated_delta_rule", "kda"})
    for (const auto& c : {VectorCase{"k128", "", dims(1, 130, 2, 128, 128), states, {}},
                          VectorCase{"k32_v16", "", dims(1, 130, 2, 32, 16), states, {}}}) {
      const LayerEntry& e = find_layer(layer);
      TensorMap<double> in = generate_backward_inputs(e.spec, c, 57);
      ASSERT_TRUE(in.count("h0") && in.count("dht")) << layer << " " << c.name;
      for (const char* name : {"q", "k", "g"}) std::fill(in.at(name).data.begin(), in.at(name).data.end(), 0.0);
      std::fill(in.at("h0").data.begin(), in.at("h0").data.end(), h0);
      std::fill(in.at("dht").data.begin(), in.at("dht").data.end(), 1.0);
      const double K = static_cast<double>(in.at("q").dim(3)), V = static_cast<double>(in.at("v").dim(3));
      const double terms = std::string(layer) == "kda" ? V : K * V;
      for (Tier dtype : {Tier::bf16, Tier::fp32}) {
        const double want = terms * (dtype == Tier::bf16 ? 1.0 : h0);
        const TensorMap<double> got = run_backward(layer, Form::chunk, dtype, in, Config::make(e.spec, c.config));
        const std::vector<double>& dg = got.at("dg").data;
        for (std::size_t i = 0; i < dg.size(); ++i)
          ASSERT_EQ(dg[i], want) << layer << " " << c.name << " " << tier_name(dtype) << " dg[" << i << "]";
      }
    }
}

// The chunk backward reading the UT inverses its forward kept (DeltaBackwardArgs::
// ut_inverse, FLA's saved A) instead of inverting again: the inverse is the same
// kernel's output either way, so every gradient must be the same bits, for every
// layer of the family (decay none, scalar, per key; Kaczmarz; the preconditioner's
// own write key), both dtypes, the compiled K = V = 128 path and a run-time shape, a
// partial last chunk, initial states and dht, the L2 norm in the kernel.
TEST(CudaDeltaBackward, KeptUtInverseGivesTheSameGradients) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  for (const std::string& layer : backward_layers())
    for (const auto& c : {VectorCase{"t130_k128", "", dims(1, 130, 2, 128, 128), states, {}},
                          VectorCase{"t70_k32_v16_l2", "", dims(2, 70, 3, 32, 16), states,
                                     {{"use_qk_l2norm_in_kernel", "true"}}}}) {
      const LayerEntry& e = find_layer(layer);
      const TensorMap<double> in = generate_backward_inputs(e.spec, c, 71);
      const Config cfg = Config::make(e.spec, c.config);
      for (Tier dtype : {Tier::bf16, Tier::fp32}) {
        const std::string what = fmt::format("{} {} {}", layer, c.name, tier_name(dtype));
        const TensorMap<double> recomputed = run_backward(layer, Form::chunk, dtype, in, cfg);
        const TensorMap<double> kept = run_backward(layer, Form::chunk, dtype, in, cfg, /*keep_ut_inverse=*/true);
        ASSERT_EQ(recomputed.size(), kept.size()) << what;
        test::expect_same_bits(recomputed, kept, what);
        for (const auto& [name, t] : kept)
          for (double x : t.data) ASSERT_TRUE(std::isfinite(x)) << what << " " << name;
      }
    }
}

// TTR_GPU_WY names a wy stage or is refused as bad input (InputError: the CLI's exit
// code 2), in either dtype and on any device (a misspelt switch must not time the
// default it meant to avoid); the refused call leaves the kernel working.
TEST(CudaDeltaBackward, UnknownWyStageIsRefused) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const VectorCase c{"t70_k128", "", dims(1, 70, 2, 128, 128), states, {}};
  const LayerEntry& e = find_layer("gated_delta_rule");
  const TensorMap<double> in = generate_backward_inputs(e.spec, c, 75);
  const Config cfg = Config::make(e.spec, c.config);
  for (Tier dtype : {Tier::bf16, Tier::fp32}) {
    TensorMap<double> before;
    {
      const test::ScopedEnv wy("TTR_GPU_WY", "mma");
      before = run_backward("gated_delta_rule", Form::chunk, dtype, in, cfg);
    }
    for (const char* bad : {"wmma", "WGMMA", "mma.sync", " "}) {
      const test::ScopedEnv wy("TTR_GPU_WY", bad);
      EXPECT_THROW(run_backward("gated_delta_rule", Form::chunk, dtype, in, cfg), InputError)
          << tier_name(dtype) << " TTR_GPU_WY='" << bad << "'";
    }
    const test::ScopedEnv wy("TTR_GPU_WY", "mma");
    test::expect_same_bits(before, run_backward("gated_delta_rule", Form::chunk, dtype, in, cfg),
                           fmt::format("{} after the refusals", tier_name(dtype)));
  }
}

// The chunk backward recomputes the chunk states with the forward's state pass: under
// the Hopper passes (the default on compute capability 9.0, TTR_GPU_STATE_BV=32w by
// name), with either wy stage, its gradients are judged against the MPFR backward oracle under the chunk
// backward's model, for every layer of the family, K = V = 128 over three chunks with
// h0 and dht, and a varlen batch (a boundary on a chunk edge, a one-token sequence,
// one off the grid; h0 and dht per sequence: both passes read each sequence's own
// chunk count).
TEST(CudaDeltaBackward, HopperStatePassGradientsPassTheJudge) {
  TTR_REQUIRE_DEVICE();
  if (!gpu::hopper_state_pass_available()) GTEST_SKIP() << "the Hopper state pass needs compute capability 9.0";
  Regime states, varlen;
  states.optional_inputs = true;
  varlen.optional_inputs = true;
  varlen.cu_seqlens = {0, 64, 65, 200, 330};
  const std::vector<VectorCase> cases = {{"t150_k128_h0", "", dims(1, 150, 2, 128, 128), states, {}},
                                         {"varlen_k128_h0", "", dims(1, 330, 2, 128, 128), varlen, {}}};
  const test::ScopedEnv tiling("TTR_GPU_STATE_BV", "32w");
  for (const VectorCase& c : cases)
    for (const std::string& layer : backward_layers()) {
      const LayerEntry& e = find_layer(layer);
      const TensorMap<double> in = generate_backward_inputs(e.spec, c, 73);
      const Config cfg = Config::make(e.spec, c.config);
      Judge judge(e, in, cfg, {Tier::mpfr, 128}, Direction::backward);
      const ModelSpec ms = kernel_model(Form::chunk, Tier::bf16, 8, 5, Direction::backward);
      // Both wy stages: mma.sync (TTR_GPU_WY=mma) and the Hopper one (wgmma, the
      // default where it applies: no per-key gate, k its own write key).
      for (const char* wy : {"mma", "wgmma"}) {
        const test::ScopedEnv stage("TTR_GPU_WY", wy);
        const auto r = judge(run_backward(layer, Form::chunk, Tier::bf16, in, cfg), ms);
        EXPECT_TRUE(r.pass) << layer << " " << c.name << " wy " << wy << " worst ratio " << worst_ratio(r);
      }
    }
}

// A planted bug must fail: the kernel's gradients on other inputs (another seed)
// against this oracle, and one token's dk row doubled.
TEST(CudaDeltaBackward, WrongGradientsFailTheJudge) {
  TTR_REQUIRE_DEVICE();
  const LayerEntry& e = find_layer("gated_delta_rule");
  const VectorCase c{"small", "", dims(1, 100, 2, 32, 32), {}, {}};
  const TensorMap<double> in = generate_backward_inputs(e.spec, c, 5), other = generate_backward_inputs(e.spec, c, 6);
  const Config cfg = Config::make(e.spec, c.config);
  Judge judge(e, in, cfg, {Tier::mpfr, 128}, Direction::backward);
  for (Form form : {Form::chunk, Form::sequential})
    for (Tier dtype : {Tier::bf16, Tier::fp32}) {
      const std::string what = fmt::format("{} {}", form_name(form), tier_name(dtype));
      const ModelSpec ms = kernel_model(form, dtype, 8, 5, Direction::backward);
      const TensorMap<double> good = run_backward("gated_delta_rule", form, dtype, in, cfg);
      EXPECT_TRUE(judge(good, ms).pass) << what;
      EXPECT_FALSE(judge(run_backward("gated_delta_rule", form, dtype, other, cfg), ms).pass) << what;
      TensorMap<double> bad = good;
      Tensor<double>& dk = bad.at("dk");
      const std::int64_t K = dk.dim(3), H = dk.dim(2), t = 77;
      for (std::int64_t i = 0; i < K; ++i) dk.data[static_cast<std::size_t>((t * H + 1) * K + i)] *= 2.0;
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

// B·H = 512 heads, both kernels: a repeated run is bit-identical (no atomics:
// partials are summed in a fixed order), and sampled heads equal, bit for bit,
// the same head run alone (but dlog_atk_scale, a sum over the batch's sequences).
TEST(CudaDeltaBackward, FullGpuBatchIsPerHeadExactAndDeterministic) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  for (const char* layer : {"gated_delta_rule", "kda", "precond_gated_delta_rule"}) {
    const bool precond = std::string(layer) == "precond_gated_delta_rule";
    const LayerEntry& e = find_layer(layer);
    const LayerSpec bspec = backward_spec(e.spec);
    const VectorCase big{"fill", "", dims(8, 300, 64, 64, 64), states, {}};
    const TensorMap<double> in = generate_backward_inputs(e.spec, big, 31);
    const Config cfg = Config::make(e.spec, big.config);
    for (Form form : {Form::chunk, Form::sequential})
    for (Tier dtype : {Tier::bf16, Tier::fp32}) {
      const std::string what = fmt::format("{} {} {}", layer, form_name(form), tier_name(dtype));
      const auto first = run_backward(layer, form, dtype, in, cfg);
      // dq, dk, dv, dbeta, dg, dh0; precond: dg_atk, dbeta_atk, dinitial_A_state, dlog_atk_scale
      EXPECT_EQ(first.size(), precond ? 10u : 6u) << what;
      test::expect_same_bits(first, run_backward(layer, form, dtype, in, cfg), what);
      for (const auto& [b, h] : std::vector<test::Head>{{0, 0}, {3, 17}, {7, 63}}) {
        const auto alone = run_backward(layer, form, dtype, test::slice_head(bspec, in, b, h), cfg);
        test::expect_head_equals_alone(bspec, first, alone, {b, h}, what, {"dlog_atk_scale"});
      }
    }
  }
}

}  // namespace
}  // namespace ttr
