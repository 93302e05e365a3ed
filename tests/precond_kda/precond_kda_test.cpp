// precond_kda (PKDA), sequential form (reference/precond_gated_delta_rule/sequential.hpp with
// Decay::per_key and reference/family/atk.hpp, through the oracle adapter oracles/layers/precond_kda.hpp):
// the tests it shares with precond_gated_delta_rule
// (tests/family/precond_delta_twin_tests.hpp: the ATK preconditioner and
// transition-matrix form at MPFR 512 bits, the centre tensor and config key,
// registry rounding, zero step), instantiated with one decay γ_{t,i} = e^{g_{t,i}}
// per key channel decaying the K rows of the state (g is [B,T,H,K]); and the
// reduction to precond_gated_delta_rule when that gate is constant across channels.
#include <gtest/gtest.h>

#include <cstdint>

#include "oracles/layers/precond_kda.hpp"
#include "tests/family/precond_delta_twin_tests.hpp"

namespace {

using namespace ttr::test;
using ttr::TensorMap;
using Layer = TwinLayer<ttr::layers::precond_kda, "precond_kda", Gate::per_key>;
INSTANTIATE_TYPED_TEST_SUITE_P(PrecondKda, PrecondDeltaTwin, ::testing::Types<Layer>);

// A per-channel gate constant across channels is precond_gated_delta_rule: the
// decay factors exp(g_{t,i}) = exp(g_t) are the same numbers and everything else is
// the same code in the same order, so the outputs are bit-identical (fp64 and MPFR).
TEST(PrecondKda, ChannelConstantGateEqualsPrecondGatedDeltaRuleBitForBit) {
  const std::int64_t B = 2, T = 5, H = 2, K = 3, V = 2;
  auto in = precond_inputs<Layer>(B, T, H, K, V, 3110);
  in["h0"] = uniform({B, H, K, V}, 3111, -1, 1);
  TensorMap<double> scalar_in = in;
  scalar_in["g"] = uniform({B, T, H}, 3112, -2, 0);
  in["g"] = repeat_over_keys(scalar_in["g"], K);
  expect_same_outputs("precond_kda", in, "precond_gated_delta_rule", scalar_in, {"o", "ht", "final_A_state"});
}

}  // namespace
