// precond_kda (PKDA), sequential form (reference/precond_gated_delta_rule/sequential.hpp with the
// per-key decay, reference/family/atk.hpp, through the oracle adapter oracles/layers/precond_kda.hpp),
// against an independent formulation at MPFR 512 bits:
//   preconditioner (own implementation of the ATK formula, FLA semantics as in
//   the spec notes in docs/layers.md; A is updated before it is used at token t):
//     A_t = e^{g_atk,t} A_{t-1} + β_atk,t k_t²,  r = log(A_t + eps) − c_h,
//     s = r/(1 + |r|),  B_t = x^{−s}  (computed with pow, where the code uses
//     exp(−log(x)·s)),  k̃_t = B_t ⊙ k_t;
//   state, transition-matrix form with explicit K×K matrices:
//     S_t = (I − β_t k̃_t k_tᵀ) Diag(γ_t) S_{t-1} + β_t k̃_t v_tᵀ,  o_t = S_tᵀ(scale q_t),
//   γ_t = e^{g_t} ∈ R^K decaying the K rows of the state (KDA's per-key decay),
// with q, k normalised as x/sqrt(‖x‖² + 1e-6) when use_qk_l2norm_in_kernel (default
// true for this layer). final_A_state is checked too.
//
// Tolerance 1e-70 relative (normwise): the oracle at 256 bits and the expectation at
// 512 bits are each accurate to ~1e-75 on these inputs (B_t ∈ [1/x, x] with x ≤ 2
// and β ≤ 0.5 keep every transition well conditioned; log/exp/pow are correctly
// rounded in MPFR), leaving a 10^5 margin; a real defect gives ≳ 1e-17.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/layers/precond_kda.hpp"
#include "oracles/registry.hpp"
#include "tests/support/independent_forms.hpp"
#include "tests/support/layer_checks.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using namespace ttr::test;
using ttr::Tensor;
using ttr::TensorMap;
using R = mp;

constexpr const char* kLayer = "precond_kda";

TensorMap<mp> oracle(const TensorMap<double>& in, const Sets& sets) {
  return oracle256<ttr::layers::precond_kda>(kLayer, in, sets);
}

// The independent transition-matrix form with the write key from the own ATK
// preconditioner (tests/support/independent_forms.hpp), at 512 bits.
using Params = PrecondParams;
void expect_close(const TensorMap<mp>& got, const TensorMap<mp>& want, double tol) {
  ttr::test::expect_close(got, want, tol, {"o", "ht", "final_A_state"});
}

// β ≤ 0.5 with |k| ≤ 0.6 (K ≤ 4) keeps β‖k̃‖‖k‖ ≤ 2·0.5·1.44 < 2 even with x = 2 and
// unnormalised keys; g (per channel), g_atk in [−1, 0]; token 1 has γ = 1 on every channel,
// token 3 has γ ≈ 1e-30 on channel 0 and γ = 1 on channel 1.
TensorMap<double> make_inputs(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V,
                              std::uint64_t seed) {
  return gated_inputs(B, T, H, K, V, seed,
                      {.k_lo = -0.6, .k_hi = 0.6, .beta_hi = 0.5, .per_key_gate = true, .atk = true});
}

TEST(PrecondKda, MpfrMatchesIndependentFormWithDefaults) {
  PrecisionGuard guard;
  // l2norm on, x = 1.5, eps = 1e-6, centre −0.2 from config, A_0 = 0, h0 = 0, scale 3^-1/2.
  const auto in = make_inputs(2, 6, 2, 3, 2, 3101);
  expect_close(oracle(in, {}), precond_transition_form(in), 1e-70);
}

TEST(PrecondKda, MpfrMatchesWithStatesCentreTensorAndExplicitConfig) {
  PrecisionGuard guard;
  auto in = make_inputs(2, 6, 3, 4, 3, 3102);
  in["h0"] = uniform({2, 3, 4, 3}, 3103, -1, 1);
  in["initial_A_state"] = uniform({2, 3, 4}, 3104, 0, 2);
  in["log_atk_scale"] = Tensor<double>({3}, 0.0);
  in["log_atk_scale"].data = {-1.0, 0.3, 2.5};
  const Sets sets = {{"use_qk_l2norm_in_kernel", "false"}, {"x", "2"}, {"eps", "0.001"}, {"scale", "0.5"},
                     {"log_atk_scale", "7"}};  // the tensor wins over the config key
  Params p;
  p.scale = 0.5;
  p.l2norm = false;
  p.x = 2;
  p.eps = 0.001;
  expect_close(oracle(in, sets), precond_transition_form(in, p), 1e-70);
}

// The centre from the config key equals a tensor holding that value for every head
// (bit-identical: the same double reaches the same code), and a per-head tensor is
// honoured (a different function).
TEST(PrecondKda, CentreTensorAndConfigKeyAgree) {
  auto in = make_inputs(1, 5, 2, 3, 2, 3105);
  const auto& layer = ttr::find_layer(kLayer);
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

TEST(PrecondKda, RegistryMpfrRunnerRoundsTheOracleCorrectly) {
  PrecisionGuard guard;
  auto in = make_inputs(2, 5, 2, 3, 2, 3106);
  in["initial_A_state"] = uniform({2, 2, 3}, 3107, 0, 1);
  const auto& layer = ttr::find_layer(kLayer);
  const auto r = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::mpfr, 256}, in,
                                ttr::Config::make(layer.spec, {}));
  const auto want = precond_transition_form(in);
  expect_rounds_to(r.values, want, {"o", "ht", "final_A_state"});
}

// β = 0 and g = 0: the state is untouched bit for bit (δ = 0, γ = 1) while the
// preconditioner state A still evolves (it does not depend on β): A_T matches the
// independent ATK recursion.
TEST(PrecondKda, ZeroBetaUnitDecayLeavesStateButNotPreconditioner) {
  PrecisionGuard guard;
  auto in = make_inputs(2, 4, 2, 3, 2, 3108);
  for (auto& e : in["beta"].data) e = 0.0;
  for (auto& e : in["g"].data) e = 0.0;
  in["h0"] = uniform({2, 2, 3, 2}, 3109, -1, 1);
  expect_state_unchanged(kLayer, in);
  const auto got = oracle(in, {});
  const auto want = precond_transition_form(in);
  EXPECT_LT(rel_err(got.at("final_A_state"), want.at("final_A_state")), 1e-70);
  R amax = 0;
  for (const R& a : want.at("final_A_state").data) amax = std::max(amax, R(abs(a)));
  EXPECT_GT(amax, 0.01);
}

// A per-channel gate constant across channels is precond_gated_delta_rule: the
// decay factors exp(g_{t,i}) = exp(g_t) are the same numbers and everything else is
// the same code in the same order, so the outputs are bit-identical (fp64 and MPFR).
TEST(PrecondKda, ChannelConstantGateEqualsPrecondGatedDeltaRuleBitForBit) {
  const std::int64_t B = 2, T = 5, H = 2, K = 3, V = 2;
  auto in = make_inputs(B, T, H, K, V, 3110);
  in["h0"] = uniform({B, H, K, V}, 3111, -1, 1);
  TensorMap<double> scalar_in = in;
  scalar_in["g"] = uniform({B, T, H}, 3112, -2, 0);
  in["g"] = repeat_over_keys(scalar_in["g"], K);
  expect_same_outputs("precond_kda", in, "precond_gated_delta_rule", scalar_in, {"o", "ht", "final_A_state"});
}

}  // namespace
