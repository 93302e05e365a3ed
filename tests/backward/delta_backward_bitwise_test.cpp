// The delta core's adjoint (reference/family/delta_backward.hpp) fuses its work
// with the checkpoint re-stepping: dq from the forward sweep, δ_t stored, re-steps
// without read-back or readout, S̄_t kept instead of recomputed. It must compute the
// same gradients bit for bit as the layout it replaced, which kept every state by
// stepping the forward's own delta_sequence and recomputed S̄_t, u_t, δ_t and S_t in
// the adjoint (tests/support/delta_backward_every_state.hpp): checked in float64,
// float32 and MPFR-256, for no, scalar and per-key decay, a write key w ≠ k (the
// preconditioned layers) and w = k, with and without h0 and dht, on lengths 1, 5, 7
// and 17 and every checkpoint spacing C ∈ {1, 2, 3, ⌈√T⌉, T, T + 3}. Bit for bit means
// the same IEEE bits (signed zeros included) and, in MPFR, the same value and sign.
//
// The MPFR case runs on a private type, mpfr256 (tests/support/mpfr256.hpp: MPFR
// at a fixed 256 bits, no scalar_ops specialisation: generic primitives, each
// product and sum rounded to 256 bits), not on ttr::mpfr_real. It was written when
// mpfr_real's fused primitives were overloads found only after multiprecision.hpp
// (one binary could hold two instantiations of the core); they are now a scalar_ops
// specialisation that every caller sees (tests/precision/scalar_ops_order_test.cpp),
// and the private type stays as a second, unfused MPFR arithmetic.
#include <gtest/gtest.h>

#include <string>

#include "reference/family/delta_backward.hpp"
#include "tests/support/delta_backward_every_state.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mpfr256.hpp"

namespace {

using ttr::Tensor;
using ttr::test::uniform_as;

template <class S>
void one_case(ttr::Decay decay, std::int64_t T, bool preconditioned, bool states, std::uint64_t seed) {
  constexpr std::int64_t B = 2, H = 2, K = 3, V = 4;
  const Tensor<S> q = uniform_as<S>({B, T, H, K}, seed, -1, 1), k = uniform_as<S>({B, T, H, K}, seed + 1, -1, 1),
                  w = preconditioned ? uniform_as<S>({B, T, H, K}, seed + 2, -1, 1) : k,
                  v = uniform_as<S>({B, T, H, V}, seed + 3, -1, 1), beta = uniform_as<S>({B, T, H}, seed + 4, 0, 1),
                  g = decay == ttr::Decay::per_key ? uniform_as<S>({B, T, H, K}, seed + 5, -0.5, 0)
                                                   : uniform_as<S>({B, T, H}, seed + 5, -0.5, 0),
                  h0 = uniform_as<S>({B, H, K, V}, seed + 6, -1, 1), dout = uniform_as<S>({B, T, H, V}, seed + 7, -1, 1),
                  dht = uniform_as<S>({B, H, K, V}, seed + 8, -1, 1);
  const Tensor<S>* gp = decay == ttr::Decay::none ? nullptr : &g;
  const Tensor<S>* h0p = states ? &h0 : nullptr;
  const Tensor<S>* dhtp = states ? &dht : nullptr;
  const S scale = ttr::from_double<S>(0.375);
  ttr::DeltaGrads<S> want;
  ttr::test::delta_backward_every_state<S>(decay, q, k, w, v, beta, gp, h0p, scale, dout, dhtp, want);
  std::int64_t sqrt_t = 1;
  while (sqrt_t * sqrt_t < T) ++sqrt_t;
  for (const std::int64_t C : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{0}, T, T + 3}) {
    SCOPED_TRACE("T = " + std::to_string(T) + ", C = " + std::to_string(C == 0 ? sqrt_t : C) +
                 ", decay " + std::to_string(static_cast<int>(decay)) + (preconditioned ? ", w != k" : "") +
                 (states ? ", h0 and dht" : ""));
    ttr::DeltaGrads<S> got;
    ttr::delta_backward<S>(decay, q, k, w, v, beta, gp, h0p, scale, dout, dhtp, got, C);
    EXPECT_TRUE(ttr::test::same_bits(got.dq, want.dq)) << "dq";
    EXPECT_TRUE(ttr::test::same_bits(got.dk, want.dk)) << "dk";
    EXPECT_TRUE(ttr::test::same_bits(got.dw, want.dw)) << "dw";
    EXPECT_TRUE(ttr::test::same_bits(got.dv, want.dv)) << "dv";
    EXPECT_TRUE(ttr::test::same_bits(got.dbeta, want.dbeta)) << "dbeta";
    EXPECT_TRUE(ttr::test::same_bits(got.dg, want.dg)) << "dg";
    EXPECT_TRUE(ttr::test::same_bits(got.dh0, want.dh0)) << "dh0";
  }
}

template <class S>
void all_cases() {
  std::uint64_t seed = 900;
  for (const auto decay : {ttr::Decay::none, ttr::Decay::scalar, ttr::Decay::per_key})
    for (const std::int64_t T : {1, 5, 7, 17})
      for (const bool pre : {false, true}) {
        one_case<S>(decay, T, pre, true, seed += 10);
        one_case<S>(decay, T, pre, false, seed += 10);
      }
}

TEST(DeltaBackwardBitwise, Float64EqualsTheEveryStateLayout) { all_cases<double>(); }
TEST(DeltaBackwardBitwise, Float32EqualsTheEveryStateLayout) { all_cases<float>(); }
TEST(DeltaBackwardBitwise, Mpfr256EqualsTheEveryStateLayout) { all_cases<mpfr256>(); }

}  // namespace
