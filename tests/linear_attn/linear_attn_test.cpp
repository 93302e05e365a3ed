// linear_attn, sequential form (reference/linear_attn/sequential.hpp; oracle
// adapter oracles/layers/linear_attn.hpp), against independent expectations:
//  * a hand-derived two-token case;
//  * exact rational arithmetic (GMP mpq) compared with the parallel / attention
//    form o_t = scale · (h0ᵀ q_t + Σ_{s≤t} (q_t·k_s) v_s), written here from scratch;
//  * the registry's fp64 and MPFR tiers on dyadic inputs where no rounding occurs.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "reference/linear_attn/sequential.hpp"
#include "tests/support/rational.hpp"

namespace {

using Q = ttr::test::rational;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;

// Deterministic "simple rationals": multiples of 1/4 in [-1, 1].
struct QuarterGen {
  std::uint64_t s;
  Q next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return Q(static_cast<int>((s >> 33) % 9) - 4, 4);
  }
};
Tensor<Q> quarters(Shape shape, std::uint64_t seed) {
  Tensor<Q> x(shape, Q(0));
  QuarterGen g{seed};
  for (auto& e : x.data) e = g.next();
  return x;
}
Tensor<Q> from_values(Shape shape, std::vector<Q> values) {
  Tensor<Q> x(shape, Q(0));
  EXPECT_EQ(static_cast<std::size_t>(x.numel()), values.size());
  x.data = std::move(values);
  return x;
}

std::size_t i4(const Shape& s, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  return static_cast<std::size_t>(((a * s[1] + b) * s[2] + c) * s[3] + d);
}

// The attention (parallel) form, independent of the recurrence:
//   o[b,t,h,:] = scale · ( Σ_i q_{t,i} h0_{i,:} + Σ_{s≤t} (Σ_i q_{t,i} k_{s,i}) v_s )
//   ht[b,h]    = h0 + Σ_s k_s v_sᵀ
void attention_form(const Tensor<Q>& q, const Tensor<Q>& k, const Tensor<Q>& v, const Tensor<Q>* h0,
                    const Q& scale, Tensor<Q>& o, Tensor<Q>& ht) {
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  o = Tensor<Q>({B, T, H, V}, Q(0));
  ht = Tensor<Q>({B, H, K, V}, Q(0));
  const Shape st{B, H, K, V};
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t j = 0; j < V; ++j) {
          Q acc = 0;
          if (h0)
            for (std::int64_t i = 0; i < K; ++i) acc += q.data[i4(q.shape, b, t, h, i)] * h0->data[i4(st, b, h, i, j)];
          for (std::int64_t s = 0; s <= t; ++s) {
            Q score = 0;
            for (std::int64_t i = 0; i < K; ++i) score += q.data[i4(q.shape, b, t, h, i)] * k.data[i4(k.shape, b, s, h, i)];
            acc += score * v.data[i4(v.shape, b, s, h, j)];
          }
          o.data[i4(o.shape, b, t, h, j)] = scale * acc;
        }
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t j = 0; j < V; ++j) {
          Q acc = h0 ? h0->data[i4(st, b, h, i, j)] : Q(0);
          for (std::int64_t s = 0; s < T; ++s) acc += k.data[i4(k.shape, b, s, h, i)] * v.data[i4(v.shape, b, s, h, j)];
          ht.data[i4(st, b, h, i, j)] = acc;
        }
    }
}

void expect_exact(const Tensor<Q>& got, const Tensor<Q>& want, const char* what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  for (std::size_t e = 0; e < want.data.size(); ++e)
    EXPECT_EQ(got.data[e], want.data[e]) << what << " element " << e << ": got " << got.data[e].str() << ", want "
                                         << want.data[e].str();
}

TensorMap<double> to_double_map(const TensorMap<Q>& in) {
  TensorMap<double> out;
  for (const auto& [name, x] : in) {
    auto& y = out[name];
    y.shape = x.shape;
    for (const auto& e : x.data) y.data.push_back(ttr::to_double(e));
  }
  return out;
}

