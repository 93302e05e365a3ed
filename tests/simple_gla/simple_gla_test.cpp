// simple_gla, sequential form (reference/simple_gla/sequential.hpp through the
// oracle adapter oracles/layers/simple_gla.hpp): the tests it shares with its
// per-key twin gla (tests/family/gated_linear_twin_tests.hpp: the attention form at
// MPFR 512 bits, registry rounding, unit decay as linear_attn, tiny decay),
// instantiated with one decay γ_t = e^{g_t} per head (g is [B,T,H]).
#include <gtest/gtest.h>

#include "oracles/layers/simple_gla.hpp"
#include "tests/family/gated_linear_twin_tests.hpp"

namespace {

using namespace ttr::test;
using Layer = TwinLayer<ttr::layers::simple_gla, "simple_gla", Gate::per_head>;
INSTANTIATE_TYPED_TEST_SUITE_P(SimpleGla, GatedLinearTwin, ::testing::Types<Layer>);

}  // namespace
