// pdn_exact, sequential form (reference/pdn_exact/sequential.hpp; adapter
// oracles/layers/pdn_exact.hpp), against independent expectations in exact
// rational arithmetic (GMP mpq):
//  * a hand-derived two-token case;
//  * the ridge-regression closed form (PDN Thm 3.1), solved here by Gaussian
//    elimination over the rationals on every prefix, with and without h0;
//  * a zero key leaves state and preconditioner unchanged.
// The ill-conditioned MPFR / float64 study is in tests/identities/delta_identities_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "reference/pdn_exact/sequential.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/rational.hpp"

namespace {

using namespace ttr::test;
using Q = ttr::test::rational;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;
using Mat = std::vector<std::vector<Q>>;

// Solves A X = C exactly (Gauss–Jordan with a nonzero pivot; A is SPD here).
Mat solve(Mat A, Mat C) {
  const std::size_t n = A.size(), m = C[0].size();
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t piv = col;
    while (piv < n && A[piv][col] == 0) ++piv;
    if (piv == n) ADD_FAILURE() << "singular system";
    std::swap(A[col], A[piv]);
    std::swap(C[col], C[piv]);
    const Q d = A[col][col];
    for (std::size_t j = 0; j < n; ++j) A[col][j] /= d;
    for (std::size_t j = 0; j < m; ++j) C[col][j] /= d;
    for (std::size_t r = 0; r < n; ++r) {
      if (r == col || A[r][col] == 0) continue;
      const Q f = A[r][col];
      for (std::size_t j = 0; j < n; ++j) A[r][j] -= f * A[col][j];
      for (std::size_t j = 0; j < m; ++j) C[r][j] -= f * C[col][j];
    }
  }
  return C;
}

// Ridge closed form for every prefix t of one (b, h):
//   S_t = (Σ_{s≤t} k_s k_sᵀ + λI)⁻¹ (λ h0 + Σ_{s≤t} k_s v_sᵀ),   o_t = S_tᵀ (scale q_t).
// With h0 = 0 this is PDN Thm 3.1. For h0 ≠ 0 (our derivation): k̃_t = P_{t-1}k/(1 + kᵀP_{t-1}k)
// = P_t k by Sherman–Morrison, so P_t⁻¹S_t = P_t⁻¹S_{t-1} + k (v − S_{t-1}ᵀk)ᵀ
// = (P_{t-1}⁻¹ + k kᵀ) S_{t-1} − k kᵀ S_{t-1} + k vᵀ = P_{t-1}⁻¹S_{t-1} + k vᵀ, and P_0⁻¹S_0 = λ h0.
void ridge_form(const Tensor<Q>& q, const Tensor<Q>& k, const Tensor<Q>& v, const Tensor<Q>* h0, const Q& lambda,
                const Q& scale, Tensor<Q>& o, Tensor<Q>& ht) {
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  o = Tensor<Q>({B, T, H, V}, Q(0));
  ht = Tensor<Q>({B, H, K, V}, Q(0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      Mat G(K, std::vector<Q>(K, Q(0))), C(K, std::vector<Q>(V, Q(0)));
      for (std::int64_t i = 0; i < K; ++i) {
        G[i][i] = lambda;
        if (h0)
          for (std::int64_t j = 0; j < V; ++j) C[i][j] = lambda * h0->data[i4(ht.shape, b, h, i, j)];
      }
      Mat S = solve(G, C);
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t i = 0; i < K; ++i) {
          const Q ki = k.data[i4(k.shape, b, t, h, i)];
          for (std::int64_t l = 0; l < K; ++l) G[i][l] += ki * k.data[i4(k.shape, b, t, h, l)];
          for (std::int64_t j = 0; j < V; ++j) C[i][j] += ki * v.data[i4(v.shape, b, t, h, j)];
        }
        S = solve(G, C);
        for (std::int64_t j = 0; j < V; ++j) {
          Q acc = 0;
          for (std::int64_t i = 0; i < K; ++i) acc += S[i][j] * scale * q.data[i4(q.shape, b, t, h, i)];
          o.data[i4(o.shape, b, t, h, j)] = acc;
        }
      }
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t j = 0; j < V; ++j) ht.data[i4(ht.shape, b, h, i, j)] = S[i][j];
    }
}

// Hand derivation (K=V=1, λ=1, scale=1, q=1, S_0=0):
//   P_0 = 1.  t=1: k=1, v=2: p = P_0k = 1, denom = 1 + kp = 2, k̃ = 1/2, r = v − S_0k = 2,
//                  S_1 = 0 + ½·2 = 1, o_1 = 1;  P_1 = 1 − p k̃ = 1/2.
//                  (ridge: (1² + 1)⁻¹·1·2 = 1 ✓)
//             t=2: k=2, v=1: p = ½·2 = 1, denom = 1 + 2·1 = 3, k̃ = 1/3, r = 1 − 1·2 = −1,
//                  S_2 = 1 − 1/3 = 2/3, o_2 = 2/3;  P_2 = ½ − 1·⅓ = 1/6.
//                  (ridge: (1 + 4 + 1)⁻¹(1·2 + 2·1) = 4/6 = 2/3 ✓)
TEST(PdnExact, HandDerivedTwoTokens) {
  const auto q = from_values({1, 2, 1, 1}, {1, 1});
  const auto k = from_values({1, 2, 1, 1}, {1, 2});
  const auto v = from_values({1, 2, 1, 1}, {2, 1});
  Tensor<Q> o, ht;
  ttr::pdn_exact_sequential<Q>(q, k, v, nullptr, Q(1), Q(1), o, ht);
  expect_exact(o, from_values({1, 2, 1, 1}, {1, Q(2, 3)}), "o");
  expect_exact(ht, from_values({1, 1, 1, 1}, {Q(2, 3)}), "ht");
}

