// Oracle wall time per layer and arithmetic, side by side in one run (ratios to
// fp64 are what the issues ask for):
//   gated_delta_rule  B=1 H=1 T=4096 K=V=128           fp64, MPFR-128, MPFR-256
//   gka               B=1 H=1 T=2048 K=V=64   exact, chebyshev (30 iters): fp64, MPFR-256
//   kla_kalman        B=1 H=1 T=65536 N=16 D=64         fp64, MPFR-256
// and the backward direction (the gradient oracle) next to its forward:
//   gated_delta_rule  B=1 H=1 T=4096 K=V=128           fp64, MPFR-256
//   gka               B=1 H=1 T=2048 K=V=64   chebyshev (30 iters): fp64, MPFR-256
// each also with every state kept (checkpoint spacing C = T, the memory layout
// before checkpointing; *_all_states, the reference backward called directly)
// beside the default C = ⌈√T⌉ the registry runs; and the delta core's MPFR adjoint
// in the definition's layout (*_definition_*: 13 operations per state element and
// token) beside the scaled layout the MPFR tier runs (10; family/delta_backward_scaled.hpp).
// Run: build/default/bench/oracle_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <map>

#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/multiprecision.hpp"
#include "reference/family/delta_backward.hpp"
#include "reference/gka/backward.hpp"

namespace {

struct Workload {
  const char* layer;
  std::int64_t T, K, V;
  std::vector<std::pair<std::string, std::string>> config;
};

// The inputs of a workload; backward: plus a cotangent of every output (the
// backward spec's extra inputs, drawn from their own streams).
const ttr::TensorMap<double>& inputs_for(const Workload& w, ttr::Direction d) {
  static std::map<std::string, ttr::TensorMap<double>> cache;
  const std::string key = std::string(w.layer) + std::to_string(w.T) + ttr::direction_name(d);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const auto& spec = ttr::find_layer(w.layer).spec;
    ttr::VectorCase c{"bench", "",
                      {{"B", 1}, {"T", w.T}, {"H", 1}, {"K", w.K}, {"V", w.V}, {"N", w.K}, {"D", w.V}}, {}, {}};
    ttr::TensorMap<double> in = ttr::generate_inputs(spec, c, 1);
    if (d == ttr::Direction::backward) {
      ttr::LayerSpec cot = ttr::backward_spec(spec);
      std::erase_if(cot.inputs, [&](const ttr::TensorSpec& t) { return spec.input(t.name) != nullptr; });
      for (auto& t : cot.inputs) t.required = true;
      for (auto& [name, t] : ttr::generate_inputs(cot, c, 1)) in[name] = std::move(t);
    }
    it = cache.emplace(key, std::move(in)).first;
  }
  return it->second;
}

void BM_Oracle(benchmark::State& state, Workload w, ttr::Arith arith, ttr::Direction d = ttr::Direction::forward) {
  const auto& layer = ttr::find_layer(w.layer);
  const ttr::Config cfg = ttr::Config::make(layer.spec, w.config);
  const auto& in = inputs_for(w, d);
  for (auto _ : state) {
    auto r = ttr::run_layer(layer, ttr::Form::sequential, arith, in, cfg, 64, d);
    benchmark::DoNotOptimize(r.values.begin()->second.data.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(w.T) * state.iterations(),
                                                  benchmark::Counter::kIsRate);
}

template <class S>
ttr::Tensor<S> as(const ttr::Tensor<double>& x) {
  ttr::Tensor<S> y;
  y.shape = x.shape;
  for (double e : x.data) y.data.push_back(ttr::from_double<S>(e));
  return y;
}

// The reference backward with checkpoint spacing C (C = T: every state kept), on
// the registry backward's inputs (gated_delta_rule: scale K^-1/2, its default).
template <class S>
void BM_AllStates(benchmark::State& state, Workload w, unsigned bits,
                  ttr::DeltaLayout layout = ttr::DeltaLayout::automatic, bool all_states = true) {
  const unsigned saved = ttr::mpfr_real::default_precision();
  if (bits) ttr::precision_control<ttr::mpfr_real>::set_bits(bits);
  const auto& in = inputs_for(w, ttr::Direction::backward);
  ttr::TensorMap<S> x;
  for (const auto& [name, t] : in) x[name] = as<S>(t);
  const auto opt = [&](const char* n) { return x.count(n) ? &x.at(n) : nullptr; };
  for (auto _ : state) {
    if (std::string(w.layer) == "gated_delta_rule") {
      ttr::DeltaGrads<S> g;
      ttr::delta_backward<S>(ttr::Decay::scalar, x.at("q"), x.at("k"), x.at("k"), x.at("v"), x.at("beta"), &x.at("g"),
                             opt("h0"), ttr::from_double<S>(1.0 / std::sqrt(static_cast<double>(w.K))), x.at("do"),
                             opt("dht"), g, all_states ? w.T : 0, layout);
      benchmark::DoNotOptimize(g.dq.data.data());
    } else {
      const ttr::GkaInputs<S> gi{x.at("q"), x.at("k"), x.at("v"), x.at("g"), opt("beta"), opt("alpha"), opt("h0"),
                                 opt("hkk0")};
      ttr::GkaOptions o;
      o.solver = ttr::GkaSolver::chebyshev;
      o.iters = 30;
      ttr::GkaGrads<S> g;
      ttr::GkaBackwardOptions bo;
      bo.checkpoint_every = w.T;
      ttr::gka_backward(gi, o, ttr::from_double<S>(1.0 / std::sqrt(static_cast<double>(w.K))),
                        ttr::GkaCotangents<S>{x.at("do"), opt("dht"), opt("dhkk")}, g, bo);
      benchmark::DoNotOptimize(g.dq.data.data());
    }
  }
  ttr::mpfr_real::default_precision(saved);
}

const ttr::Arith fp64{ttr::Tier::fp64, 0}, mpfr128{ttr::Tier::mpfr, 128}, mpfr256{ttr::Tier::mpfr, 256};
const Workload gdn{"gated_delta_rule", 4096, 128, 128, {}};
const Workload gka_exact{"gka", 2048, 64, 64, {{"solver", "exact"}}};
const Workload gka_cheb{"gka", 2048, 64, 64, {{"solver", "chebyshev"}, {"iters", "30"}}};
const Workload kla{"kla_kalman", 65536, 16, 64, {}};

}  // namespace

