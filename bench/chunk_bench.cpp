// The CPU chunk and scan forms (the built-in kernels under test) at realistic
// shapes, in fp32 and bf16 policy, with the sequential fp32 form alongside:
//   gated_delta_rule  B=1 H=4 T=4096 K=V=64   chunk C=64
//   gka               B=1 H=2 T=2048 K=V=64   chunk C=64, Chebyshev 30 iterations
//   kla_kalman        B=1 H=4 T=4096 N=16 D=64 scan and chunk (C=64)
// Run: build/default/bench/chunk_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// (one core: the forms are single-threaded).
#include <benchmark/benchmark.h>

#include <map>

#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"

namespace {

struct Workload {
  const char* layer;
  std::int64_t H, T, K, V;
  std::vector<std::pair<std::string, std::string>> config;
};

const ttr::TensorMap<double>& inputs_for(const Workload& w) {
  static std::map<std::string, ttr::TensorMap<double>> cache;
  const std::string key = std::string(w.layer) + std::to_string(w.T);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const auto& spec = ttr::find_layer(w.layer).spec;
    ttr::VectorCase c{"bench", "",
                      {{"B", 1}, {"T", w.T}, {"H", w.H}, {"K", w.K}, {"V", w.V}, {"N", w.K}, {"D", w.V}}, {}, {}};
    it = cache.emplace(key, ttr::generate_inputs(spec, c, 1)).first;
  }
  return it->second;
}

void BM_Form(benchmark::State& state, Workload w, ttr::Form form, ttr::Arith arith) {
  const auto& layer = ttr::find_layer(w.layer);
  const ttr::Config cfg = ttr::Config::make(layer.spec, w.config);
  const auto& in = inputs_for(w);
  for (auto _ : state) {
    auto r = ttr::run_layer(layer, form, arith, in, cfg, 64);
    benchmark::DoNotOptimize(r.values.at("o").data.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(w.T * w.H) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
}

const ttr::Arith fp32{ttr::Tier::fp32, 0}, bf16{ttr::Tier::bf16, 0};
const Workload gdn{"gated_delta_rule", 4, 4096, 64, 64, {}};
const Workload gka{"gka", 2, 2048, 64, 64, {{"solver", "chebyshev"}, {"iters", "30"}}};
const Workload kla{"kla_kalman", 4, 4096, 16, 64, {}};
using ttr::Form;

}  // namespace

#define TTR_BENCH(name, w, f, a) \
  BENCHMARK_CAPTURE(BM_Form, name, w, f, a)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5)

TTR_BENCH(gated_delta_rule_sequential_fp32, gdn, Form::sequential, fp32);
TTR_BENCH(gated_delta_rule_chunk_fp32, gdn, Form::chunk, fp32);
TTR_BENCH(gated_delta_rule_chunk_bf16, gdn, Form::chunk, bf16);
TTR_BENCH(gka_chebyshev30_sequential_fp32, gka, Form::sequential, fp32);
TTR_BENCH(gka_chebyshev30_chunk_fp32, gka, Form::chunk, fp32);
TTR_BENCH(gka_chebyshev30_chunk_bf16, gka, Form::chunk, bf16);
TTR_BENCH(kla_kalman_sequential_fp32, kla, Form::sequential, fp32);
TTR_BENCH(kla_kalman_scan_fp32, kla, Form::scan, fp32);
TTR_BENCH(kla_kalman_scan_bf16, kla, Form::scan, bf16);
TTR_BENCH(kla_kalman_chunk_fp32, kla, Form::chunk, fp32);
TTR_BENCH(kla_kalman_chunk_bf16, kla, Form::chunk, bf16);

BENCHMARK_MAIN();
