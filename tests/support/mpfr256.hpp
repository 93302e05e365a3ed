// A private MPFR type for the bitwise tests of the sequential adjoints
// (delta_backward_bitwise_test, gated_linear_backward_bitwise_test): MPFR at a
// fixed 256 bits with no scalar_ops specialisation, so generic primitives, each
// product and sum rounded to 256 bits (a second, unfused MPFR arithmetic beside
// ttr::mpfr_real's), and same_bits: the same IEEE bits (signed zeros included) or,
// in MPFR, the same value, sign and precision.
#pragma once

#include <boost/multiprecision/mpfr.hpp>
#include <cstring>
#include <string>
#include <type_traits>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

using mpfr256 = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<256>,
                                              boost::multiprecision::et_off>;

template <>
struct ttr::scalar_traits<mpfr256> {
  static std::string name() { return "mpfr256"; }
  static mpfr256 from_double(double x) { return mpfr256(x); }  // exact
  static double to_double(const mpfr256& x) { return x.convert_to<double>(); }
};

namespace ttr::test {

template <class S>
bool same_bits(const Tensor<S>& a, const Tensor<S>& b) {
  if (a.shape != b.shape) return false;
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    if constexpr (std::is_same_v<S, mpfr256>) {
      const auto* x = a.data[i].backend().data();
      const auto* y = b.data[i].backend().data();
      if (!mpfr_equal_p(x, y) || mpfr_signbit(x) != mpfr_signbit(y) || mpfr_get_prec(x) != mpfr_get_prec(y))
        return false;
    } else if (std::memcmp(&a.data[i], &b.data[i], sizeof(S)) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace ttr::test
