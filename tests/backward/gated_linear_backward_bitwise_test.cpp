// The gated linear core's adjoint (reference/family/gated_linear_backward.hpp) keeps
// S_{t-1} only for one segment of C tokens at a time, re-stepping each earlier
// segment from its checkpoint; at C ≥ T its forward sweep keeps every state and
// nothing is re-stepped, the layout it had before checkpointing. Every spacing must
// give the same gradients bit for bit: checked in float64, float32 and MPFR-256, for
// no, scalar and per-key decay (linear_attn, simple_gla, gla), with and without h0
// and dht, on lengths 1, 5, 7 and 17 and C ∈ {1, 2, 3, ⌈√T⌉} against C = T and T + 3.
// A re-step that started a token late, skipped the decay or kept S_t for S_{t-1}
// would change the gradients of every token before the last segment. (The gradients
// themselves are checked against reverse mode and finite differences by
// gated_linear_backward_test.)
#include <gtest/gtest.h>

#include <string>

#include "reference/family/gated_linear_backward.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mpfr256.hpp"

namespace {

using ttr::Tensor;
using ttr::test::uniform_as;

template <class S>
void one_case(ttr::Decay decay, std::int64_t T, bool states, std::uint64_t seed) {
  constexpr std::int64_t B = 2, H = 2, K = 3, V = 4;
  const Tensor<S> q = uniform_as<S>({B, T, H, K}, seed, -1, 1), k = uniform_as<S>({B, T, H, K}, seed + 1, -1, 1),
                  v = uniform_as<S>({B, T, H, V}, seed + 2, -1, 1),
                  g = decay == ttr::Decay::per_key ? uniform_as<S>({B, T, H, K}, seed + 3, -0.5, 0)
                                                   : uniform_as<S>({B, T, H}, seed + 3, -0.5, 0),
                  h0 = uniform_as<S>({B, H, K, V}, seed + 4, -1, 1), dout = uniform_as<S>({B, T, H, V}, seed + 5, -1, 1),
                  dht = uniform_as<S>({B, H, K, V}, seed + 6, -1, 1);
  const Tensor<S>* gp = decay == ttr::Decay::none ? nullptr : &g;
  const Tensor<S>* h0p = states ? &h0 : nullptr;
  const Tensor<S>* dhtp = states ? &dht : nullptr;
  const S scale = ttr::from_double<S>(0.375);
  Tensor<S> wq, wk, wv, wg, wh0;  // every state kept: one segment
  ttr::gated_linear_backward<S>(decay, q, k, v, gp, h0p, scale, dout, dhtp, wq, wk, wv, wg, wh0, T);
  std::int64_t sqrt_t = 1;
  while (sqrt_t * sqrt_t < T) ++sqrt_t;
  for (const std::int64_t C : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{0}, T + 3}) {
    SCOPED_TRACE("T = " + std::to_string(T) + ", C = " + std::to_string(C == 0 ? sqrt_t : C) + ", decay " +
                 std::to_string(static_cast<int>(decay)) + (states ? ", h0 and dht" : ""));
    Tensor<S> dq, dk, dv, dg, dh0;
    ttr::gated_linear_backward<S>(decay, q, k, v, gp, h0p, scale, dout, dhtp, dq, dk, dv, dg, dh0, C);
    EXPECT_TRUE(ttr::test::same_bits(dq, wq)) << "dq";
    EXPECT_TRUE(ttr::test::same_bits(dk, wk)) << "dk";
    EXPECT_TRUE(ttr::test::same_bits(dv, wv)) << "dv";
    EXPECT_TRUE(ttr::test::same_bits(dg, wg)) << "dg";
    EXPECT_TRUE(ttr::test::same_bits(dh0, wh0)) << "dh0";
  }
}

template <class S>
void all_cases() {
  std::uint64_t seed = 1900;
  for (const auto decay : {ttr::Decay::none, ttr::Decay::scalar, ttr::Decay::per_key})
    for (const std::int64_t T : {1, 5, 7, 17}) {
      one_case<S>(decay, T, true, seed += 10);
      one_case<S>(decay, T, false, seed += 10);
    }
}

TEST(GatedLinearBackwardBitwise, Float64EverySpacingEqualsEveryStateKept) { all_cases<double>(); }
TEST(GatedLinearBackwardBitwise, Float32EverySpacingEqualsEveryStateKept) { all_cases<float>(); }
TEST(GatedLinearBackwardBitwise, Mpfr256EverySpacingEqualsEveryStateKept) { all_cases<mpfr256>(); }

}  // namespace