struct Case {
  std::int64_t B, T, H, K, V;
  bool with_h0;
  Q lambda, scale;
  std::uint64_t seed;
};

TEST(PdnExact, ExactRationalMatchesRidgeClosedForm) {
  for (const Case& c : {Case{2, 5, 2, 3, 2, false, Q(1, 2), Q(1, 2), 61}, Case{1, 6, 2, 4, 3, true, Q(1), Q(3, 4), 62},
                        Case{3, 4, 1, 2, 2, true, Q(1, 8), Q(1), 63}, Case{1, 6, 2, 4, 2, false, Q(1, 64), Q(1, 2), 64}}) {
    SCOPED_TRACE(testing::Message() << "B=" << c.B << " T=" << c.T << " H=" << c.H << " K=" << c.K << " V=" << c.V
                                    << " h0=" << c.with_h0 << " lambda=" << c.lambda.str());
    const auto q = quarters({c.B, c.T, c.H, c.K}, c.seed);
    const auto k = quarters({c.B, c.T, c.H, c.K}, c.seed + 100);
    const auto v = quarters({c.B, c.T, c.H, c.V}, c.seed + 200);
    const auto h0 = quarters({c.B, c.H, c.K, c.V}, c.seed + 300);
    const Tensor<Q>* h0p = c.with_h0 ? &h0 : nullptr;
    Tensor<Q> o, ht, o_want, ht_want;
    ttr::pdn_exact_sequential<Q>(q, k, v, h0p, c.lambda, c.scale, o, ht);
    ridge_form(q, k, v, h0p, c.lambda, c.scale, o_want, ht_want);
    expect_exact(o, o_want, "o");
    expect_exact(ht, ht_want, "ht");
  }
}

// A zero key gives p = 0, denom = 1, k̃ = 0: S and P are unchanged exactly, so the
// run with the zero-key tokens removed gives the same final state, and each
// zero-key token reads out the state it found. Exact in rationals and in fp64.
TEST(PdnExact, ZeroKeyLeavesStateUnchanged) {
  const std::int64_t T = 5, K = 3, V = 2;
  auto q = quarters({1, T, 1, K}, 71), k = quarters({1, T, 1, K}, 72), v = quarters({1, T, 1, V}, 73);
  for (std::int64_t i = 0; i < K; ++i) k.data[1 * K + i] = k.data[3 * K + i] = 0;  // tokens 1 and 3
  Tensor<Q> o, ht;
  ttr::pdn_exact_sequential<Q>(q, k, v, nullptr, Q(1, 2), Q(1), o, ht);
  auto pick = [](const Tensor<Q>& x, std::vector<std::int64_t> ts) {
    const std::int64_t F = x.dim(3);
    Tensor<Q> y({1, static_cast<std::int64_t>(ts.size()), 1, F}, Q(0));
    for (std::size_t n = 0; n < ts.size(); ++n)
      for (std::int64_t f = 0; f < F; ++f) y.data[n * F + f] = x.data[ts[n] * F + f];
    return y;
  };
  const std::vector<std::int64_t> kept = {0, 2, 4};
  Tensor<Q> o_kept, ht_kept;
  ttr::pdn_exact_sequential<Q>(pick(q, kept), pick(k, kept), pick(v, kept), nullptr, Q(1, 2), Q(1), o_kept, ht_kept);
  expect_exact(ht, ht_kept, "ht");
  for (std::int64_t j = 0; j < V; ++j) {
    EXPECT_EQ(o.data[0 * V + j], o_kept.data[0 * V + j]);
    EXPECT_EQ(o.data[2 * V + j], o_kept.data[1 * V + j]);
    EXPECT_EQ(o.data[4 * V + j], o_kept.data[2 * V + j]);
  }
  // Token 1 reads the state left by token 0: o_1 = S_0ᵀ q_1 with S_0 from the one-token run.
  Tensor<Q> o1, S_after0;
  ttr::pdn_exact_sequential<Q>(pick(q, {0}), pick(k, {0}), pick(v, {0}), nullptr, Q(1, 2), Q(1), o1, S_after0);
  for (std::int64_t j = 0; j < V; ++j) {
    Q want = 0;
    for (std::int64_t i = 0; i < K; ++i) want += S_after0.data[i * V + j] * q.data[1 * K + i];
    EXPECT_EQ(o.data[1 * V + j], want);
  }

  // fp64 through the registry: same structure, bit-exact.
  auto to_d = [](const Tensor<Q>& x) {
    Tensor<double> y(x.shape, 0.0);
    for (std::size_t e = 0; e < x.data.size(); ++e) y.data[e] = ttr::to_double(x.data[e]);
    return y;
  };
  const auto& layer = ttr::find_layer("pdn_exact");
  const auto cfg = ttr::Config::make(layer.spec, {{"lambda", "0.5"}, {"scale", "1"}});
  const auto full = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0},
                                   {{"q", to_d(q)}, {"k", to_d(k)}, {"v", to_d(v)}}, cfg);
  const auto part = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0},
                                   {{"q", to_d(pick(q, kept))}, {"k", to_d(pick(k, kept))}, {"v", to_d(pick(v, kept))}},
                                   cfg);
  EXPECT_EQ(full.values.at("ht").data, part.values.at("ht").data);
}

}  // namespace
