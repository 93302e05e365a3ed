// kalman_filter, sequential form (reference/kalman_filter/sequential.hpp through the
// adapter oracles/layers/kalman_filter.hpp; GKA eq. (KF)), against:
//  * the weighted ridge-regression closed form (GKA eq. (3)),
//        S_t = (Σ_{s≤t} η_s k_s k_sᵀ + λI)⁻¹ Σ_{s≤t} η_s k_s v_sᵀ,   o_t = S_tᵀ (scale q_t),
//    solved here by Gauss–Jordan over the rationals for every prefix — exact equality;
//  * gka with solver=exact, a fixed λ, g = 0 (γ = 1) and β = η: the same ridge
//    solution computed by a dense solve per token instead of Sherman–Morrison;
//  * pdn_exact when η = 1 (both are the same Sherman–Morrison recursion with weight 1).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/layers/kalman_filter.hpp"
#include "oracles/registry.hpp"
#include "reference/core/multiprecision.hpp"
#include "reference/kalman_filter/sequential.hpp"
#include "tests/support/rational.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace {

using Q = ttr::test::rational;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;
using Sets = std::vector<std::pair<std::string, std::string>>;

struct Uniform {  // splitmix64
  std::uint64_t s;
  std::uint64_t bits() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double next(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(bits() >> 11) * 0x1.0p-53; }
};

Tensor<double> uniform(Shape shape, std::uint64_t seed, double lo, double hi) {
  Tensor<double> x(std::move(shape), 0.0);
  Uniform u{seed};
  for (auto& e : x.data) e = u.next(lo, hi);
  return x;
}

// Distance in units in the last place between two finite doubles (ordered-integer map).
std::uint64_t ulp_distance(double a, double b) {
  auto key = [](double x) {
    const auto i = std::bit_cast<std::int64_t>(x);
    return i < 0 ? std::numeric_limits<std::int64_t>::min() - i : i;
  };
  const std::int64_t ka = key(a), kb = key(b);
  return ka > kb ? static_cast<std::uint64_t>(ka) - static_cast<std::uint64_t>(kb)
                 : static_cast<std::uint64_t>(kb) - static_cast<std::uint64_t>(ka);
}

ttr::LayerResult run(const std::string& layer, ttr::Tier tier, const TensorMap<double>& in, const Sets& sets) {
  const ttr::LayerEntry& e = ttr::find_layer(layer);
  return ttr::run_layer(e, ttr::Form::sequential, {tier, 256}, in, ttr::Config::make(e.spec, sets));
}

// gka's o with γ = 1, β = η and a fixed λ is o_t = (Σ η k vᵀ)ᵀ (H_t + λI)⁻¹ (scale q_t),
// H_t = Σ η k kᵀ; kalman_filter's is S_tᵀ(scale q_t) with S_t = (H_t + λI)⁻¹ Σ η k vᵀ
// (H_t + λI symmetric): the same number. Both run in MPFR-256, where each is accurate
// to ≲ 1e-70 relative to its terms (κ(H+λI) ≤ 1 + T·max η‖k‖²/λ ≤ 1 + 20·2·6/0.5 = 481), and are then
// rounded once to double. Two reals that close round to the same double unless a
// rounding boundary lies between them, and then to adjacent doubles: 1 ulp. We allow
// 2 ulps, to cover an element whose exact value cancels to far below its terms
// (its relative error is then larger); none of these random elements does.
TEST(KalmanFilter, EqualsGkaExactWithFixedLambdaAndUnitDecay) {
  const std::int64_t B = 2, T = 20, H = 2, K = 6, V = 4;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(seed);
    TensorMap<double> in;
    in["q"] = uniform({B, T, H, K}, seed * 10 + 1, -1, 1);
    in["k"] = uniform({B, T, H, K}, seed * 10 + 2, -1, 1);
    in["v"] = uniform({B, T, H, V}, seed * 10 + 3, -1, 1);
    const Tensor<double> eta = uniform({B, T, H}, seed * 10 + 4, 0.1, 2.0);
    TensorMap<double> kf = in, gka = in;
    kf["eta"] = eta;
    gka["beta"] = eta;  // run_layer does not range-check: β = η up to 2 is the weighted ridge
    gka["g"] = Tensor<double>({B, T, H}, 0.0);
    const auto a = run("kalman_filter", ttr::Tier::mpfr, kf, {{"lambda", "0.5"}});
    const auto b = run("gka", ttr::Tier::mpfr, gka, {{"lambda", "0.5"}, {"solver", "exact"}});
    const auto& oa = a.values.at("o").data;
    const auto& ob = b.values.at("o").data;
    ASSERT_EQ(oa.size(), ob.size());
    std::uint64_t worst = 0;
    for (std::size_t i = 0; i < oa.size(); ++i) {
      ASSERT_TRUE(std::isfinite(oa[i]) && std::isfinite(ob[i]));
      worst = std::max(worst, ulp_distance(oa[i], ob[i]));
      EXPECT_LE(ulp_distance(oa[i], ob[i]), 2u) << "element " << i << ": " << oa[i] << " vs " << ob[i];
    }
    // Not vacuous: the outputs are far from zero and differ between seeds.
    double mx = 0;
    for (double x : oa) mx = std::max(mx, std::abs(x));
    EXPECT_GT(mx, 0.1);
  }
}

