// The dd tier's exact products (reference/core/double_double.hpp). Where the build
// machine runs FMA code this TU is compiled as the dd runners are (-mfma,
// tests/CMakeLists.txt), so QD forms two_prod by one fused multiply-subtract; on
// other machines QD splits (Dekker/Veltkamp). Either way the error term must be
// the exact a·b − fl(a·b) (checked in MPFR at 106 bits, where a·b of two doubles
// is exact) and the very bits of Dekker's splitting (written out below as QD's
// inline.h does it without QD_FMS), so dd_real's products — and every dd oracle —
// are bit for bit those of a build that splits.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "reference/core/double_double.hpp"

namespace ttr::test {
namespace {

// Veltkamp's splitting with QD's constants (2^27 + 1; rescaled above 2^996).
void veltkamp_split(double a, double& hi, double& lo) {
  const double splitter = 134217729.0, thresh = 0x1p996;
  const bool big = a > thresh || a < -thresh;
  if (big) a *= 0x1p-28;
  const double t = splitter * a;
  hi = t - (t - a);
  lo = a - hi;
  if (big) {
    hi *= 0x1p28;
    lo *= 0x1p28;
  }
}
double dekker_prod(double a, double b, double& err) {
  double ah, al, bh, bl;
  const double p = a * b;
  veltkamp_split(a, ah, al);
  veltkamp_split(b, bh, bl);
  err = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return p;
}
// QD's dd × dd (sloppy, as Debian builds it) on the split product.
dd_real dekker_mul(const dd_real& a, const dd_real& b) {
  double p2;
  const double p1 = dekker_prod(a.x[0], b.x[0], p2);
  p2 += (a.x[0] * b.x[1] + a.x[1] * b.x[0]);
  const double s = p1 + p2;
  return dd_real(s, p2 - (s - p1));
}

bool same_bits(double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// A double with a random 53-bit significand and exponent in [-e, e].
double draw(std::mt19937_64& g, int e) {
  const double m = static_cast<double>((g() >> 11) | (std::uint64_t{1} << 52)) * 0x1p-52;  // [1, 2)
  const int x = static_cast<int>(g() % (2 * e + 1)) - e;
  return std::ldexp(g() & 1 ? -m : m, x);
}

TEST(DdProducts, TheBuildTakesTheFmaWhereTheTargetHasOne) {
#if defined(FP_FAST_FMA)
  constexpr bool fast_fma = true;
#else
  constexpr bool fast_fma = false;
#endif
#if defined(QD_FMS)
  constexpr bool fms = true;
#else
  constexpr bool fms = false;
#endif
  EXPECT_EQ(fms, fast_fma);  // double_double.hpp defines QD_FMS exactly then
#if defined(TTR_DD_FMA_TU)
  EXPECT_TRUE(fast_fma) << "compiled with -mfma, yet the target reports no fast FMA";
#endif
}

TEST(DdProducts, TwoProdIsExactAndTheSplittingsBits) {
  std::mt19937_64 g(20261125);
  mpfr_t ab, r;
  mpfr_init2(ab, 106);
  mpfr_init2(r, 106);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const double a = draw(g, i % 2 ? 400 : 20), b = draw(g, i % 2 ? 400 : 20);
    double err, err_split;
    const double p = qd::two_prod(a, b, err);
    const double p_split = dekker_prod(a, b, err_split);
    ASSERT_TRUE(same_bits(p, a * b)) << a << " " << b;
    ASSERT_TRUE(same_bits(p, p_split));
    ASSERT_TRUE(same_bits(err, err_split)) << a << " * " << b << ": " << err << " vs split " << err_split;
    // p + err = a·b exactly.
    ASSERT_EQ(mpfr_set_d(ab, a, MPFR_RNDN), 0);
    ASSERT_EQ(mpfr_mul_d(ab, ab, b, MPFR_RNDN), 0);  // 53 × 53 bits: exact in 106
    ASSERT_EQ(mpfr_set_d(r, p, MPFR_RNDN), 0);
    ASSERT_EQ(mpfr_add_d(r, r, err, MPFR_RNDN), 0);
    ASSERT_EQ(mpfr_cmp(r, ab), 0) << a << " * " << b;
    ++checked;
  }
  // Beyond 2^996 the splitting rescales: the products there too (kept finite).
  for (int i = 0; i < 1000; ++i) {
    const double a = std::ldexp(draw(g, 0), 1000), b = draw(g, 20);
    double err, err_split;
    const double p = qd::two_prod(a, b, err);
    if (!std::isfinite(p)) continue;
    dekker_prod(a, b, err_split);
    ASSERT_TRUE(same_bits(err, err_split)) << a << " * " << b;
    ++checked;
  }
  mpfr_clear(ab);
  mpfr_clear(r);
  EXPECT_GT(checked, 200500);
}

TEST(DdProducts, DoubleDoubleProductsAreTheSplittingBuildsBitForBit) {
  std::mt19937_64 g(7);
  for (int i = 0; i < 200000; ++i) {
    const dd_real a = dd_real(draw(g, 30)) + dd_real(draw(g, 30)) * 0x1p-60;
    const dd_real b = dd_real(draw(g, 30)) + dd_real(draw(g, 30)) * 0x1p-57;
    const dd_real c = a * b, d = dekker_mul(a, b);
    ASSERT_TRUE(same_bits(c.x[0], d.x[0]) && same_bits(c.x[1], d.x[1]))
        << a.x[0] << "+" << a.x[1] << " * " << b.x[0] << "+" << b.x[1];
  }
}

}  // namespace
}  // namespace ttr::test
