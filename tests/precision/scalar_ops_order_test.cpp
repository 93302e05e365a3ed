// The MPFR tier's fused inner loop does not depend on include order (issue 16's
// finding): mul_add_to/scale_by dispatch through scalar_ops<T>, specialised next
// to mpfr_real in multiprecision.hpp, so a template defined *before* that header is
// included still gets mpfr_fma (one rounding) when instantiated for mpfr_real.
// Before the fix the free overloads were found only by templates parsed after them
// (ADL does not look in ttr for a Boost number): the callers below would take the
// generic two-rounding path, and one binary could hold both instantiations of a
// template (an ODR violation the linker resolves either way).
//
// This file deliberately includes scalar.hpp and defines its callers first, then
// multiprecision.hpp. The probe callers have internal linkage, so no other TU's
// instantiation can stand in for this one's.
#include "reference/core/scalar.hpp"

namespace {

// A caller parsed before mpfr_real's primitives exist (unqualified, as the
// recurrences in reference/ call them).
template <class T>
T fused_probe(const T& a0, const T& b0, const T& a1, const T& b1) {
  using ttr::mul_add_to;
  T s = ttr::from_double<T>(0.0);
  mul_add_to(s, a0, b0);
  mul_add_to(s, a1, b1);
  return s;
}

template <class T>
T scale_probe(T x, const T& d) {
  using ttr::scale_by;
  scale_by(x, d);
  return x;
}

}  // namespace

#include <gtest/gtest.h>

#include "reference/core/multiprecision.hpp"

namespace ttr::test {
namespace {

// At working precision P, a = 1 + 2^(1−P) is exact and a² = 1 + 2^(2−P) + 2^(2−2P).
// s = −(1 + 2^(2−P)) (exact) plus a·a: one rounding (fma) gives 2^(2−2P) exactly;
// rounding a·a first to P bits drops 2^(2−2P) and gives 0. An independent
// expectation: the exact value, by hand.
TEST(ScalarOpsOrder, MpfrFusedPathTakenWhateverTheIncludeOrder) {
  const unsigned P = precision_control<mpfr_real>::set_bits(64);
  ASSERT_GE(P, 64u);
  const mpfr_real one(1);
  const mpfr_real a = one + ldexp(one, 1 - static_cast<int>(P));
  const mpfr_real s0 = -(one + ldexp(one, 2 - static_cast<int>(P)));
  const mpfr_real want = ldexp(one, 2 - 2 * static_cast<int>(P));
  EXPECT_EQ(fused_probe<mpfr_real>(s0, one, a, a), want) << "caller parsed before multiprecision.hpp: two roundings";
  // ttr::dot (scalar.hpp, also parsed before multiprecision.hpp here).
  const mpfr_real xa[2] = {s0, a}, xb[2] = {one, a};
  EXPECT_EQ(dot(xa, xb, 2), want);
  // The generic path really would differ on this case (the test can fail).
  mpfr_real two_roundings = s0;
  two_roundings += a * a;
  EXPECT_EQ(two_roundings, mpfr_real(0));
  // scale_by: one correctly rounded product either way; the specialisation must
  // give that product (here exact: a · 2 = 2 + 2^(2−P)).
  EXPECT_EQ(scale_probe<mpfr_real>(a, mpfr_real(2)), 2 * a);
  precision_control<mpfr_real>::set_bits(256);
}

// MPFI keeps an enclosure through the same dispatch: the interval of the probe
// contains the exact 2^(2−2P) (the interval tier is not fused, so it is wider).
TEST(ScalarOpsOrder, MpfiEnclosureThroughTheSameDispatch) {
  const unsigned P = precision_control<mpfi_real>::set_bits(64);
  const mpfi_real one(1);
  const mpfi_real a = one + ldexp(one, 1 - static_cast<int>(P));
  const mpfi_real s0 = -(one + ldexp(one, 2 - static_cast<int>(P)));
  const mpfi_real r = fused_probe<mpfi_real>(s0, one, a, a);
  const double exact = std::ldexp(1.0, 2 - 2 * static_cast<int>(P));
  EXPECT_LE(scalar_traits<mpfi_real>::lower(r), exact);
  EXPECT_GE(scalar_traits<mpfi_real>::upper(r), exact);
  precision_control<mpfi_real>::set_bits(256);
}

// Native tiers keep two roundings (-ffp-contract=off): in double, the same case
// at P = 53 gives 0.
TEST(ScalarOpsOrder, DoubleKeepsTwoRoundings) {
  const double a = 1 + std::ldexp(1.0, -52), s0 = -(1 + std::ldexp(1.0, -51));
  EXPECT_EQ(fused_probe<double>(s0, 1.0, a, a), 0.0);
}

}  // namespace
}  // namespace ttr::test
