// GPU tests of GKA's CUDA kernels (gpu/gka/, solver = chebyshev): the chunk and
// sequential kernels × {bf16, fp32} against the MPFR oracle under the gate's error
// model (gate/kernel_checks.hpp) on the tiny and standard suites, chunk vs sequential,
// T not a multiple of 64, K = V = 128, K ≠ V, the optional inputs (β, α, h0,
// hkk0), a fixed λ and the in-kernel L2 norm, a batch that fills the GPU,
// bit-identical repeated runs, and the bf16 fragment solve equal to the WMMA
// solve it replaced. Label `gpu`; without a device every test is
// skipped ("skipped: no CUDA device").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "gate/kernel_checks.hpp"
#include "oracles/error.hpp"
#include "gate/error_model.hpp"
#include "oracles/registry.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

using test::check_unit;
using test::run_kernel;

using test::dims;

const LayerEntry& gka() { return find_layer("gka"); }

// The gate's GKA configuration (solver = chebyshev, the chunkwise solver of
// GKA §4.2; the CUDA kernels implement no other) added to each case's own.
std::vector<VectorCase> with_gate_config(std::vector<VectorCase> cases) {
  for (VectorCase& c : cases)
    for (const auto& kv : gate_config(gka().spec)) c.config.push_back(kv);
  return cases;
}

TEST(CudaGka, TinySuitePassesTheGate) {
  TTR_REQUIRE_DEVICE();
  test::check_cases(gka(), with_gate_config(suite_cases(gka().spec, "tiny")), 51);
}

TEST(CudaGka, StandardSuitePassesTheGate) {
  TTR_REQUIRE_DEVICE();
  // B=2 T=1024 H=4 K=V=64: one unit per head (8 in parallel; 30 Chebyshev steps
  // per token make GKA's MPFR oracle the slowest of the suite).
  test::check_cases(gka(), with_gate_config(suite_cases(gka().spec, "standard")), 52, /*split=*/true);
}

// Chunk boundaries (T = 64, 65, 130, 200: one full chunk, one token past it,
// partial last chunks), K = V = 128 (the largest tiles: the fp32 solve uses
// 219 KB of shared memory), K ≠ V and K, V not multiples of 16 (zero padding),
// the optional inputs, a fixed λ, and use_qk_l2norm_in_kernel.
TEST(CudaGka, ChunkBoundariesWideHeadsAndOptions) {
  TTR_REQUIRE_DEVICE();
  Regime opt;
  opt.optional_inputs = true;
  test::check_cases(gka(),
                    with_gate_config({
                        {"t64", "", dims(1, 64, 1, 32, 32), {}, {}},
                        {"t65_optional", "", dims(1, 65, 2, 32, 48), opt, {}},
                        {"t130_k128_optional", "", dims(1, 130, 1, 128, 128), opt, {}},
                        {"t200_k96_v16", "", dims(1, 200, 1, 96, 16), {}, {}},
                        {"t70_k20_v12_optional", "", dims(1, 70, 1, 20, 12), opt, {}},
                        {"fixed_lambda", "", dims(1, 100, 1, 32, 32), {}, {{"lambda", "0.3"}}},
                        {"l2norm_iters7", "", dims(1, 90, 1, 32, 32), {},
                         {{"use_qk_l2norm_in_kernel", "true"}, {"iters", "7"}, {"omega0", "0"}}},
                    }),
                    53);
}

// A planted bug must fail: the chunk kernel's output on other inputs (another
// seed) against this oracle is far outside the model; fewer Chebyshev steps than
// configured (the oracle's iters = 30) fail too.
TEST(CudaGka, WrongOutputFailsTheComparison) {
  TTR_REQUIRE_DEVICE();
  const LayerEntry& e = gka();
  const VectorCase c = with_gate_config({{"small", "", dims(1, 100, 2, 32, 32), {}, {}}})[0];
  const TensorMap<double> in = generate_inputs(e.spec, c, 5), other = generate_inputs(e.spec, c, 6);
  const Config cfg = Config::make(e.spec, c.config);
  auto few = c.config;
  few.push_back({"iters", "3"});
  const Config cfg_few = Config::make(e.spec, few);
  const TensorMap<double> oracle = run_layer(e, Form::sequential, {Tier::mpfr, 128}, in, cfg).values;
  ModelSpec ms;
  ms.chunk_size = kKernelChunkSize;
  ms.dtype = Tier::bf16;
  const ErrorModel model = model_errors(e, in, cfg, oracle, ms);
  EXPECT_TRUE(compare(e.spec, oracle, model, run_kernel("gka", Form::chunk, Tier::bf16, in, cfg)).pass);
  EXPECT_FALSE(compare(e.spec, oracle, model, run_kernel("gka", Form::chunk, Tier::bf16, other, cfg)).pass);
  EXPECT_FALSE(compare(e.spec, oracle, model, run_kernel("gka", Form::chunk, Tier::bf16, in, cfg_few)).pass);
}