// With η = 1 kalman_filter is pdn_exact: the same Sherman–Morrison recursion whose
// denominator 1/η + kᵀΦk equals 1 + kᵀΦk exactly (1/1 = 1 in every arithmetic).
// Bitwise equal outputs and states, in float64 and MPFR, with η absent and η = 1.
TEST(KalmanFilter, EqualsPdnExactWhenEtaIsOne) {
  const std::int64_t B = 1, T = 15, H = 2, K = 5, V = 3;
  TensorMap<double> in;
  in["q"] = uniform({B, T, H, K}, 41, -1, 1);
  in["k"] = uniform({B, T, H, K}, 42, -1, 1);
  in["v"] = uniform({B, T, H, V}, 43, -1, 1);
  in["h0"] = uniform({B, H, K, V}, 44, -0.2, 0.2);
  TensorMap<double> with_eta = in;
  with_eta["eta"] = Tensor<double>({B, T, H}, 1.0);
  for (ttr::Tier tier : {ttr::Tier::fp64, ttr::Tier::mpfr}) {
    const auto p = run("pdn_exact", tier, in, {{"lambda", "0.25"}});
    for (const TensorMap<double>* kin : {&in, &with_eta}) {
      const auto k = run("kalman_filter", tier, *kin, {{"lambda", "0.25"}});
      for (const char* name : {"o", "ht"}) {
        const auto& x = p.values.at(name).data;
        const auto& y = k.values.at(name).data;
        ASSERT_EQ(x.size(), y.size());
        for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], y[i]) << name << "[" << i << "]";
      }
    }
  }
}

// ------------------------------------------------------------ exact rational closed form

using QMat = std::vector<std::vector<Q>>;

// Solves A X = C exactly (Gauss–Jordan; A is SPD here so a nonzero pivot exists).
QMat solve(QMat A, QMat C) {
  const std::size_t n = A.size(), m = C[0].size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    while (A[p][c] == 0) ++p;
    std::swap(A[p], A[c]);
    std::swap(C[p], C[c]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == c || A[r][c] == 0) continue;
      const Q f = A[r][c] / A[c][c];
      for (std::size_t j = 0; j < n; ++j) A[r][j] -= f * A[c][j];
      for (std::size_t j = 0; j < m; ++j) C[r][j] -= f * C[c][j];
    }
  }
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t j = 0; j < m; ++j) C[r][j] /= A[r][r];
  return C;
}

Tensor<Q> quarters(Shape shape, std::uint64_t seed) {  // multiples of 1/4 in [−1, 1]
  Tensor<Q> x(std::move(shape), Q(0));
  Uniform u{seed};
  for (auto& e : x.data) e = Q(static_cast<int>(u.bits() % 9) - 4, 4);
  return x;
}

