// precond_gated_delta_rule (PGDN), sequential form (reference/precond_gated_delta_rule/
// sequential.hpp and reference/family/atk.hpp, through the oracle adapter
// oracles/layers/precond_gated_delta_rule.hpp): the tests it shares with its per-key
// twin precond_kda (tests/family/precond_delta_twin_tests.hpp: the ATK preconditioner
// and transition-matrix form at MPFR 512 bits, the centre tensor and config key,
// registry rounding, zero step), instantiated with one decay γ_t = e^{g_t} per head
// (g is [B,T,H]).
#include <gtest/gtest.h>

#include "oracles/layers/precond_gated_delta_rule.hpp"
#include "tests/family/precond_delta_twin_tests.hpp"

namespace {

using namespace ttr::test;
using Layer = TwinLayer<ttr::layers::precond_gated_delta_rule, "precond_gated_delta_rule", Gate::per_head>;
INSTANTIATE_TYPED_TEST_SUITE_P(PrecondGatedDeltaRule, PrecondDeltaTwin, ::testing::Types<Layer>);

}  // namespace
