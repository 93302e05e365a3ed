// The Sherman–Morrison adjoint (reference/family/sherman_morrison_backward.hpp:
// pdn_exact, and kalman_filter with weights η) keeps (Φ_{t-1}, S_{t-1}) only for one
// segment of C tokens at a time, re-stepping each earlier segment from its checkpoint;
// at C ≥ T its forward sweep keeps every state and nothing is re-stepped, the layout
// it had before checkpointing. Every spacing must give the same gradients bit for
// bit: checked in float64, float32 and MPFR-256, without and with η, with and without
// h0 and dht, on lengths 1, 5, 7 and 17 and C ∈ {1, 2, 3, ⌈√T⌉} against C = T and
// T + 3. A re-step that started a token late or restored Φ or S from the wrong slot
// would change the gradients of every token before the last segment. (The gradients
// themselves are checked against reverse mode and finite differences by
// sherman_morrison_backward_test.)
#include <gtest/gtest.h>

#include <string>

#include "reference/family/sherman_morrison_backward.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mpfr256.hpp"

namespace {

using ttr::Tensor;
using ttr::test::uniform_as;

template <class S>
void one_case(bool weights, std::int64_t T, bool states, std::uint64_t seed) {
  constexpr std::int64_t B = 2, H = 2, K = 3, V = 4;
  const Tensor<S> q = uniform_as<S>({B, T, H, K}, seed, -1, 1), k = uniform_as<S>({B, T, H, K}, seed + 1, -1, 1),
                  v = uniform_as<S>({B, T, H, V}, seed + 2, -1, 1), eta = uniform_as<S>({B, T, H}, seed + 3, 0.5, 2),
                  h0 = uniform_as<S>({B, H, K, V}, seed + 4, -1, 1), dout = uniform_as<S>({B, T, H, V}, seed + 5, -1, 1),
                  dht = uniform_as<S>({B, H, K, V}, seed + 6, -1, 1);
  const Tensor<S>* etap = weights ? &eta : nullptr;
  const Tensor<S>* h0p = states ? &h0 : nullptr;
  const Tensor<S>* dhtp = states ? &dht : nullptr;
  const S lambda = ttr::from_double<S>(1.5), scale = ttr::from_double<S>(0.375);
  Tensor<S> wq, wk, wv, weta, wh0;  // every state kept: one segment
  ttr::sherman_morrison_backward<S>(q, k, v, etap, h0p, lambda, scale, dout, dhtp, wq, wk, wv, weta, wh0, T);
  std::int64_t sqrt_t = 1;
  while (sqrt_t * sqrt_t < T) ++sqrt_t;
  for (const std::int64_t C : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{0}, T + 3}) {
    SCOPED_TRACE("T = " + std::to_string(T) + ", C = " + std::to_string(C == 0 ? sqrt_t : C) +
                 (weights ? ", eta" : "") + (states ? ", h0 and dht" : ""));
    Tensor<S> dq, dk, dv, deta, dh0;
    ttr::sherman_morrison_backward<S>(q, k, v, etap, h0p, lambda, scale, dout, dhtp, dq, dk, dv, deta, dh0, C);
    EXPECT_TRUE(ttr::test::same_bits(dq, wq)) << "dq";
    EXPECT_TRUE(ttr::test::same_bits(dk, wk)) << "dk";
    EXPECT_TRUE(ttr::test::same_bits(dv, wv)) << "dv";
    EXPECT_TRUE(ttr::test::same_bits(deta, weta)) << "deta";
    EXPECT_TRUE(ttr::test::same_bits(dh0, wh0)) << "dh0";
  }
}

template <class S>
void all_cases() {
  std::uint64_t seed = 2900;
  for (const bool weights : {false, true})
    for (const std::int64_t T : {1, 5, 7, 17}) {
      one_case<S>(weights, T, true, seed += 10);
      one_case<S>(weights, T, false, seed += 10);
    }
}

TEST(ShermanMorrisonBackwardBitwise, Float64EverySpacingEqualsEveryStateKept) { all_cases<double>(); }
TEST(ShermanMorrisonBackwardBitwise, Float32EverySpacingEqualsEveryStateKept) { all_cases<float>(); }
TEST(ShermanMorrisonBackwardBitwise, Mpfr256EverySpacingEqualsEveryStateKept) { all_cases<mpfr256>(); }

}  // namespace
