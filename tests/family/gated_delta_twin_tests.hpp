// The tests gated_delta_rule (Gated DeltaNet) and kda (Kimi Delta Attention)
// share: KDA is GDN with one decay per key channel, so every test body is the
// same with the gate's shape as the one parameter. A typed-parameterized suite,
// instantiated in tests/gated_delta_rule/ and tests/kda/ with a TwinLayer
// (tests/family/twin_layer.hpp).
//
// The sequential form (the reference code, through the layer's oracle adapter;
// each layer's test file names its files) runs against an independent formulation at MPFR 512 bits: the
// transition-matrix form
//   S_t = (I − β_t k_t k_tᵀ) Diag(γ_t) S_{t-1} + β_t k_t v_tᵀ,   γ_t = e^{g_t}
//   (a scalar per head for GDN; per key channel, i.e. per row of the K×V state,
//   for KDA),  o_t = S_tᵀ (scale q_t),
// built from explicit K×K matrices and matrix products (the code under test decays
// and updates the state in place and never forms a matrix), with its own L2
// normalisation x/sqrt(‖x‖² + 1e-6) and its own default scale K^-1/2.
//
// Tolerance. The oracle runs at 256 bits (unit roundoff 2^-256 ≈ 8.6e-78), the
// expectation at 512 bits. Each output is a sum of O(T·K) terms of moderate size
// (keys ≲ 1, β‖k‖² ≤ 2 keeps every transition a contraction, decays ≤ 1), so both
// are accurate to ~1e-75 relative to max|output|; 1e-70 leaves a margin of 10^5
// while any real defect (a wrong decay, order, or index) gives errors ≳ 1e-17.
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

// q, k, v, g, beta (β‖k‖² ≤ 2 when keys are unnormalised: |k_i| ≤ 0.8, K ≤ 4, β ≤ 0.75),
// g in [−1, 0]; token 1 has γ = 1 exactly (on every channel), token 3 has γ ≈ 1e-30
// (per key: on channel 0, and γ = 1 on channel 1, a mixed, very anisotropic decay).
template <class Layer>
TensorMap<double> gated_delta_inputs(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K,
                                     std::int64_t V, bool with_h0, std::uint64_t seed) {
  return gated_inputs(B, T, H, K, V, seed,
                      {.k_lo = -0.8, .k_hi = 0.8, .per_key_gate = Layer::kPerKeyGate, .with_h0 = with_h0});
}

template <class Layer>
class GatedDeltaTwin : public ::testing::Test {};
TYPED_TEST_SUITE_P(GatedDeltaTwin);

TYPED_TEST_P(GatedDeltaTwin, MpfrMatchesTransitionMatrixFormWithH0AndExplicitScale) {
  PrecisionGuard guard;
  const auto in = gated_delta_inputs<TypeParam>(2, 6, 2, 3, 2, true, 101);
  const auto got = twin_oracle<TypeParam>(in, {{"scale", "0.375"}});
  const auto want = transition_form(in, {.scale = 0.375});
  expect_close(got, want, 1e-70);
}

TYPED_TEST_P(GatedDeltaTwin, MpfrMatchesTransitionMatrixFormWithL2NormAndDefaultScale) {
  PrecisionGuard guard;
  // K = 3: the default scale 3^-1/2 is irrational, computed by each side on its own.
  const auto in = gated_delta_inputs<TypeParam>(1, 5, 3, 3, 3, false, 202);
  const auto got = twin_oracle<TypeParam>(in, {{"use_qk_l2norm_in_kernel", "true"}});
  const auto want = transition_form(in, {.l2norm = true});
  expect_close(got, want, 1e-70);
  // Unnormalised keys give a different function: the flag is honoured.
  const auto plain = twin_oracle<TypeParam>(in, {});
  EXPECT_GT(rel_err(plain.at("o"), want.at("o")), 1e-3);
}

