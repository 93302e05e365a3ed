// Exact scaling by powers of two, and numbers carried as a mantissa with a
// separate integer exponent — what a form uses to keep a quantity whose exact
// value leaves the storage type's exponent range (KLA-K's precision Λ_t, which
// grows like ā^{-2t} with p̄ = 0) representable without changing the function it
// computes.
//
// binary_scaling<T>: `enabled` when the tier gives exponent access. Then
// exponent(x) is e with x = m·2^e, |m| ∈ [1/2, 1) (0 for zero and non-finite x),
// and ldexp(x, e) = x·2^e — exact unless the result leaves the type's range (an
// overflow gives ±inf, a result below the smallest normal is rounded once, as
// std::ldexp does). Specialised here for float and double, for the MPFR tier in
// multiprecision.hpp and for the Monte Carlo tier in mca.hpp. Tiers without it
// (rationals in tests, MPFI intervals) carry every exponent as 0: the scaled
// algorithms then reduce to the unscaled arithmetic on the same values, which is
// exact there anyway.
//
// Scaled<T> is m·2^e. Normalised: m = 0 (then e = 0), or |m| ∈ [1/2, 1). The
// operations round only in their mantissa arithmetic (one rounding per product,
// quotient or sum, as the underlying type rounds), so a Scaled product or quotient
// has the relative error of one operation of T, and never overflows or
// underflows while the integer exponent stays in int's range.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>

#include "reference/core/scalar.hpp"

namespace ttr {

template <class T>
struct binary_scaling {
  static constexpr bool enabled = false;
  static int exponent(const T&) { return 0; }
  static T ldexp(const T& x, int) { return x; }
};

template <class F>
struct native_binary_scaling {
  static constexpr bool enabled = true;
  static int exponent(F x) {
    if (x == 0 || !std::isfinite(x)) return 0;  // std::frexp leaves inf/NaN alone
    int e = 0;
    std::frexp(x, &e);
    return e;
  }
  static F ldexp(F x, int e) { return std::ldexp(x, e); }
};
template <>
struct binary_scaling<float> : native_binary_scaling<float> {};
template <>
struct binary_scaling<double> : native_binary_scaling<double> {};

template <class T>
bool is_zero(const T& x) {
  return x == from_double<T>(0.0);
}

template <class T>
struct Scaled {
  T m;
  int e = 0;
};

// x·2^e rewritten with its mantissa in [1/2, 1) (exact).
template <class T>
Scaled<T> normalised(T m, int e = 0) {
  if constexpr (binary_scaling<T>::enabled) {
    const int k = binary_scaling<T>::exponent(m);
    if (k != 0) {
      m = binary_scaling<T>::ldexp(m, -k);
      e += k;
    }
    if (is_zero(m)) e = 0;
  }
  return {std::move(m), e};
}

// The value as a T: ±inf beyond T's range, rounded once below its normal range.
template <class T>
T value_of(const Scaled<T>& x) {
  if constexpr (binary_scaling<T>::enabled) return binary_scaling<T>::ldexp(x.m, x.e);
  else return x.m;
}

// x·2^-shift as a T (shift ≥ 0 in the callers: only ever shrinks, never overflows).
template <class T>
T shifted_down(const T& x, int shift) {
  if constexpr (binary_scaling<T>::enabled) return shift == 0 ? x : binary_scaling<T>::ldexp(x, -shift);
  else return x;
}

// x·y: one rounding of the mantissa product.
template <class T>
Scaled<T> operator*(const Scaled<T>& x, const Scaled<T>& y) {
  T m = x.m;
  scale_by(m, y.m);
  return normalised(std::move(m), x.e + y.e);
}

// x/y (y ≠ 0): one rounding of the mantissa quotient.
template <class T>
Scaled<T> operator/(const Scaled<T>& x, const Scaled<T>& y) {
  T m = x.m;
  m /= y.m;
  return normalised(std::move(m), x.e - y.e);
}

// x + y: the smaller operand is shifted to the larger one's exponent (exact
// unless it falls below T's normal range: then it is ≤ 2^-125 of the larger one,
// and is rounded once there), then one rounding of the mantissa sum.
template <class T>
Scaled<T> operator+(const Scaled<T>& x, const Scaled<T>& y) {
  if (is_zero(y.m)) return x;
  if (is_zero(x.m)) return y;
  const int top = std::max(x.e, y.e);
  T m = shifted_down(x.m, top - x.e);
  m += shifted_down(y.m, top - y.e);
  return normalised(std::move(m), top);
}

}  // namespace ttr