// Hand derivation (K=2, V=1, T=2, B=H=1, scale=1/2, no h0):
//   t=1: q=(1,0) k=(1,2) v=3:  S1 = k vᵀ = (3, 6)ᵀ;          o1 = ½(1·3 + 0·6) = 3/2
//   t=2: q=(1,1) k=(−1,1) v=2: S2 = S1 + (−2, 2)ᵀ = (1, 8)ᵀ;  o2 = ½(1 + 8)     = 9/2
TEST(LinearAttn, HandDerivedTwoTokens) {
  const auto q = from_values({1, 2, 1, 2}, {1, 0, 1, 1});
  const auto k = from_values({1, 2, 1, 2}, {1, 2, -1, 1});
  const auto v = from_values({1, 2, 1, 1}, {3, 2});
  Tensor<Q> o, ht;
  ttr::linear_attn_sequential<Q>(q, k, v, nullptr, Q(1, 2), o, ht);
  expect_exact(o, from_values({1, 2, 1, 1}, {Q(3, 2), Q(9, 2)}), "o");
  expect_exact(ht, from_values({1, 1, 2, 1}, {1, 8}), "ht");
}

struct Case {
  std::int64_t B, T, H, K, V;
  bool with_h0;
  Q scale;
  std::uint64_t seed;
};

TEST(LinearAttn, ExactRationalMatchesAttentionForm) {
  for (const Case& c : {Case{2, 5, 2, 3, 2, true, Q(1, 2), 11}, Case{1, 6, 2, 4, 3, false, Q(3, 4), 12},
                        Case{3, 3, 1, 2, 2, true, Q(1), 13}}) {
    SCOPED_TRACE(testing::Message() << "B=" << c.B << " T=" << c.T << " H=" << c.H << " K=" << c.K << " V=" << c.V
                                    << " h0=" << c.with_h0);
    const auto q = quarters({c.B, c.T, c.H, c.K}, c.seed);
    const auto k = quarters({c.B, c.T, c.H, c.K}, c.seed + 100);
    const auto v = quarters({c.B, c.T, c.H, c.V}, c.seed + 200);
    const auto h0 = quarters({c.B, c.H, c.K, c.V}, c.seed + 300);
    const Tensor<Q>* h0p = c.with_h0 ? &h0 : nullptr;
    Tensor<Q> o, ht, o_want, ht_want;
    ttr::linear_attn_sequential<Q>(q, k, v, h0p, c.scale, o, ht);
    attention_form(q, k, v, h0p, c.scale, o_want, ht_want);
    expect_exact(o, o_want, "o");
    expect_exact(ht, ht_want, "ht");
  }
}

// Through the registry (tensor names, config, tier conversion): with inputs in
// multiples of 1/4 and scale 1/2, every product and partial sum is a dyadic
// rational of a few bits (|values| < 2^5, denominators ≤ 2^7), so neither fp64
// nor MPFR rounds anything: both tiers must reproduce the exact rational result.
TEST(LinearAttn, Fp64AndMpfrTiersAreExactOnDyadicInputs) {
  const std::int64_t B = 2, T = 5, H = 2, K = 4, V = 3;
  TensorMap<Q> in;
  in["q"] = quarters({B, T, H, K}, 21);
  in["k"] = quarters({B, T, H, K}, 22);
  in["v"] = quarters({B, T, H, V}, 23);
  in["h0"] = quarters({B, H, K, V}, 24);
  Tensor<Q> o_want, ht_want;
  attention_form(in["q"], in["k"], in["v"], &in["h0"], Q(1, 2), o_want, ht_want);
  const auto& layer = ttr::find_layer("linear_attn");
  // K = 4: the default scale K^-1/2 is exactly 1/2 as well.
  for (const auto& sets : {std::vector<std::pair<std::string, std::string>>{{"scale", "0.5"}},
                           std::vector<std::pair<std::string, std::string>>{}}) {
    const auto cfg = ttr::Config::make(layer.spec, sets);
    for (const ttr::Arith a : {ttr::Arith{ttr::Tier::fp64, 0}, ttr::Arith{ttr::Tier::mpfr, 256}}) {
      SCOPED_TRACE(testing::Message() << ttr::arith_name(a) << " explicit scale=" << !sets.empty());
      const auto r = ttr::run_layer(layer, ttr::Form::sequential, a, to_double_map(in), cfg);
      ASSERT_EQ(r.values.at("o").shape, o_want.shape);
      ASSERT_EQ(r.values.at("ht").shape, ht_want.shape);
      for (std::size_t e = 0; e < o_want.data.size(); ++e)
        EXPECT_EQ(r.values.at("o").data[e], ttr::to_double(o_want.data[e])) << "o element " << e;
      for (std::size_t e = 0; e < ht_want.data.size(); ++e)
        EXPECT_EQ(r.values.at("ht").data[e], ttr::to_double(ht_want.data[e])) << "ht element " << e;
    }
  }
}

}  // namespace
