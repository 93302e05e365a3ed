// Shared by the MPFR 256-vs-512-bit agreement tests (mpfr_agreement_test.cpp,
// mpfr_agreement_slow_test.cpp): evaluate a suite case of a layer at both
// precisions and compare every output tensor,
//     max|o256 − o512| <= tol · max|o512|,
// printing the digits observed (−log10 of max|o256 − o512| / max|o512|; "inf"
// when the two agree exactly, which happens when the exact result fits in 256
// bits, e.g. linear_attn on bf16-grid inputs with a power-of-two scale).
#pragma once

#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "oracles/registry.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::test::precision {

// 77 decimal digits at 256 bits; well-conditioned recurrences keep > 76 (observed).
inline constexpr double kTolerance = 1e-70;

struct Disagreement {
  double relative = 0;  // max|a − b| / max|b|, rounded up to a double
  bool zero_scale = false;
};

// Computed at 1024 bits, where the difference of a 256- and a 512-bit number is exact.
inline Disagreement disagreement(const Tensor<mpfr_real>& a, const Tensor<mpfr_real>& b) {
  mpfr_t d, m, t;
  mpfr_inits2(1024, d, m, t, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_zero(d, 1);
  mpfr_set_zero(m, 1);
  for (std::size_t i = 0; i < b.data.size(); ++i) {
    mpfr_sub(t, a.data[i].backend().data(), b.data[i].backend().data(), MPFR_RNDN);
    mpfr_abs(t, t, MPFR_RNDN);
    mpfr_max(d, d, t, MPFR_RNDN);
    mpfr_abs(t, b.data[i].backend().data(), MPFR_RNDN);
    mpfr_max(m, m, t, MPFR_RNDN);
  }
  Disagreement r;
  if (mpfr_zero_p(m)) {
    r.zero_scale = true;
    r.relative = mpfr_get_d(d, MPFR_RNDU);
  } else {
    mpfr_div(t, d, m, MPFR_RNDU);
    r.relative = mpfr_get_d(t, MPFR_RNDU);
  }
  mpfr_clears(d, m, t, static_cast<mpfr_ptr>(nullptr));
  return r;
}

inline double digits(double relative) {
  return relative > 0 ? -std::log10(relative) : std::numeric_limits<double>::infinity();
}

// Compares one case at 256 and 512 bits against `tol`; returns the fewest digits
// over its output tensors.
inline double check_case(const std::string& layer, const std::string& suite, const std::string& case_name,
                         double tol, std::uint64_t seed = 0) {
  SCOPED_TRACE(layer + " " + suite + "/" + case_name);
  const CaseInputs c = case_inputs(layer, suite, case_name, seed);
  const TensorMap<mpfr_real> lo = mpfr_sequential(layer, c.tensors, c.config, 256);
  const TensorMap<mpfr_real> hi = mpfr_sequential(layer, c.tensors, c.config, 512);
  const LayerSpec& spec = find_layer(layer).spec;
  EXPECT_EQ(hi.size(), spec.outputs.size());
  double fewest = std::numeric_limits<double>::infinity();
  std::string report;
  for (const auto& ts : spec.outputs) {
    if (!ts.certifiable) continue;  // diagnostics of the arithmetic (gka's kappa, resid)
    const auto a = lo.find(ts.name), b = hi.find(ts.name);
    if (a == lo.end() || b == hi.end() || b->second.data.empty()) {
      ADD_FAILURE() << "missing or empty output " << ts.name;
      continue;
    }
    EXPECT_GE(mpfr_get_prec(a->second.data[0].backend().data()), 256) << ts.name;
    EXPECT_GE(mpfr_get_prec(b->second.data[0].backend().data()), 512) << ts.name;
    EXPECT_EQ(a->second.shape, b->second.shape) << ts.name;
    const Disagreement dis = disagreement(a->second, b->second);
    if (dis.zero_scale) {
      EXPECT_EQ(dis.relative, 0.0) << ts.name << ": o512 is all zero, o256 is not";
      continue;
    }
    EXPECT_LE(dis.relative, tol) << ts.name << ": 256 and 512 bits agree to only " << digits(dis.relative)
                                 << " digits (tolerance " << tol << ")";
    fewest = std::min(fewest, digits(dis.relative));
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s:%.1f", ts.name.c_str(), digits(dis.relative));
    report += buf;
  }
  std::printf("[ digits   ] %-26s %-26s%s  (tolerance %.0e)\n", layer.c_str(), (suite + "/" + case_name).c_str(),
              report.c_str(), tol);
  ::testing::Test::RecordProperty(layer + "." + case_name + ".digits", std::to_string(fewest));
  return fewest;
}

inline std::string param_name(const ::testing::TestParamInfo<std::string>& i) { return i.param; }

}  // namespace ttr::test::precision
