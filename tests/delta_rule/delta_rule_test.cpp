// delta_rule (DeltaNet), sequential form (reference/delta_rule/sequential.hpp;
// adapter oracles/layers/delta_rule.hpp), against independent expectations:
//  * hand-derived cases;
//  * exact rational arithmetic (GMP mpq) compared with the transition-matrix form
//    S_t = (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ, built from explicit K×K
//    matrices and matrix products (the code under test never forms a matrix);
//  * properties that hold exactly: β = 0 leaves the state unchanged; β‖k‖² = 1
//    makes the state read v_t back along k_t.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "reference/delta_rule/sequential.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/rational.hpp"

namespace {

using namespace ttr::test;
using Q = ttr::test::rational;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;
using Mat = std::vector<std::vector<Q>>;  // row-major, exact

Mat zeros(std::size_t r, std::size_t c) { return Mat(r, std::vector<Q>(c, Q(0))); }
Mat eye(std::size_t n) {
  Mat m = zeros(n, n);
  for (std::size_t i = 0; i < n; ++i) m[i][i] = 1;
  return m;
}
Mat matmul(const Mat& a, const Mat& b) {
  Mat c = zeros(a.size(), b[0].size());
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b[0].size(); ++j)
      for (std::size_t l = 0; l < b.size(); ++l) c[i][j] += a[i][l] * b[l][j];
  return c;
}
Mat outer(const std::vector<Q>& a, const std::vector<Q>& b, const Q& f) {
  Mat m = zeros(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b.size(); ++j) m[i][j] = f * a[i] * b[j];
  return m;
}
Mat sub(const Mat& a, const Mat& b) {
  Mat c = a;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a[0].size(); ++j) c[i][j] -= b[i][j];
  return c;
}
Mat add(const Mat& a, const Mat& b) {
  Mat c = a;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a[0].size(); ++j) c[i][j] += b[i][j];
  return c;
}
std::vector<Q> row(const Tensor<Q>& x, std::int64_t b, std::int64_t t, std::int64_t h) {
  std::vector<Q> r;
  for (std::int64_t f = 0; f < x.dim(3); ++f) r.push_back(x.data[i4(x.shape, b, t, h, f)]);
  return r;
}

// Transition-matrix form, one (b, h) at a time:
//   S_t = M_t S_{t-1} + β_t k_t v_tᵀ,  M_t = I − β_t k_t k_tᵀ;   o_t = S_tᵀ (scale q_t)
void transition_form(const Tensor<Q>& q, const Tensor<Q>& k, const Tensor<Q>& v, const Tensor<Q>& beta,
                     const Tensor<Q>* h0, const Q& scale, Tensor<Q>& o, Tensor<Q>& ht) {
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  o = Tensor<Q>({B, T, H, V}, Q(0));
  ht = Tensor<Q>({B, H, K, V}, Q(0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      Mat S = zeros(K, V);
      if (h0)
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) S[i][j] = h0->data[i4(ht.shape, b, h, i, j)];
      for (std::int64_t t = 0; t < T; ++t) {
        const Q bt = beta.data[i3(beta.shape, b, t, h)];
        const auto kt = row(k, b, t, h), vt = row(v, b, t, h), qt = row(q, b, t, h);
        const Mat M = sub(eye(K), outer(kt, kt, bt));
        S = add(matmul(M, S), outer(kt, vt, bt));
        Mat qcol = zeros(K, 1);
        for (std::int64_t i = 0; i < K; ++i) qcol[i][0] = scale * qt[i];
        Mat St = zeros(V, K);
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) St[j][i] = S[i][j];
        const Mat ot = matmul(St, qcol);
        for (std::int64_t j = 0; j < V; ++j) o.data[i4(o.shape, b, t, h, j)] = ot[j][0];
      }
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t j = 0; j < V; ++j) ht.data[i4(ht.shape, b, h, i, j)] = S[i][j];
    }
}

