// A backward form checked against the exact adjoint: the claim every foreign-kernel form
// (FLA's algorithms: chunk_tf32_intra, sequential_dg_sum) must meet before its rounding
// is worth modelling — in MPFR-256 it computes the same gradients as the sequential
// adjoint, to 1e-60 of each tensor's largest value.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "oracles/registry.hpp"
#include "tests/support/suite_case.hpp"

namespace ttr::test {

inline double largest(const Tensor<double>& t) {
  double m = 0.0;
  for (double x : t.data) m = std::max(m, std::fabs(x));
  return m;
}

inline void expect_exact_adjoint(const SuiteCase& k, Form form, const TensorMap<double>& in) {
  const Arith mp{Tier::mpfr, 256};
  const TensorMap<double> adj = k.backward(Form::sequential, mp, in);
  const TensorMap<double> got = k.backward(form, mp, in);
  for (const auto& [name, want] : adj) {
    const Tensor<double>& g = got.at(name);
    ASSERT_EQ(g.data.size(), want.data.size()) << name;
    const double scale = largest(want);
    for (std::size_t i = 0; i < want.data.size(); ++i)
      ASSERT_NEAR(g.data[i], want.data[i], 1e-60 * scale) << name << "[" << i << "]";
  }
}

}  // namespace ttr::test
