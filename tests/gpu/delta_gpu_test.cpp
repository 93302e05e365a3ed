// GPU tests of the delta family's CUDA kernels (gpu/family/): every kernel ×
// dtype against the MPFR oracle under the gate's error model on the tiny and
// standard suites, chunk vs sequential, T not a multiple of 64, K = V = 128,
// a batch that fills the GPU, and bit-identical repeated runs. Label `gpu`;
// without a device every test is skipped ("skipped: no CUDA device").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <mutex>
#include <string>
#include <thread>

#include "gate/kernel_checks.hpp"
#include "gpu/api.hpp"
#include "tests/gpu/gpu_checks.hpp"
#include "gate/error_model.hpp"
#include "oracles/registry.hpp"

namespace ttr {
namespace {

using test::check_unit;
using test::run_kernel;

using test::dims;
using test::expect_pass;
using test::report;
using test::worst_ratio;

// The delta family's layers among those with CUDA kernels (kla_kalman has its
// own test, kla_kalman_gpu_test.cpp).
const std::vector<std::string>& delta_layers() {
  static const std::vector<std::string> l = [] {
    std::vector<std::string> r;
    for (const LayerEntry& e : registry())
      if (e.spec.family == "delta" && !e.kernel_list(Backend::cuda).empty()) r.push_back(e.spec.name);
    return r;
  }();
  return l;
}

// Every delta-family layer with CUDA kernels on the cases of a vector suite, in
// parallel over layers (the MPFR oracle dominates the time).
void run_suite(const std::string& suite, std::uint64_t seed) {
  std::vector<std::vector<GateCheck>> results(delta_layers().size());
  std::vector<std::thread> pool;
  std::mutex em;
  std::string error;
  for (std::size_t i = 0; i < delta_layers().size(); ++i)
    pool.emplace_back([&, i] {
      const ThreadCaches caches;
      try {
        const LayerEntry& e = find_layer(delta_layers()[i]);
        KernelCheckOptions uo;
        uo.cross = true;
        for (const VectorCase& c : suite_cases(e.spec, suite)) {
          auto r = check_unit(e, c, seed, uo);
          results[i].insert(results[i].end(), r.begin(), r.end());
        }
      } catch (const std::exception& ex) {
        const std::lock_guard<std::mutex> lock(em);
        error += ex.what();
      }
    });
  for (auto& t : pool) t.join();
  ASSERT_TRUE(error.empty()) << error;
  for (const auto& r : results) {
    report(r);
    expect_pass(r);
    // bf16 and fp32, chunk and sequential, and the cross check, per case.
    EXPECT_GE(r.size(), 6u);
  }
}

TEST(CudaDelta, TinySuitePassesTheGate) {
  TTR_REQUIRE_DEVICE();
  run_suite("tiny", 11);
}

TEST(CudaDelta, StandardSuitePassesTheGate) {
  TTR_REQUIRE_DEVICE();
  run_suite("standard", 12);
}

// Chunk boundaries (T = 64, 65, 130: one past a chunk and a partial last chunk),
// K = V = 128 (the largest tiles, both dtypes' shared-memory budget) and
// K ≠ V, with an initial state.
TEST(CudaDelta, ChunkBoundariesAndWideHeads) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const std::vector<VectorCase> cases = {
      {"t64", "", dims(1, 64, 1, 32, 32), {}, {}},
      {"t65_h0", "", dims(1, 65, 2, 32, 48), states, {}},
      {"t130_k128", "", dims(1, 130, 1, 128, 128), states, {}},
      {"t200_k96_v16", "", dims(2, 200, 1, 96, 16), {}, {}},
  };
  for (const std::string& name : delta_layers()) {
    const LayerEntry& e = find_layer(name);
    for (const VectorCase& c : cases) {
      KernelCheckOptions uo;
      uo.cross = true;
      const auto r = check_unit(e, c, 21, uo);
      report(r);
      expect_pass(r);
    }
  }
}

// The bf16 state pass's mma.sync column tilings (TTR_GPU_STATE_BV: "16" columns a block;
// "32", the default where V is a multiple of 32 but for the Hopper pass of
// HopperStatePassPassesTheGate; "32x2", two warps a 16-row strip; "16c" and
// "32x2c", a head's column blocks as one cluster sharing the W tiles by multicast): each state element is the
// same sequence of mma steps in all of them, so o (which reads the stored chunk states
// and Δ) and ht must agree bit for bit, for every decay (delta_rule: none, GDN:
// scalar, KDA: per key), with initial states and a partial last chunk. The shapes
// give clusters of 8 and 4 (K = V = 128), 2 (V = 96, six 16-column blocks; its
// three 32-column blocks take no cluster) and 4 and 2 (K = 32, V = 64). The unclustered
// tilings again with two and with three buffers of chunk inputs (TTR_GPU_STATE_STAGES).
// The default (unset) is the pass "32w" names: the Hopper pass where it applies, else
// "32"; its bits are those of "32w" on every device.
TEST(CudaDelta, StatePassTilingsGiveTheSameBits) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const std::vector<VectorCase> cases = {
      {"t130_k128", "", dims(1, 130, 2, 128, 128), states, {}},
      {"t200_k64_v96", "", dims(2, 200, 1, 64, 96), states, {}},
      {"t70_k32_v64", "", dims(3, 70, 2, 32, 64), states, {}},
  };
  for (const char* layer : {"delta_rule", "gated_delta_rule", "kda"})
    for (const VectorCase& c : cases) {
      const LayerEntry& e = find_layer(layer);
      const TensorMap<double> in = generate_inputs(e.spec, c, 61);
      const Config cfg = Config::make(e.spec, c.config);
      TensorMap<double> base;
      {
        const test::ScopedEnv tiling("TTR_GPU_STATE_BV", "16");
        const test::ScopedEnv stages("TTR_GPU_STATE_STAGES", "2");
        base = run_kernel(layer, Form::chunk, Tier::bf16, in, cfg);
      }
      ASSERT_TRUE(base.count("o") && base.count("ht")) << layer;
      for (const char* v : {"32", "32x2", "16c", "32x2c"}) {
        TensorMap<double> other;
        {
          const test::ScopedEnv tiling("TTR_GPU_STATE_BV", v);
          other = run_kernel(layer, Form::chunk, Tier::bf16, in, cfg);
        }
        test::expect_same_bits(base, other, fmt::format("{} {} TTR_GPU_STATE_BV={}", layer, c.name, v));
      }
      {
        TensorMap<double> unset, named;
        {
          const test::ScopedEnv tiling("TTR_GPU_STATE_BV", nullptr);
          unset = run_kernel(layer, Form::chunk, Tier::bf16, in, cfg);
        }
        {
          const test::ScopedEnv tiling("TTR_GPU_STATE_BV", "32w");
          named = run_kernel(layer, Form::chunk, Tier::bf16, in, cfg);
        }
        test::expect_same_bits(named, unset, fmt::format("{} {} TTR_GPU_STATE_BV unset against 32w", layer, c.name));
        if (!gpu::hopper_state_pass_available())
          test::expect_same_bits(base, unset, fmt::format("{} {} TTR_GPU_STATE_BV unset", layer, c.name));
      }
      // Two or three buffers of the chunk inputs: the same steps, loads issued earlier.
      for (const char* n : {"2", "3"})
        for (const char* v : {"16", "32", "32x2"}) {
          TensorMap<double> other;
          {
            const test::ScopedEnv tiling("TTR_GPU_STATE_BV", v);
            const test::ScopedEnv stages("TTR_GPU_STATE_STAGES", n);
            other = run_kernel(layer, Form::chunk, Tier::bf16, in, cfg);
          }
          test::expect_same_bits(base, other,
                                 fmt::format("{} {} TTR_GPU_STATE_BV={} TTR_GPU_STATE_STAGES={}", layer, c.name, v, n));
        }
      for (const auto& [name, t] : base)
        for (double x : t.data) ASSERT_TRUE(std::isfinite(x)) << layer << " " << c.name << " " << name;
    }
  // A value it does not know is refused, not timed as the default under another name.
  const LayerEntry& gdn = find_layer("gated_delta_rule");
  const TensorMap<double> in = generate_inputs(gdn.spec, cases[0], 61);
  const Config gcfg = Config::make(gdn.spec, cases[0].config);
  {
    const test::ScopedEnv tiling("TTR_GPU_STATE_BV", "64");
    EXPECT_ANY_THROW(run_kernel("gated_delta_rule", Form::chunk, Tier::bf16, in, gcfg));
  }
  {
    const test::ScopedEnv stages("TTR_GPU_STATE_STAGES", "4");
    EXPECT_ANY_THROW(run_kernel("gated_delta_rule", Form::chunk, Tier::bf16, in, gcfg));
  }
  if (gpu::hopper_state_pass_available()) {  // the Hopper pass (the default here) keeps three buffers
    const test::ScopedEnv tiling("TTR_GPU_STATE_BV", nullptr);
    const test::ScopedEnv stages("TTR_GPU_STATE_STAGES", "2");
    EXPECT_ANY_THROW(run_kernel("gated_delta_rule", Form::chunk, Tier::bf16, in, gcfg));
  }
  {  // the clusters' handshake is written for two buffers
    const test::ScopedEnv tiling("TTR_GPU_STATE_BV", "16c");
    const test::ScopedEnv stages("TTR_GPU_STATE_STAGES", "3");
    EXPECT_ANY_THROW(run_kernel("gated_delta_rule", Form::chunk, Tier::bf16, in, gcfg));
  }
}

