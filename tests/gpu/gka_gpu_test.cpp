// GPU tests of GKA's CUDA kernels (gpu/gka/, solver = chebyshev): the chunk and
// recurrent kernels × {bf16, fp32} against the MPFR oracle under the gate's error
// model (cuda_gate/gate.hpp) on the tiny and standard suites, chunk vs recurrent,
// T not a multiple of 64, K = V = 128, K ≠ V, the optional inputs (β, α, h0,
// hkk0), a fixed λ and the in-kernel L2 norm, a batch that fills the GPU, and
// bit-identical repeated runs. Label `gpu`; without a device every test is
// skipped ("skipped: no CUDA device").
#include <gtest/gtest.h>

#include <cstring>
#include <fmt/format.h>
#include <string>
#include <thread>

#include "cuda_gate/gate.hpp"
#include "oracles/error.hpp"
#include "oracles/error_model.hpp"
#include "oracles/registry.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

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
  ms.chunk_size = cuda::kChunkSize;
  ms.dtype = Tier::bf16;
  const ErrorModel model = model_errors(e, in, cfg, oracle, ms);
  EXPECT_TRUE(compare(e.spec, oracle, model, cuda::run("gka", cuda::Kernel::chunk, Tier::bf16, in, cfg)).pass);
  EXPECT_FALSE(compare(e.spec, oracle, model, cuda::run("gka", cuda::Kernel::chunk, Tier::bf16, other, cfg)).pass);
  EXPECT_FALSE(compare(e.spec, oracle, model, cuda::run("gka", cuda::Kernel::chunk, Tier::bf16, in, cfg_few)).pass);
}

// Only the chunkwise solver runs on the GPU: another solver is a clear input
// error, raised before any device work (so this runs without a device too).
TEST(CudaGka, OtherSolversAreRefused) {
  const VectorCase c{"small", "", dims(1, 10, 1, 16, 16), {}, {}};
  const TensorMap<double> in = generate_inputs(gka().spec, c, 1);
  for (const char* solver : {"exact", "cg"}) {
    const Config cfg = Config::make(gka().spec, {{"solver", solver}});
    EXPECT_THROW(cuda::run("gka", cuda::Kernel::chunk, Tier::bf16, in, cfg), InputError) << solver;
  }
}

// B·H = 512 heads (every multiprocessor busy in every stage): sampled heads equal
// the same head run alone, bit for bit (no cross-block interference), a repeated
// run is bit-identical, and one sampled head passes the oracle in each dtype.
TEST(CudaGka, FullGpuBatchIsPerHeadExactAndDeterministic) {
  TTR_REQUIRE_DEVICE();
  const LayerEntry& e = gka();
  Regime opt;
  opt.optional_inputs = true;
  const VectorCase big = with_gate_config({{"fill", "", dims(8, 300, 64, 64, 64), opt, {}}})[0];
  const TensorMap<double> in = generate_inputs(e.spec, big, 61);
  const Config cfg = Config::make(e.spec, big.config);
  std::vector<std::pair<TensorMap<double>, Tier>> oracle_checks;
  for (Tier dtype : {Tier::bf16, Tier::fp32})
    for (cuda::Kernel k : {cuda::Kernel::chunk, cuda::Kernel::recurrent}) {
      const auto first = cuda::run("gka", k, dtype, in, cfg);
      const auto again = cuda::run("gka", k, dtype, in, cfg);
      for (const auto& [name, t] : first)
        EXPECT_EQ(0, std::memcmp(t.data.data(), again.at(name).data.data(), t.data.size() * sizeof(double)))
            << cuda::kernel_name(k) << " " << tier_name(dtype) << " " << name << ": repeated run differs";
      for (auto [b, h] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {3, 17}, {7, 63}}) {
        const TensorMap<double> one = test::slice_head(e.spec, in, b, h);
        const auto alone = cuda::run("gka", k, dtype, one, cfg);
        const Tensor<double>& o_all = first.at("o");
        const Tensor<double>& o_one = alone.at("o");
        const std::int64_t T = o_all.dim(1), H = o_all.dim(2), V = o_all.dim(3);
        std::int64_t diff = 0;
        for (std::int64_t t = 0; t < T; ++t)
          for (std::int64_t j = 0; j < V; ++j) diff += o_all.data[((b * T + t) * H + h) * V + j] != o_one.data[t * V + j];
        const Tensor<double>& f_all = first.at("fro");
        for (std::int64_t t = 0; t < T; ++t) diff += f_all.data[(b * T + t) * H + h] != alone.at("fro").data[t];
        EXPECT_EQ(diff, 0) << cuda::kernel_name(k) << " " << tier_name(dtype) << " head (" << b << "," << h
                           << ") differs from the same head run alone";
        if (k == cuda::Kernel::chunk && b == 3) oracle_checks.push_back({one, dtype});
      }
    }
  // The oracle checks of head (3, 17), one thread per dtype.
  std::vector<CheckResult> results(oracle_checks.size());
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < oracle_checks.size(); ++i)
    pool.emplace_back([&, i] {
      const auto& [one, dtype] = oracle_checks[i];
      const TensorMap<double> oracle = run_layer(e, Form::sequential, {Tier::mpfr, 128}, one, cfg).values;
      ModelSpec ms;
      ms.chunk_size = cuda::kChunkSize;
      ms.dtype = dtype;
      results[i] = compare(e.spec, oracle, model_errors(e, one, cfg, oracle, ms), cuda::run("gka", cuda::Kernel::chunk, dtype, one, cfg));
    });
  for (auto& t : pool) t.join();
  for (std::size_t i = 0; i < results.size(); ++i) {
    test::report({GateCheck{fmt::format("gka/cuda-chunk/{}/fill_head_3_17/61", tier_name(oracle_checks[i].second)), results[i]}});
    EXPECT_TRUE(results[i].pass);
  }
}

}  // namespace
}  // namespace ttr
