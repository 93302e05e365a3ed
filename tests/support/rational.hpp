// Exact rational arithmetic as a scalar tier for tests: the reference/ recurrences
// instantiated with boost::multiprecision::mpq_rational (GMP) compute in exact
// arithmetic wherever they only add, subtract, multiply and divide, so a test can
// assert EXACT equality against an independent formulation.
//
// Transcendental functions have no exact rational value in general. The
// recurrences still mention exp/log/sqrt/abs in code paths a test may not take
// (Decay::scalar calls exp(g) even for g = 0), so they must compile: the
// overloads below return the exact result where one exists (exp(0) = 1,
// log(1) = 0, sqrt of a perfect-square rational) and throw std::domain_error
// otherwise. A test can therefore never silently get an inexact "rational".
#pragma once

#include <mpfr.h>

#include <boost/multiprecision/gmp.hpp>
#include <cmath>
#include <stdexcept>
#include <string>

#include "reference/core/scalar.hpp"

namespace ttr::test {
using rational = boost::multiprecision::mpq_rational;
}  // namespace ttr::test

namespace ttr {

template <>
struct scalar_traits<boost::multiprecision::mpq_rational> {
  using Q = boost::multiprecision::mpq_rational;
  static std::string name() { return "mpq"; }
  // Every finite double is a dyadic rational: mpq_set_d converts it exactly.
  static Q from_double(double x) {
    if (!std::isfinite(x)) throw std::domain_error("rational: non-finite double " + std::to_string(x));
    Q r;
    mpq_set_d(r.backend().data(), x);
    return r;
  }
  // Rounded to nearest (mpq_get_d would truncate): through a 53-bit MPFR value.
  static double to_double(const Q& x) {
    mpfr_t m;
    mpfr_init2(m, 53);
    mpfr_set_q(m, x.backend().data(), MPFR_RNDN);
    const double d = mpfr_get_d(m, MPFR_RNDN);
    mpfr_clear(m);
    return d;
  }
};

}  // namespace ttr

// Found by argument-dependent lookup from the reference templates.
namespace boost::multiprecision {

inline mpq_rational exp(const mpq_rational& x) {
  if (x == 0) return mpq_rational(1);
  throw std::domain_error("rational: exp(" + x.str() + ") is irrational");
}

inline mpq_rational log(const mpq_rational& x) {
  if (x == 1) return mpq_rational(0);
  throw std::domain_error("rational: log(" + x.str() + ") is irrational");
}

inline mpq_rational sqrt(const mpq_rational& x) {
  const mpz_int n = numerator(x), d = denominator(x);
  if (x >= 0 && mpz_perfect_square_p(n.backend().data()) && mpz_perfect_square_p(d.backend().data()))
    return mpq_rational(boost::multiprecision::sqrt(n), boost::multiprecision::sqrt(d));
  throw std::domain_error("rational: sqrt(" + x.str() + ") is irrational");
}

}  // namespace boost::multiprecision
