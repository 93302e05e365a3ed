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
#include "tests/support/independent_forms.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/rational.hpp"

namespace {

using namespace ttr::test;
using Q = ttr::test::rational;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;

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
    linear_attention_form(q, k, v, h0p, c.scale, o_want, ht_want);
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
  linear_attention_form(in["q"], in["k"], in["v"], &in["h0"], Q(1, 2), o_want, ht_want);
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
