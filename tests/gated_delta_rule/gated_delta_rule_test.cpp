// gated_delta_rule (Gated DeltaNet), sequential form (reference/gated_delta_rule/
// sequential.hpp through the oracle adapter oracles/layers/gated_delta_rule.hpp):
// the tests it shares with its per-key twin kda (tests/family/gated_delta_twin_tests.hpp:
// the transition-matrix form at MPFR 512 bits, registry rounding, zero step, tiny
// decay), instantiated with one decay γ_t = e^{g_t} per head (g is [B,T,H]).
#include <gtest/gtest.h>

#include "oracles/layers/gated_delta_rule.hpp"
#include "tests/family/gated_delta_twin_tests.hpp"

namespace {

using namespace ttr::test;
using Layer = TwinLayer<ttr::layers::gated_delta_rule, "gated_delta_rule", Gate::per_head>;
INSTANTIATE_TYPED_TEST_SUITE_P(GatedDeltaRule, GatedDeltaTwin, ::testing::Types<Layer>);

}  // namespace
