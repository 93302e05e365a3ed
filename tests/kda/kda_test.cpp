// kda (Kimi Delta Attention), sequential form (reference/kda/sequential.hpp through
// the oracle adapter oracles/layers/kda.hpp): the tests it shares with
// gated_delta_rule (tests/family/gated_delta_twin_tests.hpp: the transition-matrix
// form at MPFR 512 bits, registry rounding, zero step, tiny decay), instantiated
// with one decay γ_{t,i} = e^{g_{t,i}} per key channel, i.e. per row of the K×V
// state (g is [B,T,H,K]).
#include <gtest/gtest.h>

#include "oracles/layers/kda.hpp"
#include "tests/family/gated_delta_twin_tests.hpp"

namespace {

struct KdaLayer {
  using Adapter = ttr::layers::kda;
  static constexpr const char* kName = "kda";
  static constexpr bool kPerKeyGate = true;
};

using namespace ttr::test;  // the suite and its registration live there
INSTANTIATE_TYPED_TEST_SUITE_P(Kda, GatedDeltaTwin, ::testing::Types<KdaLayer>);

}  // namespace
