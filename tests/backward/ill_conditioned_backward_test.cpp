// Gradient oracles on ill-conditioned inputs: the ridge layer pdn_exact with
// λ = 1e-8 and nearly collinear keys (PDN eq. (5): P_0 = I/λ, so P_t holds
// (Σ k kᵀ + λI)⁻¹ with condition number κ). The adjoint solves with the same
// matrix as the forward (GKA Lemma 1's implicit-differentiation argument), so a
// relative perturbation u of the arithmetic moves the gradients by up to ~κ²·u
// (one κ for the forward solve, one for the adjoint's). Hence, with κ computed
// here from the keys:
//   * MPFR-256 agrees with MPFR-512 to ≤ 1e3·T·κ²·2⁻²⁵⁶ (the 1e3·T absorbs the
//     per-token constants of the Sherman–Morrison updates);
//   * float64 does not: its gradients lose about log10(κ) ≈ 9 of their 16 digits
//     (measured 2e-9 relative for κ = 5.9e8, against ~1e-15 on well-conditioned
//     inputs): the test asserts ≥ 1e-12, a thousand times float64's usual
//     accuracy, which is why the oracle is not float64.
// The MPFR gradients are compared in MPFR (not through float64), so that the
// 256-bit oracle's own error is actually seen.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>

#include "oracles/config.hpp"
#include "oracles/layers/pdn_exact.hpp"
#include "oracles/registry.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using ttr::Tensor;
using ttr::TensorMap;

double max_rel_diff(const TensorMap<double>& a, const TensorMap<double>& b) {
  double worst = 0;
  for (const auto& [name, x] : b) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < x.data.size(); ++i) {
      const double d = a.at(name).data[i] - x.data[i];
      num += d * d;
      den += x.data[i] * x.data[i];
    }
    worst = std::max(worst, std::sqrt(num / den));
  }
  return worst;
}

TEST(IllConditionedBackward, RidgeGradientsAgreeToTheDigitsTheConditionAllows) {
  const std::int64_t L = 6, K = 3, V = 2;
  TensorMap<double> in;
  in["q"] = Tensor<double>({1, L, 1, K}, 0.0);
  in["k"] = Tensor<double>({1, L, 1, K}, 0.0);
  in["v"] = Tensor<double>({1, L, 1, V}, 0.0);
  in["do"] = Tensor<double>({1, L, 1, V}, 0.0);
  in["dht"] = Tensor<double>({1, 1, K, V}, 0.0);
  // Keys within ~1e-4 of one direction: Σ k kᵀ has eigenvalues ~L and ~1e-8.
  const double dir[3] = {0.6, 0.48, 0.64};
  for (std::int64_t t = 0; t < L; ++t)
    for (std::int64_t i = 0; i < K; ++i) {
      const double wobble = std::ldexp(std::sin(3.0 * t + 7.0 * i), -14);  // ≈ 6e-5, exact in binary
      in["k"].data[t * K + i] = dir[i] + wobble;
      in["q"].data[t * K + i] = std::cos(1.0 + t + 2.0 * i);
    }
  for (std::int64_t n = 0; n < L * V; ++n) {
    in["v"].data[n] = std::sin(0.5 + n);
    in["do"].data[n] = std::cos(0.25 + 2.0 * n);
  }
  for (std::int64_t n = 0; n < K * V; ++n) in["dht"].data[n] = 0.125 * (n % 3) - 0.1;
  const double lambda = 1e-8;
  Eigen::Matrix3d A = lambda * Eigen::Matrix3d::Identity();
  for (std::int64_t t = 0; t < L; ++t) {
    const Eigen::Vector3d k(in["k"].data[t * K], in["k"].data[t * K + 1], in["k"].data[t * K + 2]);
    A += k * k.transpose();
  }
  const Eigen::Vector3d ev = Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d>(A).eigenvalues();
  const double kappa = ev(2) / ev(0);
  ASSERT_GT(kappa, 1e6) << "the case must be ill-conditioned";

  const ttr::LayerEntry& e = ttr::find_layer("pdn_exact");
  const ttr::Config cfg = ttr::Config::make(e.spec, {{"lambda", "1e-8"}});
  const auto grads = [&](ttr::Arith a) {
    return ttr::run_layer(e, ttr::Form::sequential, a, in, cfg, 64, ttr::Direction::backward).values;
  };
  const ttr::test::PrecisionGuard guard;
  const auto mp_grads = [&](unsigned bits) {
    ttr::precision_control<ttr::test::mp>::set_bits(bits);
    ttr::TensorMap<ttr::test::mp> out;
    ttr::layers::pdn_exact::sequential_backward<ttr::test::mp>(ttr::test::to_mp(in), cfg, ttr::FormOptions{}, out);
    return out;
  };
  const auto m512 = mp_grads(512), m256 = mp_grads(256);
  double d256 = 0;
  for (const auto& [name, x] : m512) d256 = std::max(d256, ttr::test::rel_err(m256.at(name), x));
  const TensorMap<double> g512 = grads({ttr::Tier::mpfr, 512}), g64 = grads({ttr::Tier::fp64, 0});
  const double bound256 = 1e3 * static_cast<double>(L) * kappa * kappa * std::ldexp(1.0, -256);
  const double d64 = max_rel_diff(g64, g512);
  RecordProperty("kappa", std::to_string(kappa));
  RecordProperty("mpfr256_vs_512", std::to_string(d256));
  RecordProperty("fp64_vs_512", std::to_string(d64));
  EXPECT_LE(d256, bound256) << "kappa " << kappa;
  EXPECT_GT(d256, 0.0) << "the 256-bit run must differ from the 512-bit one somewhere (else nothing was compared)";
  EXPECT_GT(d64, 1e-12) << "kappa " << kappa << ": float64 should visibly fail here";
  std::printf("kappa %.3g: MPFR-256 vs 512 %.3g (bound %.3g); float64 vs 512 %.3g\n", kappa, d256, bound256, d64);
}

}  // namespace
