// Gradient oracles on ill-conditioned inputs, beside ill_conditioned_backward_test's
// ridge case: GKA with a = 1e-6 and the delta rule with near-collinear keys
// (kla_kalman where float64 overflows: kla_overflow_backward_slow_test.cpp).
//
// Threshold (GKA, delta rule). Every step of the adjoints is backward stable
// (sums, products, a Cholesky solve): the computed gradient is the exact gradient
// of inputs perturbed relatively by at most γ_n = n·u, n the number of rounded
// operations an entry goes through (≲ 4·T·K here: T tokens of length-K dot
// products, the solve and its adjoint). So the relative error of the 256-bit
// gradient is ≤ κ·γ_n with κ the relative condition number of the gradient map
// (inputs → gradients), which the test measures: the largest relative change of
// the 512-bit gradients under random relative perturbations 2^-150 of every input,
// divided by 2^-150 (a lower estimate of κ; a factor 16 absorbs it). Hence
//   ‖g_256 − g_512‖/‖g_512‖ ≤ 16·4·T·K·κ·2^-256,
// and float64's error is about κ·2^-53·(growth): visibly worse than float64's ~1e-15
// on well-conditioned inputs; the test asserts ≥ 1e-12 (a thousand times that) and
// ≥ 1e40 times the 256-bit error. Measured (TTR run, printed): GKA a = 1e-6, keys
// within 2^-14 of one direction: κ(H_t + λ_t I) ≈ 1/a = 1e6, κ of the gradient map
// 2.1e4, MPFR-256 vs 512 1.3e-72 (bound 2.8e-70), float64 7.9e-11; the delta rule:
// κ 7.3e5, MPFR-256 vs 512 2.7e-72 (bound 1.3e-68), float64 5.4e-11.
//
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <cstdio>
#include <functional>

#include "oracles/config.hpp"
#include "oracles/layers/gated_delta_rule.hpp"
#include "oracles/layers/gka.hpp"
#include "oracles/registry.hpp"
#include "tests/support/grad_check.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using namespace ttr::test::grad;
using ttr::Tensor;
using ttr::TensorMap;
using Backward = std::function<void(const TensorMap<mp>&, const ttr::Config&, TensorMap<mp>&)>;

TensorMap<mp> mp_grads(const Backward& bwd, const TensorMap<double>& in, const ttr::Config& cfg, unsigned bits) {
  ttr::precision_control<mp>::set_bits(bits);
  TensorMap<mp> out;
  bwd(ttr::test::to_mp(in), cfg, out);
  return out;
}

double worst_rel(const TensorMap<mp>& got, const TensorMap<mp>& want) {
  double w = 0;
  for (const auto& [name, x] : want) w = std::max(w, rel_err(got.at(name), x));
  return w;
}

// κ of the gradient map, estimated at 512 bits (see the header).
double measured_kappa(const Backward& bwd, const TensorMap<double>& in, const ttr::Config& cfg) {
  ttr::precision_control<mp>::set_bits(512);
  const TensorMap<mp> x = ttr::test::to_mp(in);
  TensorMap<mp> g0;
  bwd(x, cfg, g0);
  const mp eps = ldexp(mp(1), -150);
  double kappa = 0;
  for (std::uint64_t pattern = 0; pattern < 3; ++pattern) {
    TensorMap<mp> y = x;
    std::uint64_t s = 0x9E3779B97F4A7C15ull * (pattern + 1);
    for (auto& [name, t] : y)
      for (mp& e : t.data) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        e *= 1 + ((s >> 11) & 1 ? eps : mp(-eps));
      }
    TensorMap<mp> g1;
    bwd(y, cfg, g1);
    kappa = std::max(kappa, worst_rel(g1, g0) / eps.convert_to<double>());
  }
  return kappa;
}

double fp64_vs(const ttr::LayerEntry& e, const TensorMap<double>& in, const ttr::Config& cfg, const TensorMap<mp>& ref) {
  const auto g = ttr::run_layer(e, ttr::Form::sequential, {ttr::Tier::fp64, 0}, in, cfg, 64, ttr::Direction::backward);
  double worst = 0;
  for (const auto& [name, w] : ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < w.data.size(); ++i) {
      const double b = w.data[i].convert_to<double>();
      num = std::max(num, std::abs(g.values.at(name).data[i] - b));
      den = std::max(den, std::abs(b));
    }
    worst = std::max(worst, std::isfinite(num) ? num / den : INFINITY);
  }
  return worst;
}

// Keys within 2^-14 ≈ 6e-5 of one direction (exact binary values).
void near_collinear_keys(Tensor<double>& k, std::int64_t T, std::int64_t K, double wobble_exp) {
  const double dir[4] = {0.5, 0.5, 0.5, 0.5};
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < K; ++i) k.data[t * K + i] = dir[i] + std::ldexp(std::sin(3.0 * t + 7.0 * i), wobble_exp);
}

void smooth(Tensor<double>& x, double phase, double lo, double hi) {
  for (std::size_t n = 0; n < x.data.size(); ++n)
    x.data[n] = lo + (hi - lo) * 0.5 * (1 + std::sin(phase + 1.7 * static_cast<double>(n)));
}