#define TTR_BENCH(name, w, ...) \
  BENCHMARK_CAPTURE(BM_Oracle, name, w, __VA_ARGS__)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1)

TTR_BENCH(gated_delta_rule_fp64, gdn, fp64);
TTR_BENCH(gated_delta_rule_mpfr128, gdn, mpfr128);
TTR_BENCH(gated_delta_rule_mpfr256, gdn, mpfr256);
TTR_BENCH(gka_exact_fp64, gka_exact, fp64);
TTR_BENCH(gka_exact_mpfr256, gka_exact, mpfr256);
TTR_BENCH(gka_chebyshev30_fp64, gka_cheb, fp64);
TTR_BENCH(gka_chebyshev30_mpfr256, gka_cheb, mpfr256);
TTR_BENCH(kla_kalman_fp64, kla, fp64);
TTR_BENCH(kla_kalman_mpfr256, kla, mpfr256);
TTR_BENCH(gated_delta_rule_backward_fp64, gdn, fp64, ttr::Direction::backward);
TTR_BENCH(gated_delta_rule_backward_mpfr256, gdn, mpfr256, ttr::Direction::backward);
TTR_BENCH(gka_chebyshev30_backward_fp64, gka_cheb, fp64, ttr::Direction::backward);
TTR_BENCH(gka_chebyshev30_backward_mpfr256, gka_cheb, mpfr256, ttr::Direction::backward);

namespace {
void BM_AllStatesFp64(benchmark::State& state, Workload w) { BM_AllStates<double>(state, std::move(w), 0); }
void BM_AllStatesMpfr(benchmark::State& state, Workload w, unsigned bits) {
  BM_AllStates<ttr::mpfr_real>(state, std::move(w), bits);
}
void BM_DefinitionLayoutMpfr(benchmark::State& state, Workload w, unsigned bits) {
  BM_AllStates<ttr::mpfr_real>(state, std::move(w), bits, ttr::DeltaLayout::definition, false);
}
}  // namespace

#define TTR_BENCH_ALL_STATES(name, fn, ...) \
  BENCHMARK_CAPTURE(fn, name, __VA_ARGS__)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1)

TTR_BENCH_ALL_STATES(gated_delta_rule_backward_all_states_fp64, BM_AllStatesFp64, gdn);
TTR_BENCH_ALL_STATES(gated_delta_rule_backward_all_states_mpfr256, BM_AllStatesMpfr, gdn, 256u);
TTR_BENCH_ALL_STATES(gka_chebyshev30_backward_all_states_fp64, BM_AllStatesFp64, gka_cheb);
TTR_BENCH_ALL_STATES(gka_chebyshev30_backward_all_states_mpfr256, BM_AllStatesMpfr, gka_cheb, 256u);
TTR_BENCH_ALL_STATES(gated_delta_rule_backward_definition_mpfr256, BM_DefinitionLayoutMpfr, gdn, 256u);

BENCHMARK_MAIN();