// The Hopper state pass (the default on compute capability 9.0, TTR_GPU_STATE_BV=32w by
// name: one warpgroup a block, the products as
// wgmma from swizzled shared-memory tiles, gpu/family/delta_state_wgmma_sm90a.cu). Its
// tensor-core steps sum in their own order, so it is judged against the MPFR oracle
// under the chunk form's model, not bit for bit against the mma.sync tilings: every
// decay (none, scalar, per key), K = 128 with V = 128 (four column blocks) and V = 96
// (three), initial states, one whole chunk and partial last chunks over several
// chunks (the three buffers reused). Repeated runs are bit-identical.
TEST(CudaDelta, HopperStatePassPassesTheGate) {
  TTR_REQUIRE_DEVICE();
  if (!gpu::hopper_state_pass_available()) GTEST_SKIP() << "the Hopper state pass needs compute capability 9.0";
  Regime states, varlen;
  states.optional_inputs = true;
  // A varlen batch: a boundary on a chunk edge, a one-token sequence, one off the grid;
  // initial states per sequence (the pass reads each sequence's own chunk count).
  varlen.optional_inputs = true;
  varlen.cu_seqlens = {0, 64, 65, 200, 330};
  const std::vector<VectorCase> cases = {
      {"t64_k128", "", dims(1, 64, 2, 128, 128), {}, {}},
      {"t130_k128_h0", "", dims(1, 130, 2, 128, 128), states, {}},
      {"t250_k128_v96_h0", "", dims(2, 250, 1, 128, 96), states, {}},
      {"varlen_k128_h0", "", dims(1, 330, 2, 128, 64), varlen, {}},
  };
  const test::ScopedEnv tiling("TTR_GPU_STATE_BV", "32w");
  for (const char* layer : {"delta_rule", "gated_delta_rule", "kda"})
    for (const VectorCase& c : cases) {
      const LayerEntry& e = find_layer(layer);
      KernelCheckOptions uo;
      uo.cross = true;
      const auto r = check_unit(e, c, 31, uo);
      report(r);
      expect_pass(r);
      const TensorMap<double> in = generate_inputs(e.spec, c, 31);
      const Config cfg = Config::make(e.spec, c.config);
      test::expect_same_bits(run_kernel(layer, Form::chunk, Tier::bf16, in, cfg),
                             run_kernel(layer, Form::chunk, Tier::bf16, in, cfg), fmt::format("{} {} 32w", layer, c.name));
    }
}