// Values in multiples of 1/4, η ∈ {1/2, 1, 2}, λ = 1/2, scale = 1/2: the recursion only
// adds, multiplies and divides, so over GMP rationals it is exact and must equal the
// closed form exactly, for every prefix t and every (b, h).
TEST(KalmanFilter, EqualsWeightedRidgeClosedFormExactly) {
  const std::int64_t B = 2, T = 7, H = 2, K = 3, V = 2;
  const Tensor<Q> q = quarters({B, T, H, K}, 51), k = quarters({B, T, H, K}, 52), v = quarters({B, T, H, V}, 53);
  Tensor<Q> eta({B, T, H}, Q(1));
  {
    Uniform u{54};
    const Q choices[3] = {Q(1, 2), Q(1), Q(2)};
    for (auto& e : eta.data) e = choices[u.bits() % 3];
  }
  const Q lambda(1, 2), scale(1, 2);
  Tensor<Q> o, ht;
  ttr::kalman_filter_sequential<Q>(q, k, v, &eta, nullptr, lambda, scale, o, ht);
  ASSERT_EQ(o.shape, (Shape{B, T, H, V}));
  auto at4 = [](const Tensor<Q>& x, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) -> const Q& {
    return x.data[static_cast<std::size_t>(((a * x.shape[1] + b) * x.shape[2] + c) * x.shape[3] + d)];
  };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      QMat Hm(K, std::vector<Q>(K, Q(0))), U(K, std::vector<Q>(V, Q(0)));
      for (std::int64_t i = 0; i < K; ++i) Hm[i][i] = lambda;
      for (std::int64_t t = 0; t < T; ++t) {
        const Q& e = eta.data[static_cast<std::size_t>((b * T + t) * H + h)];
        for (std::int64_t i = 0; i < K; ++i) {
          for (std::int64_t j = 0; j < K; ++j) Hm[i][j] += e * at4(k, b, t, h, i) * at4(k, b, t, h, j);
          for (std::int64_t j = 0; j < V; ++j) U[i][j] += e * at4(k, b, t, h, i) * at4(v, b, t, h, j);
        }
        const QMat S = solve(Hm, U);
        for (std::int64_t j = 0; j < V; ++j) {
          Q expect(0);
          for (std::int64_t i = 0; i < K; ++i) expect += S[i][j] * scale * at4(q, b, t, h, i);
          EXPECT_EQ(at4(o, b, t, h, j), expect) << "b=" << b << " t=" << t << " h=" << h << " j=" << j;
        }
        if (t == T - 1) {
          for (std::int64_t i = 0; i < K; ++i)
            for (std::int64_t j = 0; j < V; ++j)
              EXPECT_EQ(ht.data[static_cast<std::size_t>(((b * H + h) * K + i) * V + j)], S[i][j]) << "final state";
        }
      }
    }
}

// 256 and 512 bits agree to ≥ 70 significant digits on the tiny suite. Error model:
// each Sherman–Morrison step is backward stable for the ridge problem; with T ≤ 7 tokens
// and κ(Σ η k kᵀ + λI) ≤ 1 + T·max η‖k‖²/λ (≈ 30 for the suite's λ = 1 and unit keys)
// the 256-bit result is accurate to ≲ T·K·κ·u ≈ 1e-74 relative to max|output|.
TEST(KalmanFilterPrecision, Mpfr256And512Agree) {
  using M = ttr::mpfr_real;
  struct Restore {
    unsigned saved = M::default_precision();
    ~Restore() { M::default_precision(saved); }
  } restore;
  for (const char* c : {"basic", "with_state"}) {
    SCOPED_TRACE(c);
    const ttr::test::CaseInputs ci = ttr::test::case_inputs("kalman_filter", "tiny", c);
    TensorMap<M> out[2];
    const unsigned bits[2] = {256, 512};
    for (int p = 0; p < 2; ++p) {
      ttr::precision_control<M>::set_bits(bits[p]);
      TensorMap<M> in;
      for (const auto& [name, x] : ci.tensors) {
        Tensor<M>& y = in[name];
        y.shape = x.shape;
        for (double e : x.data) y.data.emplace_back(e);
      }
      ttr::layers::kalman_filter::sequential<M>(in, ci.config, ttr::FormOptions{}, out[p]);
    }
    for (const char* name : {"o", "ht"}) {
      const auto& lo = out[0].at(name).data;
      const auto& hi = out[1].at(name).data;
      ASSERT_EQ(lo.size(), hi.size());
      M mx(0), err(0);
      for (std::size_t i = 0; i < hi.size(); ++i) {
        mx = std::max(mx, M(abs(hi[i])));
        err = std::max(err, M(abs(lo[i] - hi[i])));
      }
      EXPECT_GT(mx, M(0));
      EXPECT_LE(err, M(1e-70) * mx) << name << ": " << err.str(5) << " of " << mx.str(5);
    }
  }
}

}  // namespace