// Hand derivation (K=2, V=1, T=2, B=H=1, scale=1, S_0 = 0):
//   t=1: k=(1,0) v=2 β=1/2 q=(1,1):  u = S_0ᵀk = 0, δ = ½(2−0) = 1,
//        S_1 = k δ = (1, 0)ᵀ,                     o_1 = 1·1 + 1·0 = 1
//   t=2: k=(1,1) v=3 β=1/4 q=(2,−1): u = S_1ᵀk = 1, δ = ¼(3−1) = ½,
//        S_2 = S_1 + ½ k = (3/2, 1/2)ᵀ,           o_2 = 2·3/2 − 1·1/2 = 5/2
TEST(DeltaRule, HandDerivedTwoTokens) {
  const auto q = from_values({1, 2, 1, 2}, {1, 1, 2, -1});
  const auto k = from_values({1, 2, 1, 2}, {1, 0, 1, 1});
  const auto v = from_values({1, 2, 1, 1}, {2, 3});
  const auto beta = from_values({1, 2, 1}, {Q(1, 2), Q(1, 4)});
  Tensor<Q> o, ht;
  ttr::delta_rule_sequential<Q>(q, k, v, beta, nullptr, Q(1), o, ht);
  expect_exact(o, from_values({1, 2, 1, 1}, {1, Q(5, 2)}), "o");
  expect_exact(ht, from_values({1, 1, 2, 1}, {Q(3, 2), Q(1, 2)}), "ht");
}

// Hand derivation with h0 (K=V=1, T=1, scale=1): S_0 = 2, k = 1/2, v = 3, β = 1, q = 1:
//   u = ½·2 = 1, δ = 1·(3 − 1) = 2, S_1 = 2 + ½·2 = 3, o_1 = 3.
// The same from the B=2 batch's second entry, which has h0 = −1, k = 2, v = 1, β = 1/4, q = 1/2:
//   u = 2·(−1) = −2, δ = ¼(1 + 2) = 3/4, S_1 = −1 + 2·3/4 = 1/2, o_1 = ½·½ = 1/4.
TEST(DeltaRule, HandDerivedWithInitialState) {
  const auto q = from_values({2, 1, 1, 1}, {1, Q(1, 2)});
  const auto k = from_values({2, 1, 1, 1}, {Q(1, 2), 2});
  const auto v = from_values({2, 1, 1, 1}, {3, 1});
  const auto beta = from_values({2, 1, 1}, {1, Q(1, 4)});
  const auto h0 = from_values({2, 1, 1, 1}, {2, -1});
  Tensor<Q> o, ht;
  ttr::delta_rule_sequential<Q>(q, k, v, beta, &h0, Q(1), o, ht);
  expect_exact(o, from_values({2, 1, 1, 1}, {3, Q(1, 4)}), "o");
  expect_exact(ht, from_values({2, 1, 1, 1}, {3, Q(1, 2)}), "ht");
}

struct Case {
  std::int64_t B, T, H, K, V;
  bool with_h0;
  Q scale;
  std::uint64_t seed;
};

TEST(DeltaRule, ExactRationalMatchesTransitionMatrixForm) {
  for (const Case& c : {Case{2, 5, 2, 3, 2, true, Q(1, 2), 31}, Case{1, 6, 2, 4, 3, false, Q(3, 4), 32},
                        Case{3, 4, 1, 2, 2, true, Q(1), 33}, Case{1, 3, 3, 4, 2, true, Q(1, 4), 34}}) {
    SCOPED_TRACE(testing::Message() << "B=" << c.B << " T=" << c.T << " H=" << c.H << " K=" << c.K << " V=" << c.V
                                    << " h0=" << c.with_h0);
    const auto q = quarters({c.B, c.T, c.H, c.K}, c.seed);
    const auto k = quarters({c.B, c.T, c.H, c.K}, c.seed + 100);
    const auto v = quarters({c.B, c.T, c.H, c.V}, c.seed + 200);
    const auto beta = quarters({c.B, c.T, c.H}, c.seed + 300, 1, 4);  // β ∈ {1/4, 1/2, 3/4, 1}
    const auto h0 = quarters({c.B, c.H, c.K, c.V}, c.seed + 400);
    const Tensor<Q>* h0p = c.with_h0 ? &h0 : nullptr;
    Tensor<Q> o, ht, o_want, ht_want;
    ttr::delta_rule_sequential<Q>(q, k, v, beta, h0p, c.scale, o, ht);
    transition_form(q, k, v, beta, h0p, c.scale, o_want, ht_want);
    expect_exact(o, o_want, "o");
    expect_exact(ht, ht_want, "ht");
  }
}