void check_ill_conditioned(const char* layer, const Backward& bwd, const TensorMap<double>& in, const ttr::test::Sets& sets,
                           std::int64_t T, std::int64_t K, double min_kappa) {
  const ttr::LayerEntry& e = ttr::find_layer(layer);
  const ttr::Config cfg = ttr::Config::make(e.spec, sets);
  const ttr::test::PrecisionGuard guard;
  const double kappa = measured_kappa(bwd, in, cfg);
  const TensorMap<mp> m512 = mp_grads(bwd, in, cfg, 512), m256 = mp_grads(bwd, in, cfg, 256);
  const double d256 = worst_rel(m256, m512);
  const double bound256 = 16.0 * 4.0 * static_cast<double>(T * K) * kappa * std::ldexp(1.0, -256);
  const double d64 = fp64_vs(e, in, cfg, m512);
  testing::Test::RecordProperty("kappa", std::to_string(kappa));
  testing::Test::RecordProperty("mpfr256_vs_512", std::to_string(d256));
  testing::Test::RecordProperty("fp64_vs_512", std::to_string(d64));
  std::printf("%s: kappa %.3g; MPFR-256 vs 512 %.3g (bound %.3g); float64 vs 512 %.3g\n", layer, kappa, d256,
              bound256, d64);
  EXPECT_GT(kappa, min_kappa) << "the case must be ill-conditioned";
  EXPECT_LE(d256, bound256);
  EXPECT_GT(d256, 0.0) << "the 256-bit run must differ from the 512-bit one somewhere";
  EXPECT_GT(d64, 1e-12) << "float64 should visibly fail here";
  EXPECT_GT(d64, 1e40 * d256);
}

TEST(IllConditionedBackward, GkaWithATinyRidgeAgreesToTheDigitsTheConditionAllows) {
  const std::int64_t T = 6, K = 4, V = 3;
  TensorMap<double> in{{"q", Tensor<double>({1, T, 1, K}, 0.0)},  {"k", Tensor<double>({1, T, 1, K}, 0.0)},
                       {"v", Tensor<double>({1, T, 1, V}, 0.0)},  {"g", Tensor<double>({1, T, 1}, 0.0)},
                       {"do", Tensor<double>({1, T, 1, V}, 0.0)}, {"dht", Tensor<double>({1, 1, K, V}, 0.0)}};
  near_collinear_keys(in["k"], T, K, -14);
  smooth(in["q"], 1.0, -1, 1);
  smooth(in["v"], 0.5, -1, 1);
  smooth(in["g"], 0.2, -0.1, 0);
  smooth(in["do"], 0.25, -1, 1);
  smooth(in["dht"], 0.7, -0.2, 0.2);
  check_ill_conditioned("gka",
                        [](const TensorMap<mp>& x, const ttr::Config& c, TensorMap<mp>& o) {
                          ttr::layers::gka::sequential_backward<mp>(x, c, ttr::FormOptions{}, o);
                        },
                        in, {{"a", "1e-6"}, {"solver", "exact"}}, T, K, 1e4);
}

// The delta rule writes δ_t = β(v_t − S̄_tᵀk_t): with unit keys repeating to within
// 2^-20, values a fixed linear map of the keys, β = 1 and no decay (g = 0), each
// write makes S_tᵀk_t = v_t, so the next prediction S̄ᵀk is right to O(2^-20): δ is
// a difference of O(1) terms of size O(2^-20), and the gradients through it (dβ,
// and dk, dv through dδ) inherit the cancellation.
TEST(IllConditionedBackward, DeltaRuleWithNearCollinearKeysAgreesToTheDigitsTheConditionAllows) {
  const std::int64_t T = 8, K = 4, V = 3;
  TensorMap<double> in{{"q", Tensor<double>({1, T, 1, K}, 0.0)},   {"k", Tensor<double>({1, T, 1, K}, 0.0)},
                       {"v", Tensor<double>({1, T, 1, V}, 0.0)},   {"g", Tensor<double>({1, T, 1}, 0.0)},
                       {"beta", Tensor<double>({1, T, 1}, 1.0)},   {"do", Tensor<double>({1, T, 1, V}, 0.0)},
                       {"dht", Tensor<double>({1, 1, K, V}, 0.0)}};
  near_collinear_keys(in["k"], T, K, -20);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < V; ++j) {
      double acc = 0;
      for (std::int64_t i = 0; i < K; ++i) acc += std::cos(1.0 + i + 3.0 * j) * in["k"].data[t * K + i];
      in["v"].data[t * V + j] = acc;
    }
  smooth(in["q"], 1.0, -1, 1);
  smooth(in["do"], 0.25, -1, 1);
  smooth(in["dht"], 0.7, -0.2, 0.2);
  check_ill_conditioned("gated_delta_rule",
                        [](const TensorMap<mp>& x, const ttr::Config& c, TensorMap<mp>& o) {
                          ttr::layers::gated_delta_rule::sequential_backward<mp>(x, c, ttr::FormOptions{}, o);
                        },
                        in, {}, T, K, 1e5);
}

}  // namespace
