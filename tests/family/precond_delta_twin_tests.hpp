// The tests precond_gated_delta_rule (PGDN) and precond_kda (PKDA) share: PKDA
// is PGDN with one decay per key channel, so every test body is the same with the
// gate's shape as the one parameter. A typed-parameterized suite, instantiated in
// tests/precond_gated_delta_rule/ and tests/precond_kda/ with a TwinLayer
// (tests/family/twin_layer.hpp).
//
// The sequential form (the reference code with reference/family/atk.hpp, through
// the layer's oracle adapter; each layer's test file names its files) runs against
// an independent formulation at MPFR 512 bits (tests/support/independent_forms.hpp):
//   preconditioner (own implementation of the ATK formula, FLA semantics as in the
//   spec notes; A is updated before it is used at token t):
//     A_t = e^{g_atk,t} A_{t-1} + β_atk,t k_t²,  r = log(A_t + eps) − c_h,
//     s = r/(1 + |r|),  B_t = x^{−s}  (computed with pow, where the code uses
//     exp(−log(x)·s)),  k̃_t = B_t ⊙ k_t;
//   state, transition-matrix form with explicit K×K matrices:
//     S_t = (I − β_t k̃_t k_tᵀ) Diag(γ_t) S_{t-1} + β_t k̃_t v_tᵀ,  o_t = S_tᵀ(scale q_t),
//   γ_t = e^{g_t} a scalar per head (PGDN) or in R^K decaying the K rows of the
//   state (PKDA's per-key decay),
// with q, k normalised as x/sqrt(‖x‖² + 1e-6) when use_qk_l2norm_in_kernel (default
// true for these layers). final_A_state is checked too.
//
// Tolerance 1e-70 relative (normwise): the oracle at 256 bits and the expectation at
// 512 bits are each accurate to ~1e-75 on these inputs (B_t ∈ [1/x, x] with x ≤ 2
// and β ≤ 0.5 keep every transition well conditioned; log/exp/pow are correctly
// rounded in MPFR), leaving a 10^5 margin; a real defect gives ≳ 1e-17.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "tests/family/twin_layer.hpp"
#include "tests/support/independent_forms.hpp"
#include "tests/support/layer_checks.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"

namespace ttr::test {

// Both sides' o, ht and final_A_state within tol (normwise).
inline void expect_precond_close(const TensorMap<mp>& got, const TensorMap<mp>& want, double tol) {
  expect_close(got, want, tol, {"o", "ht", "final_A_state"});
}

// β ≤ 0.5 with |k| ≤ 0.6 (K ≤ 4) keeps β‖k̃‖‖k‖ ≤ 2·0.5·1.44 < 2 even with x = 2 and
// unnormalised keys; g, g_atk in [−1, 0]; token 1 has γ = 1 (on every channel), token
// 3 has γ ≈ 1e-30 (per key: on channel 0, and γ = 1 on channel 1).
template <class Layer>
TensorMap<double> precond_inputs(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V,
                                 std::uint64_t seed) {
  return gated_inputs(B, T, H, K, V, seed,
                      {.k_lo = -0.6, .k_hi = 0.6, .beta_hi = 0.5, .per_key_gate = Layer::kPerKeyGate, .atk = true});
}

template <class Layer>
class PrecondDeltaTwin : public ::testing::Test {};
TYPED_TEST_SUITE_P(PrecondDeltaTwin);

TYPED_TEST_P(PrecondDeltaTwin, MpfrMatchesIndependentFormWithDefaults) {
  PrecisionGuard guard;
  // l2norm on, x = 1.5, eps = 1e-6, centre −0.2 from config, A_0 = 0, h0 = 0, scale 3^-1/2.
  const auto in = precond_inputs<TypeParam>(2, 6, 2, 3, 2, 3101);
  expect_precond_close(twin_oracle<TypeParam>(in, {}), precond_transition_form(in), 1e-70);
}

TYPED_TEST_P(PrecondDeltaTwin, MpfrMatchesWithStatesCentreTensorAndExplicitConfig) {
  PrecisionGuard guard;
  auto in = precond_inputs<TypeParam>(2, 6, 3, 4, 3, 3102);
  in["h0"] = uniform({2, 3, 4, 3}, 3103, -1, 1);
  in["initial_A_state"] = uniform({2, 3, 4}, 3104, 0, 2);
  in["log_atk_scale"] = Tensor<double>({3}, 0.0);
  in["log_atk_scale"].data = {-1.0, 0.3, 2.5};
  const Sets sets = {{"use_qk_l2norm_in_kernel", "false"}, {"x", "2"}, {"eps", "0.001"}, {"scale", "0.5"},
                     {"log_atk_scale", "7"}};  // the tensor wins over the config key
  PrecondParams p;
  p.scale = 0.5;
  p.l2norm = false;
  p.x = 2;
  p.eps = 0.001;
  expect_precond_close(twin_oracle<TypeParam>(in, sets), precond_transition_form(in, p), 1e-70);
}

// The centre from the config key equals a tensor holding that value for every head
// (bit-identical: the same double reaches the same code), and a per-head tensor is
// honoured (a different function).
TYPED_TEST_P(PrecondDeltaTwin, CentreTensorAndConfigKeyAgree) {
  auto in = precond_inputs<TypeParam>(1, 5, 2, 3, 2, 3105);
  const auto& layer = ttr::find_layer(TypeParam::kName);
  const auto cfg = ttr::Config::make(layer.spec, {{"log_atk_scale", "0.4"}});
  const auto by_key = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0}, in, cfg);
  in["log_atk_scale"] = Tensor<double>({2}, 0.4);
  const auto by_tensor = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0}, in, cfg);
  for (const char* name : {"o", "ht", "final_A_state"})
    EXPECT_EQ(by_key.values.at(name).data, by_tensor.values.at(name).data) << name;
  in["log_atk_scale"].data = {0.4, -3.0};
  const auto per_head = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0}, in, cfg);
  EXPECT_NE(by_key.values.at("ht").data, per_head.values.at("ht").data);
}

