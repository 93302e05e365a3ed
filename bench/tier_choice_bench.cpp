// Which library for a fast oracle tier (docs/oracle-tiers.md: the
// measured note). The gated_delta_rule sequential forward at B = H = 1, T = 4096,
// K = V = 128 — the same adapter code the registry runs — instantiated directly for
//   double            float64 (the baseline)
//   dd_real           QD double-double, 106 bits (libqd-dev)      ← the dd tier
//   qd_real           QD quad-double, 212 bits (libqd-dev)
//   float128          Boost.Multiprecision over GCC's __float128 / libquadmath, 113 bits
//   cpp_bin_float_quad  Boost.Multiprecision's portable software binary128, 113 bits
//   mpfr_real         MPFR at 256 bits (the oracle before the tiers)
// CPU time of the benchmark thread (read the "CPU" column; the machine is shared).
// Run: build/default/bench/tier_choice_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/float128.hpp>
#include <qd/qd_real.h>

#include <string>

#include "oracles/layers/gated_delta_rule.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/double_double.hpp"
#include "reference/core/multiprecision.hpp"

namespace ttr {

using float128 = boost::multiprecision::float128;
using soft_quad = boost::multiprecision::cpp_bin_float_quad;

template <>
struct scalar_traits<qd_real> {
  static std::string name() { return "qd"; }
  static qd_real from_double(double x) { return qd_real(x); }
  static double to_double(const qd_real& x) { return ::to_double(x); }
};
template <>
struct scalar_traits<float128> {
  static std::string name() { return "float128"; }
  static float128 from_double(double x) { return float128(x); }
  static double to_double(const float128& x) { return x.convert_to<double>(); }
};
template <>
struct scalar_traits<soft_quad> {
  static std::string name() { return "cpp_bin_float_quad"; }
  static soft_quad from_double(double x) { return soft_quad(x); }
  static double to_double(const soft_quad& x) { return x.convert_to<double>(); }
};

}  // namespace ttr

namespace {

const ttr::TensorMap<double>& inputs() {
  static const ttr::TensorMap<double> in = [] {
    const auto& spec = ttr::find_layer("gated_delta_rule").spec;
    const ttr::VectorCase c{"bench", "", {{"B", 1}, {"T", 4096}, {"H", 1}, {"K", 128}, {"V", 128}}, {}, {}};
    return ttr::generate_inputs(spec, c, 1);
  }();
  return in;
}

template <class S>
void BM_Gdn(benchmark::State& state) {
  const ttr::Config cfg = ttr::Config::make(ttr::find_layer("gated_delta_rule").spec, {});
  ttr::precision_control<ttr::mpfr_real>::set_bits(256);
  ttr::TensorMap<S> in;
  for (const auto& [name, t] : inputs()) {
    ttr::Tensor<S>& y = in[name];
    y.shape = t.shape;
    for (double x : t.data) y.data.push_back(ttr::from_double<S>(x));
  }
  for (auto _ : state) {
    ttr::TensorMap<S> out;
    ttr::layers::gated_delta_rule::sequential<S>(in, cfg, ttr::FormOptions{}, out);
    benchmark::DoNotOptimize(out.at("o").data.data());
  }
}

}  // namespace

BENCHMARK_TEMPLATE(BM_Gdn, double)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_TEMPLATE(BM_Gdn, ttr::dd_real)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_TEMPLATE(BM_Gdn, qd_real)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_TEMPLATE(BM_Gdn, ttr::float128)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_TEMPLATE(BM_Gdn, ttr::soft_quad)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_TEMPLATE(BM_Gdn, ttr::mpfr_real)->Unit(benchmark::kMillisecond)->Iterations(1);

BENCHMARK_MAIN();