TYPED_TEST_P(GatedDeltaTwin, MpfrMatchesTransitionMatrixFormK4V3WithH0AndL2Norm) {
  PrecisionGuard guard;
  const auto in = gated_delta_inputs<TypeParam>(2, 6, 1, 4, 3, true, 303);
  const auto got = twin_oracle<TypeParam>(in, {{"use_qk_l2norm_in_kernel", "true"}, {"scale", "1"}});
  const auto want = transition_form(in, {.scale = 1.0, .l2norm = true});
  expect_close(got, want, 1e-70);
}

// The registry's MPFR runner rounds the 256-bit oracle to double. The exact value
// rounds to the same double unless it lies within ~2^-250 (relative) of a
// rounding boundary, which generic data does not: expect bit equality with the
// 512-bit expectation rounded to double.
TYPED_TEST_P(GatedDeltaTwin, RegistryMpfrRunnerRoundsTheOracleCorrectly) {
  PrecisionGuard guard;
  const auto in = gated_delta_inputs<TypeParam>(2, 5, 2, 3, 2, true, 404);
  const auto& layer = ttr::find_layer(TypeParam::kName);
  const auto r = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::mpfr, 256}, in,
                                ttr::Config::make(layer.spec, {{"scale", "0.5"}}));
  const auto want = transition_form(in, {.scale = 0.5});
  expect_rounds_to(r.values, want);
}

// β = 0 and g = 0 (γ = 1 exactly, on every channel): S̄ = 1·S = S and δ = 0
// exactly, so ht == h0 bit for bit in fp64 and MPFR.
TYPED_TEST_P(GatedDeltaTwin, ZeroBetaUnitDecayLeavesStateUnchanged) {
  auto in = gated_delta_inputs<TypeParam>(2, 4, 2, 3, 2, true, 505);
  for (auto& e : in["beta"].data) e = 0.0;
  for (auto& e : in["g"].data) e = 0.0;
  expect_state_unchanged(TypeParam::kName, in);
}

// Decay γ ≈ 1e-30 (on every channel) at every token: in fp64 the decayed state
// (|S̄| ≲ 1e-29) is far below half an ulp of v_j (|v_j| ≥ 0.25) and of the write
// k_i δ_j (≥ 1/64 here), so v − S̄ᵀk rounds to v and S̄ + k δᵀ rounds to k δᵀ: the
// state forgets exactly and each o_t equals the output of a run on token t alone
// (which starts from S = 0).
TYPED_TEST_P(GatedDeltaTwin, TinyDecayForgetsExactlyInFp64) {
  const std::int64_t B = 1, T = 5, H = 2, K = 3, V = 2;
  TensorMap<double> in;
  in["q"] = uniform({B, T, H, K}, 606, -1, 1);
  in["k"] = uniform({B, T, H, K}, 607, 0.25, 0.5);
  in["v"] = uniform({B, T, H, V}, 608, 0.25, 1);
  in["beta"] = uniform({B, T, H}, 609, 0.25, 0.75);
  in["g"] = TypeParam::kPerKeyGate ? Tensor<double>({B, T, H, K}, std::log(1e-30))
                                   : Tensor<double>({B, T, H}, std::log(1e-30));
  in["h0"] = uniform({B, H, K, V}, 610, -1, 1);
  expect_forgets_each_token(TypeParam::kName, in, {"q", "k", "v", "beta", "g"}, T, H, V);
}

REGISTER_TYPED_TEST_SUITE_P(GatedDeltaTwin, MpfrMatchesTransitionMatrixFormWithH0AndExplicitScale,
                            MpfrMatchesTransitionMatrixFormWithL2NormAndDefaultScale,
                            MpfrMatchesTransitionMatrixFormK4V3WithH0AndL2Norm,
                            RegistryMpfrRunnerRoundsTheOracleCorrectly, ZeroBetaUnitDecayLeavesStateUnchanged,
                            TinyDecayForgetsExactlyInFp64);

}  // namespace ttr::test