TYPED_TEST_P(PrecondDeltaTwin, RegistryMpfrRunnerRoundsTheOracleCorrectly) {
  PrecisionGuard guard;
  auto in = precond_inputs<TypeParam>(2, 5, 2, 3, 2, 3106);
  in["initial_A_state"] = uniform({2, 2, 3}, 3107, 0, 1);
  const auto& layer = ttr::find_layer(TypeParam::kName);
  const auto r = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::mpfr, 256}, in,
                                ttr::Config::make(layer.spec, {}));
  const auto want = precond_transition_form(in);
  expect_rounds_to(r.values, want, {"o", "ht", "final_A_state"});
}

// β = 0 and g = 0: the state is untouched bit for bit (δ = 0, γ = 1) while the
// preconditioner state A still evolves (it does not depend on β): A_T matches the
// independent ATK recursion.
TYPED_TEST_P(PrecondDeltaTwin, ZeroBetaUnitDecayLeavesStateButNotPreconditioner) {
  PrecisionGuard guard;
  auto in = precond_inputs<TypeParam>(2, 4, 2, 3, 2, 3108);
  for (auto& e : in["beta"].data) e = 0.0;
  for (auto& e : in["g"].data) e = 0.0;
  in["h0"] = uniform({2, 2, 3, 2}, 3109, -1, 1);
  expect_state_unchanged(TypeParam::kName, in);
  const auto got = twin_oracle<TypeParam>(in, {});
  const auto want = precond_transition_form(in);
  EXPECT_LT(rel_err(got.at("final_A_state"), want.at("final_A_state")), 1e-70);
  mp amax = 0;
  for (const mp& a : want.at("final_A_state").data) amax = std::max(amax, mp(abs(a)));
  EXPECT_GT(amax, 0.01);
}

REGISTER_TYPED_TEST_SUITE_P(PrecondDeltaTwin, MpfrMatchesIndependentFormWithDefaults,
                            MpfrMatchesWithStatesCentreTensorAndExplicitConfig, CentreTensorAndConfigKeyAgree,
                            RegistryMpfrRunnerRoundsTheOracleCorrectly,
                            ZeroBetaUnitDecayLeavesStateButNotPreconditioner);

}  // namespace ttr::test
