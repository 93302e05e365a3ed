// The error model's Monte Carlo runs (gate/error_model.cpp) with each kernel of the
// model's matrix products (reference/core/mca_gemm.cpp: in-order, scalar, AVX-512),
// side by side in one run, on one head of the production GDN shape:
//   gated_delta_rule  B=1 H=1 T=512 K=V=128, chunk form C=64, bf16, 2 samples,
//   forward and backward
// The three kernels give the same model bit for bit (tests/precision/mca_products_test.cpp);
// this measures what the choice costs. One thread (the choice is per thread).
// Run: build/default/bench/model_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <map>

#include "gate/error_model.hpp"
#include "oracles/registry.hpp"
#include "oracles/slices.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/mca_products.hpp"

namespace {

struct Workload {
  ttr::TensorMap<double> inputs, oracle;
  ttr::Config cfg;
};

const Workload& workload(ttr::Direction dir) {
  static std::map<ttr::Direction, Workload> cache;
  auto it = cache.find(dir);
  if (it != cache.end()) return it->second;
  const ttr::LayerEntry& e = ttr::find_layer("gated_delta_rule");
  const ttr::VectorCase c{"bench", "", {{"B", 1}, {"T", 512}, {"H", 1}, {"K", 128}, {"V", 128}}, {}, {}};
  Workload w;
  w.inputs = dir == ttr::Direction::backward ? ttr::generate_backward_inputs(e.spec, c, 0)
                                             : ttr::generate_inputs(e.spec, c, 0);
  w.cfg = ttr::Config::make(e.spec, {});
  w.oracle = ttr::run_layer(e, ttr::Form::sequential, ttr::Arith{ttr::Tier::fp64, 0}, w.inputs, w.cfg, 64, dir).values;
  return cache.emplace(dir, std::move(w)).first->second;
}

void BM_Model(benchmark::State& state, ttr::Direction dir, ttr::McaProducts kernel) {
  if (kernel == ttr::McaProducts::vector && !ttr::mca_products_vector_available()) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  const Workload& w = workload(dir);
  const ttr::LayerEntry& e = ttr::find_layer("gated_delta_rule");
  ttr::ModelSpec ms;
  ms.direction = dir;
  ms.dtype = ttr::Tier::bf16;
  ms.samples = 2;
  ttr::SliceThreadsScope one_thread(1);
  ttr::McaProductsScope scope(kernel);
  for (auto _ : state) benchmark::DoNotOptimize(ttr::model_errors(e, w.inputs, w.cfg, w.oracle, ms));
}

using ttr::Direction;
using ttr::McaProducts;
BENCHMARK_CAPTURE(BM_Model, forward_in_order, Direction::forward, McaProducts::in_order)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Model, forward_scalar, Direction::forward, McaProducts::scalar)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Model, forward_vector, Direction::forward, McaProducts::vector)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Model, backward_in_order, Direction::backward, McaProducts::in_order)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Model, backward_scalar, Direction::backward, McaProducts::scalar)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Model, backward_vector, Direction::backward, McaProducts::vector)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
