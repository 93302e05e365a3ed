// The scalar concept every recurrence in reference/ is written against.
//
// A scalar type T supports + - * / (and compound forms), unary -, comparisons,
// and the free functions sqrt, exp, log, abs found by argument-dependent lookup
// (std:: for float/double, friends for the emulated 16-bit types, Boost for MPFR
// and MPFI). scalar_traits<T> adds what the language does not give uniformly:
// conversion from and to double and a name. Two in-place primitives, mul_add_to
// and scale_by (and mul_add_into, the fused form into another place), carry the inner loops; a tier changes them by specialising
// scalar_ops<T> next to its type (MPFR does, see multiprecision.hpp), never by
// overloading the free functions: an overload is found only by the templates
// parsed after it (ADL does not look in ttr for a Boost number), so the choice
// would depend on include order and one binary could hold two instantiations of
// the same template (ODR; the linker keeps either). A class specialisation is
// looked up when the caller is instantiated, whatever the include order.
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "reference/core/float16.hpp"

namespace ttr {

template <class T>
struct scalar_traits;

template <>
struct scalar_traits<double> {
  static std::string name() { return "fp64"; }
  static double from_double(double x) { return x; }
  static double to_double(double x) { return x; }
};

template <>
struct scalar_traits<float> {
  static std::string name() { return "fp32"; }
  static float from_double(double x) { return static_cast<float>(x); }  // RNE
  static double to_double(float x) { return x; }
};

template <class F>
struct scalar_traits<Float16<F>> {
  static std::string name() { return F::p == 8 ? "bf16" : "fp16"; }
  static Float16<F> from_double(double x) { return Float16<F>(x); }
  static double to_double(Float16<F> x) { return x.value(); }
};

// Working precision: significand bits of a tier. Tiers with run-time precision
// (MPFR, MPFI) specialise set_bits to change the thread's default precision.
template <class T>
struct precision_control {
  static unsigned set_bits(unsigned) { return std::numeric_limits<T>::digits; }
};
template <class F>
struct precision_control<Float16<F>> {
  static unsigned set_bits(unsigned) { return F::p; }
};

// Interval tiers compute enclosures; scalar_traits<T>::lower/upper give the bounds.
template <class T>
inline constexpr bool is_interval_v = false;

template <class T>
T from_double(double x) { return scalar_traits<T>::from_double(x); }
template <class T>
double to_double(const T& x) { return scalar_traits<T>::to_double(x); }

// The inner-loop primitives of a tier. Generic: acc += a * b with two roundings
// (native types: we build with -ffp-contract=off so no fused multiply-add is
// introduced), x *= d. Specialised next to a scalar type that does better (MPFR:
// one rounding, no temporaries), and only there, so that every translation unit
// instantiating a caller for that type sees the specialisation.
template <class T>
struct scalar_ops {
  static void mul_add_to(T& acc, const T& a, const T& b) { acc += a * b; }
  static void mul_add_into(T& dst, const T& a, const T& b, const T& src) { dst = src + a * b; }
  static void scale_by(T& x, const T& d) { x *= d; }
};

// acc += a * b, rounded as the tier rounds (scalar_ops<T>).
template <class T>
inline void mul_add_to(T& acc, const T& a, const T& b) { scalar_ops<T>::mul_add_to(acc, a, b); }
// dst = src + a * b, rounded as mul_add_to rounds (the same bits as copying src to
// dst and then mul_add_to(dst, a, b)).
template <class T>
inline void mul_add_into(T& dst, const T& a, const T& b, const T& src) { scalar_ops<T>::mul_add_into(dst, a, b, src); }
// x *= d (scalar_ops<T>).
template <class T>
inline void scale_by(T& x, const T& d) { scalar_ops<T>::scale_by(x, d); }

// Whether an algorithm may replace the definition's operations by an equivalent
// sequence with fewer of them (the same function, other roundings): true only for
// the high-precision oracle tiers (MPFR, MPFI: multiprecision.hpp), whose own error
// is negligible or enclosed whatever the order. False wherever the rounding of each
// operation is the object: the low-precision sequential tiers (the definition,
// rounded op by op), the Monte Carlo model (it mirrors a kernel's operations), and
// float64 and double-double, whose pair estimates the dd tier's own error only when
// both run the same operations (docs/oracle-tiers.md). A class, like scalar_ops, so
// that the specialisation next to a type is seen whatever the include order.
template <class T>
struct reorders_for_speed {
  static constexpr bool value = false;
};

// Dot product sum_i a[i] * b[i] accumulated left to right (the order is part of
// the definition of the low-precision sequential tiers).
template <class T>
inline T dot(const T* a, const T* b, int n) {
  T s = from_double<T>(0.0);
  for (int i = 0; i < n; ++i) mul_add_to(s, a[i], b[i]);
  return s;
}

}  // namespace ttr
