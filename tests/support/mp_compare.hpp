// MPFR conversion and comparison helpers shared by the per-layer tests: the
// precision guard, exact double → MPFR conversion, the 256-bit oracle run of a
// layer adapter, the normwise relative error max|Δ|/max|want|, and exact
// (rational) element-by-element comparison.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/config.hpp"
#include "oracles/registry.hpp"
#include "reference/core/multiprecision.hpp"
#include "tests/support/rational.hpp"

namespace ttr::test {

using mp = ttr::mpfr_real;
using Sets = std::vector<std::pair<std::string, std::string>>;

// Restores the thread's default MPFR precision when a test ends.
struct PrecisionGuard {
  unsigned saved = mp::default_precision();
  ~PrecisionGuard() { mp::default_precision(saved); }
};

inline TensorMap<mp> to_mp(const TensorMap<double>& in) {  // exact, at the current default precision
  TensorMap<mp> out;
  for (const auto& [name, x] : in) {
    auto& y = out[name];
    y.shape = x.shape;
    for (double d : x.data) y.data.emplace_back(d);
  }
  return out;
}

inline TensorMap<double> to_double_map(const TensorMap<rational>& in) {
  TensorMap<double> out;
  for (const auto& [name, x] : in) {
    auto& y = out[name];
    y.shape = x.shape;
    for (const auto& e : x.data) y.data.push_back(ttr::to_double(e));
  }
  return out;
}

// An oracle adapter (tensor names, config) run on the reference at 256 bits, on the
// exact MPFR images of double inputs.
template <class Adapter>
TensorMap<mp> oracle256(const char* layer, const TensorMap<double>& in, const Sets& sets) {
  EXPECT_GE(ttr::precision_control<mp>::set_bits(256), 256u);
  const auto cfg = ttr::Config::make(ttr::find_layer(layer).spec, sets);
  TensorMap<mp> out;
  Adapter::template sequential<mp>(to_mp(in), cfg, ttr::FormOptions{}, out);
  return out;
}

// max_e |got_e − want_e| / max_e |want_e|  (normwise: no blow-up on entries near 0).
inline double rel_err(const Tensor<mp>& got, const Tensor<mp>& want) {
  EXPECT_EQ(got.shape, want.shape);
  if (got.shape != want.shape) return 1.0;
  mp num = 0, den = 0;
  for (std::size_t e = 0; e < want.data.size(); ++e) {
    num = std::max(num, mp(abs(got.data[e] - want.data[e])));
    den = std::max(den, mp(abs(want.data[e])));
  }
  return (den == 0 ? num : mp(num / den)).convert_to<double>();
}

inline void expect_close(const TensorMap<mp>& got, const TensorMap<mp>& want, double tol,
                         std::initializer_list<const char*> names = {"o", "ht"}) {
  for (const char* name : names) {
    const double e = rel_err(got.at(name), want.at(name));
    EXPECT_LT(e, tol) << name << ": relative error " << e;
  }
}

// Every element of the double results equals the MPFR expectation rounded to double.
inline void expect_rounds_to(const TensorMap<double>& got, const TensorMap<mp>& want,
                             std::initializer_list<const char*> names = {"o", "ht"}) {
  for (const char* name : names) {
    ASSERT_EQ(got.at(name).shape, want.at(name).shape) << name;
    for (std::size_t e = 0; e < want.at(name).data.size(); ++e)
      EXPECT_EQ(got.at(name).data[e], ttr::to_double(want.at(name).data[e])) << name << " element " << e;
  }
}

inline void expect_exact(const Tensor<rational>& got, const Tensor<rational>& want, const char* what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  for (std::size_t e = 0; e < want.data.size(); ++e)
    EXPECT_EQ(got.data[e], want.data[e]) << what << " element " << e << ": got " << got.data[e].str() << ", want "
                                         << want.data[e].str();
}

}  // namespace ttr::test
