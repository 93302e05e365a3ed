// gla, sequential form (reference/gla/sequential.hpp through the oracle adapter
// oracles/layers/gla.hpp): the tests it shares with simple_gla
// (tests/family/gated_linear_twin_tests.hpp: the attention form at MPFR 512 bits,
// registry rounding, unit decay as linear_attn, tiny decay), instantiated with one
// decay γ_{t,i} = e^{g_{t,i}} per key channel (g is [B,T,H,K]); and the reduction
// to simple_gla when that gate is constant across channels.
#include <gtest/gtest.h>

#include <cstdint>

#include "oracles/layers/gla.hpp"
#include "tests/family/gated_linear_twin_tests.hpp"

namespace {

using namespace ttr::test;
using ttr::TensorMap;
using Layer = TwinLayer<ttr::layers::gla, "gla", Gate::per_key>;
INSTANTIATE_TYPED_TEST_SUITE_P(Gla, GatedLinearTwin, ::testing::Types<Layer>);

// A per-channel gate that is constant across channels (g_{t,i} = g_t) is simple_gla:
// gla computes d_i = exp(g_{t,i}) per channel, simple_gla exp(g_t) once; exp is
// deterministic (correctly rounded in MPFR), so the factors are identical and
// everything else is the same code in the same order: bit-identical outputs.
TEST(Gla, ChannelConstantGateEqualsSimpleGlaBitForBit) {
  const std::int64_t B = 2, T = 5, H = 2, K = 3, V = 2;
  auto in = gated_linear_inputs<Layer>(B, T, H, K, V, true, 1606);
  TensorMap<double> scalar_in = in;
  scalar_in["g"] = uniform({B, T, H}, 1607, -2, 0);
  in["g"] = repeat_over_keys(scalar_in["g"], K);
  expect_same_outputs("gla", in, "simple_gla", scalar_in);
}

}  // namespace
