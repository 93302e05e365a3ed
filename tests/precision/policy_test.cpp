// The arithmetic policies of the chunk and scan forms really round, and round the
// way they say (reference/core/policy.hpp, docs/arithmetic-policies.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "oracles/registry.hpp"
#include "reference/core/policy.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::test {
namespace {

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The bit-trick bf16 rounding equals the format's generic RNE (an independent
// implementation through frexp/nearbyint) on edge cases and on 2^20 float bit
// patterns spread over the whole encoding space, NaN and inf included.
TEST(Policy, Bf16BitRoundingEqualsGenericRne) {
  const float edge[] = {0.0f, -0.0f, 1.0f, 1.00390625f /* tie, even below */, 1.01171875f /* tie, odd below */,
                        std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                        std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                        from_bits(0x7F7F8000u) /* halfway to inf: rounds to inf */, from_bits(0x7F7F7FFFu),
                        std::numeric_limits<float>::infinity()};
  for (float x : edge) EXPECT_EQ(round_float_to_bf16(x), static_cast<float>(BF16Format::round(x))) << x;
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < (1 << 20); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float x = from_bits(static_cast<std::uint32_t>(state >> 32));
    const float got = round_float_to_bf16(x), want = static_cast<float>(BF16Format::round(x));
    if (std::isnan(x)) EXPECT_TRUE(std::isnan(got));
    else ASSERT_EQ(got, want) << "bits " << std::hex << (state >> 32);
  }
}

// TF32 rounding (tf32_operand's, reference/core/policy.hpp) against an independent RNE
// through frexp/nearbyint in double — 11 significant bits for normal values, a spacing of
// 2^-136 below 2^-126 (TF32 has fp32's exponent range and 10 explicit bits) — on 2^20
// float bit patterns spread over the encoding space, and hand-derived ties.
TEST(Policy, Tf32BitRoundingEqualsGenericRne) {
  const auto want = [](float x) -> double {  // double: a value past fp32's range stays a number
    if (!std::isfinite(x) || x == 0.0f) return x;
    int e;
    const double m = std::frexp(static_cast<double>(x), &e);  // |m| in [0.5, 1)
    const int keep = std::fabs(x) < std::numeric_limits<float>::min() ? e + 136 : 11;
    return std::ldexp(std::nearbyint(std::ldexp(m, keep)), e - keep);
  };
  EXPECT_EQ(round_float_to_tf32(1.0f + 0x1p-11f), 1.0f);                         // tie, even below
  EXPECT_EQ(round_float_to_tf32(1.0f + 0x1p-10f + 0x1p-11f), 1.0f + 0x1p-9f);    // tie, odd below
  EXPECT_EQ(round_float_to_tf32(1.0f + 0x1p-11f + 0x1p-23f), 1.0f + 0x1p-10f);   // just above the tie
  EXPECT_EQ(round_float_to_tf32(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
  std::uint64_t state = 0xD1B54A32D192ED03ull;
  for (int i = 0; i < (1 << 20); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float x = from_bits(static_cast<std::uint32_t>(state >> 32));
    const float got = round_float_to_tf32(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    const double w = want(x);
    if (std::fabs(w) <= std::numeric_limits<float>::max())
      ASSERT_EQ(static_cast<double>(got), w) << "bits " << std::hex << (state >> 32);
    else
      ASSERT_EQ(got, std::copysign(std::numeric_limits<float>::infinity(), x)) << "bits " << std::hex << (state >> 32);
  }
}

TEST(Policy, TiersMapToPolicies) {
  EXPECT_TRUE((std::is_same_v<policy_for_t<bfloat16>, Mixed16Policy<BF16Format>>));
  EXPECT_TRUE((std::is_same_v<policy_for_t<float16>, Mixed16Policy<FP16Format>>));
  EXPECT_TRUE((std::is_same_v<policy_for_t<float>, ExactPolicy<float>>));
  EXPECT_TRUE((std::is_same_v<policy_for_t<mpfr_real>, ExactPolicy<mpfr_real>>));
  EXPECT_EQ(Mixed16Policy<FP16Format>::narrow(1.0f + 1.0f / 4096), 1.0f);  // below half an fp16 ulp (2^-11)
  EXPECT_EQ(Mixed16Policy<FP16Format>::narrow(70000.0f), std::numeric_limits<float>::infinity());
}

// max_e |got − want| / max_e |want| against the MPFR-256 sequential oracle.
double normwise_error(const Tensor<double>& got, const Tensor<mp>& want) {
  double num = 0, den = 0;
  for (std::size_t e = 0; e < want.data.size(); ++e) {
    const double w = ttr::to_double(want.data[e]);
    num = std::max(num, std::fabs(got.data[e] - w));
    den = std::max(den, std::fabs(w));
  }
  return num / den;
}

// Every chunk/scan form in fp32 and bf16 policy on the demo case (T = 128,
// K = V = 16, normalised keys), chunk size 16:
//  - both really round: the error is at least u/16 (a form silently computing in
//    a wider type would land far below its own unit roundoff);
//  - both stay within the a-priori bound n·u of the inner products they
//    accumulate, n = K + C + T/C terms on the longest dependency chain (the
//    standard γ_n bound, with these O(1)-conditioned inputs; the full error model
//    with measured scales is the gate's, docs/error-model.md);
//  - bf16's error is more than 16× fp32's (u differs by 2^16) and the outputs differ.
TEST(Policy, Bf16AndFp32PoliciesReallyRound) {
  const double u32 = std::ldexp(1.0, -24), u16 = std::ldexp(1.0, -8);
  for (const auto& [layer, form] : mpfr_parallel_forms()) {
    SCOPED_TRACE(layer + " " + form);
    const CaseInputs c = case_inputs(layer, "demo", "realistic_small");
    const TensorMap<mp> oracle = mpfr_sequential(layer, c.tensors, c.config, 256);
    const LayerEntry& entry = find_layer(layer);
    const int C = 16;
    const Form f = parse_form(form);
    const auto fp32 = run_layer(entry, f, {Tier::fp32, 0}, c.tensors, c.config, C).values.at("o");
    const auto bf16 = run_layer(entry, f, {Tier::bf16, 0}, c.tensors, c.config, C).values.at("o");
    const double e32 = normwise_error(fp32, oracle.at("o")), e16 = normwise_error(bf16, oracle.at("o"));
    const double n = 16 + C + 128.0 / C;
    EXPECT_GE(e32, u32 / 16);
    EXPECT_LE(e32, n * u32);
    EXPECT_GE(e16, u16 / 16);
    EXPECT_LE(e16, n * u16);
    EXPECT_GT(e16, 16 * e32);
    EXPECT_NE(fp32.data, bf16.data);
    std::printf("%-26s %-5s  fp32 %.2e (%.1f u)   bf16 %.2e (%.1f u)\n", layer.c_str(), form.c_str(), e32, e32 / u32,
                e16, e16 / u16);
  }
}

}  // namespace
}  // namespace ttr::test