// With β_t‖k_t‖² = 1 the write is the exact projection: S_tᵀ k_t = v_t, whatever
// S_{t-1} was (from S_t = S_{t-1} + k (v − S_{t-1}ᵀk)ᵀ/‖k‖²: S_tᵀk = S_{t-1}ᵀk + (v − S_{t-1}ᵀk)).
// Unit rational keys (3/5, 4/5, 0) etc., β = 1; checked on every prefix by rerunning.
TEST(DeltaRule, UnitStepReadsValueBackExactly) {
  const std::vector<std::vector<Q>> keys = {{Q(3, 5), Q(4, 5), 0}, {0, Q(-5, 13), Q(12, 13)},
                                            {Q(2, 3), Q(-1, 3), Q(2, 3)}, {Q(-4, 5), 0, Q(3, 5)}};
  const std::int64_t T = 4, K = 3, V = 2;
  Tensor<Q> k({1, T, 1, K}, Q(0)), beta({1, T, 1}, Q(1));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < K; ++i) k.data[t * K + i] = keys[t][i];
  const auto q = quarters({1, T, 1, K}, 41), v = quarters({1, T, 1, V}, 42), h0 = quarters({1, 1, K, V}, 43);
  for (std::int64_t len = 1; len <= T; ++len) {
    auto prefix = [&](const Tensor<Q>& x) {
      Tensor<Q> y = x;
      y.shape[1] = len;
      y.data.resize(static_cast<std::size_t>(y.numel()));
      return y;
    };
    Tensor<Q> o, ht;
    ttr::delta_rule_sequential<Q>(prefix(q), prefix(k), prefix(v), prefix(beta), &h0, Q(1), o, ht);
    for (std::int64_t j = 0; j < V; ++j) {
      Q read = 0;
      for (std::int64_t i = 0; i < K; ++i) read += ht.data[i * V + j] * keys[len - 1][i];
      EXPECT_EQ(read, v.data[(len - 1) * V + j]) << "prefix " << len << " column " << j;
    }
  }
}

// β = 0: δ_t = 0·(v − Sᵀk) = 0 exactly, so S_t = S_{t-1} in any arithmetic and
// o_t = h0ᵀ(scale q_t). Exact in rationals, and bit-exact for ht in fp64 and MPFR.
TEST(DeltaRule, ZeroBetaLeavesStateUnchanged) {
  const std::int64_t B = 2, T = 4, H = 2, K = 3, V = 2;
  const auto q = quarters({B, T, H, K}, 51), k = quarters({B, T, H, K}, 52), v = quarters({B, T, H, V}, 53);
  const auto h0 = quarters({B, H, K, V}, 54);
  const Tensor<Q> beta({B, T, H}, Q(0));
  Tensor<Q> o, ht;
  ttr::delta_rule_sequential<Q>(q, k, v, beta, &h0, Q(1, 2), o, ht);
  expect_exact(ht, h0, "ht");
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t j = 0; j < V; ++j) {
          Q want = 0;
          for (std::int64_t i = 0; i < K; ++i)
            want += h0.data[i4(h0.shape, b, h, i, j)] * q.data[i4(q.shape, b, t, h, i)] / 2;
          EXPECT_EQ(o.data[i4(o.shape, b, t, h, j)], want);
        }

  TensorMap<double> in;
  auto to_d = [](const Tensor<Q>& x) {
    Tensor<double> y(x.shape, 0.0);
    for (std::size_t e = 0; e < x.data.size(); ++e) y.data[e] = ttr::to_double(x.data[e]);
    return y;
  };
  in["q"] = to_d(q);
  in["k"] = to_d(k);
  in["v"] = to_d(v);
  in["h0"] = to_d(h0);
  in["beta"] = to_d(beta);
  const auto& layer = ttr::find_layer("delta_rule");
  for (const ttr::Arith a : {ttr::Arith{ttr::Tier::fp64, 0}, ttr::Arith{ttr::Tier::mpfr, 256}}) {
    const auto r = ttr::run_layer(layer, ttr::Form::sequential, a, in, ttr::Config::make(layer.spec, {}));
    EXPECT_EQ(r.values.at("ht").data, in["h0"].data) << ttr::arith_name(a);
  }
}

}  // namespace
