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

struct PrecondGatedDeltaRuleLayer {
  using Adapter = ttr::layers::precond_gated_delta_rule;
  static constexpr const char* kName = "precond_gated_delta_rule";
  static constexpr bool kPerKeyGate = false;
};

using namespace ttr::test;  // the suite and its registration live there
INSTANTIATE_TYPED_TEST_SUITE_P(PrecondGatedDeltaRule, PrecondDeltaTwin, ::testing::Types<PrecondGatedDeltaRuleLayer>);

}  // namespace
