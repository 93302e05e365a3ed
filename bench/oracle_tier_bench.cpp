// The oracle tiers side by side in one run (issue 19, "fast oracle tiers"):
// gated_delta_rule, B = H = 1, T = 4096, K = V = 128, sequential form, forward
// and backward, in
//   fp64        the float64 tier (the speed a dd tier is measured against)
//   dd          the double-double tier (QD's dd_real)          goal: ≤ 10× fp64
//   mpfr:256    the MPFR tier at 256 bits (the oracle before the tiers)
//   auto        the oracle as check/gate compute it by default: dd and fp64, the
//               per-row decision, and any escalated slices in MPFR-256
//               (oracles/oracle_tier.hpp; none escalate on these inputs)
// Times are CPU time of the benchmark thread (the machine this was measured on is
// shared; wall time depends on the neighbours): read the "CPU" column.
// Run: build/default/bench/oracle_tier_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "oracles/oracle_tier.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"

namespace {

constexpr std::int64_t kT = 4096, kK = 128, kV = 128;

// The workload's inputs (forward; backward: plus a cotangent of every output).
const ttr::TensorMap<double>& inputs_for(ttr::Direction d) {
  static std::map<ttr::Direction, ttr::TensorMap<double>> cache;
  auto it = cache.find(d);
  if (it == cache.end()) {
    const auto& spec = ttr::find_layer("gated_delta_rule").spec;
    const ttr::VectorCase c{"bench", "", {{"B", 1}, {"T", kT}, {"H", 1}, {"K", kK}, {"V", kV}}, {}, {}};
    it = cache.emplace(d, d == ttr::Direction::forward ? ttr::generate_inputs(spec, c, 1)
                                                        : ttr::generate_backward_inputs(spec, c, 1))
             .first;
  }
  return it->second;
}

void BM_Tier(benchmark::State& state, ttr::Arith arith, ttr::Direction d) {
  const auto& layer = ttr::find_layer("gated_delta_rule");
  const ttr::Config cfg = ttr::Config::make(layer.spec, {});
  const auto& in = inputs_for(d);
  for (auto _ : state) {
    auto r = ttr::run_layer(layer, ttr::Form::sequential, arith, in, cfg, 64, d);
    benchmark::DoNotOptimize(r.values.begin()->second.data.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(kT) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Auto(benchmark::State& state, ttr::Direction d) {
  const auto& layer = ttr::find_layer("gated_delta_rule");
  const ttr::Config cfg = ttr::Config::make(layer.spec, {});
  const auto& in = inputs_for(d);
  std::size_t escalated = 0;
  for (auto _ : state) {
    auto r = ttr::compute_oracle_values(layer, ttr::Form::sequential, in, cfg, d, {});
    escalated = r.provenance.escalated.size();
    benchmark::DoNotOptimize(r.values.begin()->second.data.data());
  }
  state.counters["escalated"] = static_cast<double>(escalated);
}

#define TIER(name, arith, dir) \
  BENCHMARK_CAPTURE(BM_Tier, name, arith, ttr::Direction::dir)->Unit(benchmark::kMillisecond)->Iterations(1)

TIER(gdn_fwd_fp64, (ttr::Arith{ttr::Tier::fp64, 0}), forward);
TIER(gdn_fwd_dd, (ttr::Arith{ttr::Tier::dd, 0}), forward);
TIER(gdn_fwd_mpfr256, (ttr::Arith{ttr::Tier::mpfr, 256}), forward);
BENCHMARK_CAPTURE(BM_Auto, gdn_fwd_auto, ttr::Direction::forward)->Unit(benchmark::kMillisecond)->Iterations(1);
TIER(gdn_bwd_fp64, (ttr::Arith{ttr::Tier::fp64, 0}), backward);
TIER(gdn_bwd_dd, (ttr::Arith{ttr::Tier::dd, 0}), backward);
TIER(gdn_bwd_mpfr256, (ttr::Arith{ttr::Tier::mpfr, 256}), backward);
BENCHMARK_CAPTURE(BM_Auto, gdn_bwd_auto, ttr::Direction::backward)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
