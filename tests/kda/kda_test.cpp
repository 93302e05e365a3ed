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

using namespace ttr::test;
using Layer = TwinLayer<ttr::layers::kda, "kda", Gate::per_key>;
INSTANTIATE_TYPED_TEST_SUITE_P(Kda, GatedDeltaTwin, ::testing::Types<Layer>);

}  // namespace