// A planted bug must fail: the chunk kernel's output against the oracle of
// different inputs (another seed) is far outside the model.
TEST(CudaDelta, WrongOutputFailsTheComparison) {
  TTR_REQUIRE_DEVICE();
  const LayerEntry& e = find_layer("gated_delta_rule");
  const VectorCase c{"small", "", dims(1, 100, 2, 32, 32), {}, {}};
  const TensorMap<double> in = generate_inputs(e.spec, c, 5), other = generate_inputs(e.spec, c, 6);
  const Config cfg = Config::make(e.spec, c.config);
  const TensorMap<double> oracle = run_layer(e, Form::sequential, {Tier::mpfr, 128}, in, cfg).values;
  ModelSpec ms;
  ms.chunk_size = kKernelChunkSize;
  ms.dtype = Tier::bf16;
  const ErrorModel model = model_errors(e, in, cfg, oracle, ms);
  const auto good = run_kernel("gated_delta_rule", Form::chunk, Tier::bf16, in, cfg);
  const auto bad = run_kernel("gated_delta_rule", Form::chunk, Tier::bf16, other, cfg);
  EXPECT_TRUE(compare(e.spec, oracle, model, good).pass);
  EXPECT_FALSE(compare(e.spec, oracle, model, bad).pass);
}

// B·H = 512 heads (every multiprocessor busy in every stage): sampled heads equal
// the same head run alone bit for bit, those single-head runs pass the oracle, and
// a repeated run is bit-identical (test::check_full_batch).
TEST(CudaDelta, FullGpuBatchIsPerHeadExactAndDeterministic) {
  TTR_REQUIRE_DEVICE();
  Regime states;
  states.optional_inputs = true;
  const std::vector<test::Head> heads = {{0, 0}, {3, 17}, {7, 63}};
  test::check_full_batch(find_layer("gated_delta_rule"), {"fill", "", dims(8, 300, 64, 64, 64), states, {}}, 31,
                         heads, heads);
}

}  // namespace
}  // namespace ttr
