// MPFR 256 vs 512 bits on the stress case "long" (T = 4096, K = V = 16): every
// layer keeps >= 70 digits over a long recurrence (see mpfr_agreement_test.cpp
// for the method). About 25 s for all layers, hence the slow binary.
#include <gtest/gtest.h>

#include <string>

#include "tests/precision/agreement.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace {

using namespace ttr::test::precision;

class PrecisionMpfrLong : public ::testing::TestWithParam<std::string> {};

TEST_P(PrecisionMpfrLong, Agree256vs512) { check_case(GetParam(), "stress", "long", kTolerance); }

INSTANTIATE_TEST_SUITE_P(AllLayers, PrecisionMpfrLong, ::testing::ValuesIn(ttr::test::mpfr_layer_names()),
                         param_name);

}  // namespace
