// The tests simple_gla and gla share: gla is simple_gla with one decay per key
// channel, so every test body is the same with the gate's shape as the one
// parameter. A typed-parameterized suite, instantiated in tests/simple_gla/ and
// tests/gla/ with a TwinLayer (tests/family/twin_layer.hpp).
//
// The sequential form (the reference code, through the layer's oracle adapter;
// each layer's test file names its files) runs against an independent formulation at MPFR 512 bits: the
// attention form with cumulative decays
//   o_t = scale · Σ_i q_{t,i} [ e^{G_{t,i}} h0_{i,:} + Σ_{s≤t} e^{G_{t,i} − G_{s,i}} k_{s,i} v_s ],
//   G_{t,i} = Σ_{r≤t} g_{r,i}   (0-based tokens; token t decays row i of the K×V
//   state by e^{g_{t,i}} before writing; for simple_gla g_{r,i} = g_r on every row),
//   ht_{i,:} = e^{G_{T-1,i}} h0_{i,:} + Σ_s e^{G_{T-1,i} − G_{s,i}} k_{s,i} v_s,
// which sums the decay in log space once per (s, t) pair instead of multiplying
// the state by e^{g_t} token by token as the recurrence does.
//
// Tolerance: the oracle at 256 bits (2^-256 ≈ 8.6e-78) and the expectation at 512
// bits both sum O(T²K) positive-weighted terms of moderate size with decays ≤ 1,
// so each is accurate to ~1e-75 relative to max|output|; 1e-70 leaves a margin of
// 10^5, while a wrong decay index or order shows up at ≳ 1e-17.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "tests/family/twin_layer.hpp"
#include "tests/support/independent_forms.hpp"
#include "tests/support/layer_checks.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"

namespace ttr::test {

// g in [−1, 0]; token 1 has γ = 1 exactly (on every channel), token 3 has γ ≈ 1e-30
// (per key: on channel 0, and γ = 1 on channel 1).
template <class Layer>
TensorMap<double> gated_linear_inputs(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K,
                                      std::int64_t V, bool with_h0, std::uint64_t seed) {
  return gated_inputs(B, T, H, K, V, seed, {.beta = false, .per_key_gate = Layer::kPerKeyGate, .with_h0 = with_h0});
}

template <class Layer>
class GatedLinearTwin : public ::testing::Test {};
TYPED_TEST_SUITE_P(GatedLinearTwin);

TYPED_TEST_P(GatedLinearTwin, MpfrMatchesAttentionFormWithH0AndExplicitScale) {
  PrecisionGuard guard;
  const auto in = gated_linear_inputs<TypeParam>(2, 6, 2, 3, 2, true, 1101);
  expect_close(twin_oracle<TypeParam>(in, {{"scale", "0.625"}}), attention_form(in, 0.625), 1e-70);
}

TYPED_TEST_P(GatedLinearTwin, MpfrMatchesAttentionFormWithDefaultScale) {
  PrecisionGuard guard;
  const auto in = gated_linear_inputs<TypeParam>(1, 5, 3, 3, 3, false, 1202);  // K = 3: scale 3^-1/2 on each side
  expect_close(twin_oracle<TypeParam>(in, {}), attention_form(in, -1), 1e-70);
}

// As for the delta rules: the 256-bit oracle rounded to double equals the 512-bit
// expectation rounded to double, barring a value within 2^-250 of a tie.
TYPED_TEST_P(GatedLinearTwin, RegistryMpfrRunnerRoundsTheOracleCorrectly) {
  PrecisionGuard guard;
  const auto in = gated_linear_inputs<TypeParam>(2, 5, 2, 4, 2, true, 1303);
  const auto& layer = ttr::find_layer(TypeParam::kName);
  const auto r = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::mpfr, 256}, in,
                                ttr::Config::make(layer.spec, {}));
  const auto want = attention_form(in, -1);
  expect_rounds_to(r.values, want);
}

// Decay exactly 1 (g = 0, on every channel): scale_by(S, 1) is exact, every other
// operation is the one linear_attn performs in the same order, so the outputs are
// bit-identical in fp64 and in MPFR.
TYPED_TEST_P(GatedLinearTwin, UnitDecayEqualsLinearAttnBitForBit) {
  auto in = gated_linear_inputs<TypeParam>(2, 5, 2, 3, 2, true, 1404);
  for (auto& e : in["g"].data) e = 0.0;
  TensorMap<double> la = in;
  la.erase("g");
  expect_same_outputs(TypeParam::kName, in, "linear_attn", la);
}

// Decay γ ≈ 1e-30 (on every channel) at every token: in fp64 the decayed state
// (|S̄| ≲ 1e-29) is far below half an ulp of the write k_i v_j (≥ 1/16: k, v ∈
// [0.25, 1]), so S_t = k_t v_tᵀ exactly and every o_t equals the output of a run on
// token t alone.
TYPED_TEST_P(GatedLinearTwin, TinyDecayForgetsExactlyInFp64) {
  const std::int64_t B = 1, T = 5, H = 2, K = 3, V = 2;
  TensorMap<double> in;
  in["q"] = uniform({B, T, H, K}, 1505, -1, 1);
  in["k"] = uniform({B, T, H, K}, 1506, 0.25, 1);
  in["v"] = uniform({B, T, H, V}, 1507, 0.25, 1);
  in["g"] = TypeParam::kPerKeyGate ? Tensor<double>({B, T, H, K}, std::log(1e-30))
                                   : Tensor<double>({B, T, H}, std::log(1e-30));
  in["h0"] = uniform({B, H, K, V}, 1508, -1, 1);
  expect_forgets_each_token(TypeParam::kName, in, {"q", "k", "v", "g"}, T, H, V);
}

REGISTER_TYPED_TEST_SUITE_P(GatedLinearTwin, MpfrMatchesAttentionFormWithH0AndExplicitScale,
                            MpfrMatchesAttentionFormWithDefaultScale, RegistryMpfrRunnerRoundsTheOracleCorrectly,
                            UnitDecayEqualsLinearAttnBitForBit, TinyDecayForgetsExactlyInFp64);

}  // namespace ttr::test
