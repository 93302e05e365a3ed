// simple_gla, sequential form (reference/simple_gla/sequential.hpp through the
// oracle adapter oracles/layers/simple_gla.hpp): the tests it shares with its
// per-key twin gla (tests/family/gated_linear_twin_tests.hpp: the attention form at
// MPFR 512 bits, registry rounding, unit decay as linear_attn, tiny decay),
// instantiated with one decay γ_t = e^{g_t} per head (g is [B,T,H]).
#include <gtest/gtest.h>

#include "oracles/layers/simple_gla.hpp"
#include "tests/family/gated_linear_twin_tests.hpp"

namespace {

struct SimpleGlaLayer {
  using Adapter = ttr::layers::simple_gla;
  static constexpr const char* kName = "simple_gla";
  static constexpr bool kPerKeyGate = false;
};

using namespace ttr::test;  // the suite and its registration live there
INSTANTIATE_TYPED_TEST_SUITE_P(SimpleGla, GatedLinearTwin, ::testing::Types<SimpleGlaLayer>);

}  // namespace
