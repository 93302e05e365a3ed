// simple_gla, sequential form (reference/simple_gla/sequential.hpp through the
// oracle adapter oracles/layers/simple_gla.hpp), against an independent
// formulation at MPFR 512 bits: the attention form with cumulative decays
//   o_t = scale · Σ_i q_{t,i} [ e^{G_t} h0_{i,:} + Σ_{s≤t} e^{G_t − G_s} k_{s,i} v_s ],
//   G_t = Σ_{r≤t} g_r   (0-based tokens; token t decays the state before writing),
//   ht  = e^{G_{T-1}} h0 + Σ_s e^{G_{T-1} − G_s} k_s v_sᵀ,
// which sums the decay in log space once per (s, t) pair instead of multiplying
// the state by e^{g_t} token by token as the recurrence does.
//
// Tolerance: the oracle at 256 bits (2^-256 ≈ 8.6e-78) and the expectation at 512
// bits both sum O(T²K) positive-weighted terms of moderate size with decays ≤ 1,
// so each is accurate to ~1e-75 relative to max|output|; 1e-70 leaves a margin of
// 10^5, while a wrong decay index or order shows up at ≳ 1e-17.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/layers/simple_gla.hpp"
#include "oracles/registry.hpp"
#include "tests/support/independent_forms.hpp"
#include "tests/support/layer_checks.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using namespace ttr::test;
using ttr::Tensor;
using ttr::TensorMap;

TensorMap<mp> oracle(const TensorMap<double>& in, const Sets& sets) {
  return oracle256<ttr::layers::simple_gla>("simple_gla", in, sets);
}

// g in [−1, 0]; token 1 has γ = 1 exactly, token 3 has γ ≈ 1e-30.
TensorMap<double> make_inputs(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V,
                              bool with_h0, std::uint64_t seed) {
  return gated_inputs(B, T, H, K, V, seed, {.beta = false, .with_h0 = with_h0});
}

TEST(SimpleGla, MpfrMatchesAttentionFormWithH0AndExplicitScale) {
  PrecisionGuard guard;
  const auto in = make_inputs(2, 6, 2, 3, 2, true, 1101);
  expect_close(oracle(in, {{"scale", "0.625"}}), attention_form(in, 0.625), 1e-70);
}

TEST(SimpleGla, MpfrMatchesAttentionFormWithDefaultScale) {
  PrecisionGuard guard;
  const auto in = make_inputs(1, 5, 3, 3, 3, false, 1202);  // K = 3: scale 3^-1/2 on each side
  expect_close(oracle(in, {}), attention_form(in, -1), 1e-70);
}

// See gated_delta_rule_test.cpp: the 256-bit oracle rounded to double equals the
// 512-bit expectation rounded to double, barring a value within 2^-250 of a tie.
TEST(SimpleGla, RegistryMpfrRunnerRoundsTheOracleCorrectly) {
  PrecisionGuard guard;
  const auto in = make_inputs(2, 5, 2, 4, 2, true, 1303);
  const auto& layer = ttr::find_layer("simple_gla");
  const auto r = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::mpfr, 256}, in,
                                ttr::Config::make(layer.spec, {}));
  const auto want = attention_form(in, -1);
  expect_rounds_to(r.values, want);
}

// Decay exactly 1 (g = 0): scale_by(S, 1) is exact, every other operation is the one
// linear_attn performs in the same order, so the outputs are bit-identical in fp64
// and in MPFR.
TEST(SimpleGla, UnitDecayEqualsLinearAttnBitForBit) {
  auto in = make_inputs(2, 5, 2, 3, 2, true, 1404);
  for (auto& e : in["g"].data) e = 0.0;
  TensorMap<double> la = in;
  la.erase("g");
  expect_same_outputs("simple_gla", in, "linear_attn", la);
}

// Decay γ ≈ 1e-30 at every token: in fp64 the decayed state (|S̄| ≲ 1e-29) is far
// below half an ulp of the write k_i v_j (≥ 1/16: k, v ∈ [0.25, 1]), so S_t = k_t v_tᵀ
// exactly and every o_t equals the output of a run on token t alone.
TEST(SimpleGla, TinyDecayForgetsExactlyInFp64) {
  const std::int64_t B = 1, T = 5, H = 2, K = 3, V = 2;
  TensorMap<double> in;
  in["q"] = uniform({B, T, H, K}, 1505, -1, 1);
  in["k"] = uniform({B, T, H, K}, 1506, 0.25, 1);
  in["v"] = uniform({B, T, H, V}, 1507, 0.25, 1);
  in["g"] = Tensor<double>({B, T, H}, std::log(1e-30));
  in["h0"] = uniform({B, H, K, V}, 1508, -1, 1);
  expect_forgets_each_token("simple_gla", in, {"q", "k", "v", "g"}, T, H, V);
}

}  // namespace