// The bf16 solve on mma.sync fragments (gpu/gka/solve_bf16.cuh) against the
// WMMA solve it replaced (TTR_GPU_GKA_SOLVE=wmma, a second implementation: WMMA
// from shared memory, fp32 products staged in shared memory, four threads per
// token row): both issue the same HMMA products over the same k order, narrow
// at the same points and share the scalar recursions (gpu/gka/chebyshev.cuh),
// so every output must agree bit for bit — on K = 128 (four column pairs per
// warp), K = 96 (three and three), K = 20 padded to 32, K = 16 (one warp of
// each strip idle in Y), partial last chunks, every optional input, a fixed λ
// a run with fewer steps and ω₀ = 0, and gates at their edges (β, γ ∈ {0, 1}).
TEST(CudaGka, FragmentSolveEqualsTheWmmaSolveBitForBit) {
  TTR_REQUIRE_DEVICE();
  Regime opt, edges;
  opt.optional_inputs = true;
  edges.beta_edges = edges.decay_edges = true;  // β = 0 from the start: H_c = 0, λ_c = 0 rows (x_c = 0)
  const std::vector<VectorCase> cases = with_gate_config({
      {"t150_edges", "", dims(1, 150, 2, 32, 32), edges, {}},
      {"t130_k128_optional", "", dims(2, 130, 2, 128, 128), opt, {}},
      {"t200_k96_v16", "", dims(1, 200, 1, 96, 16), {}, {}},
      {"t70_k20_v12_optional", "", dims(1, 70, 1, 20, 12), opt, {}},
      {"t90_k16_fixed_lambda", "", dims(1, 90, 2, 16, 32), {}, {{"lambda", "0.3"}}},
      {"t64_iters7", "", dims(1, 64, 1, 64, 64), opt, {{"iters", "7"}, {"omega0", "0"}}},
  });
  for (const VectorCase& c : cases) {
    const TensorMap<double> in = generate_inputs(gka().spec, c, 54);
    const Config cfg = Config::make(gka().spec, c.config);
    const TensorMap<double> fragments = run_kernel("gka", Form::chunk, Tier::bf16, in, cfg);
    TensorMap<double> wmma;
    {
      const test::ScopedEnv solve("TTR_GPU_GKA_SOLVE", "wmma");
      wmma = run_kernel("gka", Form::chunk, Tier::bf16, in, cfg);
    }
    if (&c == &cases.front()) {  // a value the switch does not know is refused, not taken for the default
      const test::ScopedEnv solve("TTR_GPU_GKA_SOLVE", "WMMA");
      for (Tier dtype : {Tier::bf16, Tier::fp32}) EXPECT_THROW(run_kernel("gka", Form::chunk, dtype, in, cfg), InputError);
    }
    ASSERT_EQ(fragments.size(), wmma.size()) << c.name;
    for (const auto& [name, t] : fragments) {
      const Tensor<double>& w = wmma.at(name);
      ASSERT_EQ(t.data.size(), w.data.size()) << c.name << " " << name;
      std::int64_t diff = 0, nonfinite = 0;
      double worst = 0.0;
      for (std::size_t i = 0; i < t.data.size(); ++i) {
        nonfinite += !std::isfinite(t.data[i]);
        if (t.data[i] != w.data[i]) {
          ++diff;
          worst = std::max(worst, std::abs(t.data[i] - w.data[i]) / std::max(std::abs(w.data[i]), 1e-30));
        }
      }
      EXPECT_EQ(nonfinite, 0) << c.name << " " << name;
      EXPECT_EQ(diff, 0) << c.name << " " << name << ": " << diff << " of " << t.data.size()
                         << " elements differ between the fragment and WMMA solves (largest relative difference "
                         << worst << ")";
    }
  }
}

// Only the chunkwise solver runs on the GPU: another solver is a clear input
// error, raised before any device work (so this runs without a device too).
TEST(CudaGka, OtherSolversAreRefused) {
  const VectorCase c{"small", "", dims(1, 10, 1, 16, 16), {}, {}};
  const TensorMap<double> in = generate_inputs(gka().spec, c, 1);
  for (const char* solver : {"exact", "cg"}) {
    const Config cfg = Config::make(gka().spec, {{"solver", solver}});
    EXPECT_THROW(run_kernel("gka", Form::chunk, Tier::bf16, in, cfg), InputError) << solver;
  }
}

// B·H = 512 heads (every multiprocessor busy in every stage): sampled heads equal
// the same head run alone bit for bit, a repeated run is bit-identical, and one
// sampled head passes the oracle in each dtype (GKA's MPFR oracle with 30
// Chebyshev steps per token is the slow part; test::check_full_batch).
TEST(CudaGka, FullGpuBatchIsPerHeadExactAndDeterministic) {
  TTR_REQUIRE_DEVICE();
  Regime opt;
  opt.optional_inputs = true;
  test::check_full_batch(gka(), with_gate_config({{"fill", "", dims(8, 300, 64, 64, 64), opt, {}}})[0], 61,
                         {{0, 0}, {3, 17}, {7, 63}}, {{3, 17}});
}

}  // namespace
}  // namespace ttr
