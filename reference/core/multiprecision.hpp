// MPFR and MPFI tiers through Boost.Multiprecision. Heavy: include only in the
// translation units that instantiate a recurrence for these tiers.
//
// Precision. Boost 1.74 sets the default precision in decimal digits d and
// allocates ceil-ish(d / log10 2) bits (detail::digits10_2_2). A request for N
// bits picks the smallest d whose allocation is >= N; the working precision
// actually used is reported by working_bits() and recorded in output metadata.
#pragma once

#include <boost/multiprecision/mpfi.hpp>
#include <boost/multiprecision/mpfr.hpp>
#include <string>

#include "reference/core/pow2.hpp"
#include "reference/core/scalar.hpp"

namespace ttr {

using mpfr_real = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                                boost::multiprecision::et_off>;
using mpfi_real = boost::multiprecision::number<boost::multiprecision::mpfi_float_backend<0>,
                                                boost::multiprecision::et_off>;

// Decimal digits that make Boost allocate at least `bits` bits.
inline unsigned digits10_for_bits(unsigned bits) {
  unsigned d = 1;
  while (boost::multiprecision::detail::digits10_2_2(d) < bits) ++d;
  return d;
}

template <>
struct precision_control<mpfr_real> {
  // Sets the default precision of new mpfr_real values for this thread.
  static unsigned set_bits(unsigned bits) {
    mpfr_real::default_precision(digits10_for_bits(bits));
    return working_bits();
  }
  static unsigned working_bits() { return static_cast<unsigned>(mpfr_get_prec(mpfr_real(0).backend().data())); }
};
template <>
struct precision_control<mpfi_real> {
  static unsigned set_bits(unsigned bits) {
    mpfi_real::default_precision(digits10_for_bits(bits));
    return working_bits();
  }
  static unsigned working_bits() { return static_cast<unsigned>(mpfi_get_prec(mpfi_real(0).backend().data())); }
};

template <>
struct scalar_traits<mpfr_real> {
  static std::string name() { return "mpfr"; }
  static mpfr_real from_double(double x) { return mpfr_real(x); }  // exact
  static double to_double(const mpfr_real& x) { return mpfr_get_d(x.backend().data(), MPFR_RNDN); }
};

template <>
inline constexpr bool is_interval_v<mpfi_real> = true;

template <>
struct scalar_traits<mpfi_real> {
  static std::string name() { return "mpfi"; }
  static mpfi_real from_double(double x) { return mpfi_real(x); }  // exact point interval
  // Midpoint rounded to nearest; the enclosure comes from lower()/upper().
  static double to_double(const mpfi_real& x) {
    mpfr_t m;
    mpfr_init2(m, mpfi_get_prec(x.backend().data()));
    mpfi_mid(m, x.backend().data());
    const double d = mpfr_get_d(m, MPFR_RNDN);
    mpfr_clear(m);
    return d;
  }
  // Outward-rounded double bounds of the interval.
  static double lower(const mpfi_real& x) {
    mpfr_t m;
    mpfr_init2(m, mpfi_get_prec(x.backend().data()));
    mpfi_get_left(m, x.backend().data());
    const double d = mpfr_get_d(m, MPFR_RNDD);
    mpfr_clear(m);
    return d;
  }
  static double upper(const mpfi_real& x) {
    mpfr_t m;
    mpfr_init2(m, mpfi_get_prec(x.backend().data()));
    mpfi_get_right(m, x.backend().data());
    const double d = mpfr_get_d(m, MPFR_RNDU);
    mpfr_clear(m);
    return d;
  }
};

// Exact scaling by powers of two (pow2.hpp): MPFR's exponent, and mpfr_mul_2si
// (exact: MPFR's exponent range is |e| < 2^30).
template <>
struct binary_scaling<mpfr_real> {
  static constexpr bool enabled = true;
  static int exponent(const mpfr_real& x) {
    if (!mpfr_regular_p(x.backend().data())) return 0;  // zero, inf, NaN
    return static_cast<int>(mpfr_get_exp(x.backend().data()));
  }
  static mpfr_real ldexp(const mpfr_real& x, int e) {
    mpfr_real r;
    mpfr_set_prec(r.backend().data(), mpfr_get_prec(x.backend().data()));
    mpfr_mul_2si(r.backend().data(), x.backend().data(), e, MPFR_RNDN);
    return r;
  }
};

// Allocation-free inner-loop primitives for MPFR: a fused multiply-add rounds once
// (more accurate than the generic two-rounding form; the oracle only gains).
// Specialisations of scalar_ops (scalar.hpp), not overloads: every caller gets
// them whatever the include order (tests/core/scalar_ops_order_test.cpp).
template <>
struct scalar_ops<mpfr_real> {
  static void mul_add_to(mpfr_real& acc, const mpfr_real& a, const mpfr_real& b) {
    mpfr_fma(acc.backend().data(), a.backend().data(), b.backend().data(), acc.backend().data(), MPFR_RNDN);
  }
  static void mul_add_into(mpfr_real& dst, const mpfr_real& a, const mpfr_real& b, const mpfr_real& src) {
    if (mpfr_get_prec(dst.backend().data()) != mpfr_get_prec(src.backend().data()))
      mpfr_set_prec(dst.backend().data(), mpfr_get_prec(src.backend().data()));
    mpfr_fma(dst.backend().data(), a.backend().data(), b.backend().data(), src.backend().data(), MPFR_RNDN);
  }
  static void scale_by(mpfr_real& x, const mpfr_real& d) {
    mpfr_mul(x.backend().data(), x.backend().data(), d.backend().data(), MPFR_RNDN);
  }
};
// MPFI: the same without temporaries; interval fma is not offered by MPFI, so two
// enclosing operations (still an enclosure).
template <>
struct scalar_ops<mpfi_real> {
  static void mul_add_to(mpfi_real& acc, const mpfi_real& a, const mpfi_real& b) {
    thread_local mpfi_real tmp;
    if (mpfi_get_prec(tmp.backend().data()) != mpfi_get_prec(acc.backend().data()))
      mpfi_set_prec(tmp.backend().data(), mpfi_get_prec(acc.backend().data()));
    mpfi_mul(tmp.backend().data(), a.backend().data(), b.backend().data());
    mpfi_add(acc.backend().data(), acc.backend().data(), tmp.backend().data());
  }
  static void mul_add_into(mpfi_real& dst, const mpfi_real& a, const mpfi_real& b, const mpfi_real& src) {
    thread_local mpfi_real tmp;
    if (mpfi_get_prec(tmp.backend().data()) != mpfi_get_prec(src.backend().data()))
      mpfi_set_prec(tmp.backend().data(), mpfi_get_prec(src.backend().data()));
    if (mpfi_get_prec(dst.backend().data()) != mpfi_get_prec(src.backend().data()))
      mpfi_set_prec(dst.backend().data(), mpfi_get_prec(src.backend().data()));
    mpfi_mul(tmp.backend().data(), a.backend().data(), b.backend().data());
    mpfi_add(dst.backend().data(), src.backend().data(), tmp.backend().data());
  }
  static void scale_by(mpfi_real& x, const mpfi_real& d) {
    mpfi_mul(x.backend().data(), x.backend().data(), d.backend().data());
  }
};

// The oracle tiers: an algorithm may trade the definition's order of operations for
// fewer of them (scalar.hpp; family/delta_backward_scaled.hpp).
template <>
struct reorders_for_speed<mpfr_real> {
  static constexpr bool value = true;
};
template <>
struct reorders_for_speed<mpfi_real> {
  static constexpr bool value = true;
};

}  // namespace ttr
