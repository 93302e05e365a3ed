// Calibration of the gate on correct kernels: every layer × form × dtype of the
// default suite over 1000 seeds per case, zero failures (label `slow`; run with
// `ctest --preset slow`). Prints the largest error ratio seen, the number quoted
// in docs/error-model.md.
#include <gtest/gtest.h>

#include <cstdio>

#include "oracles/gate.hpp"

namespace ttr::test {
namespace {

TEST(GateCalibration, ThousandSeedsNoFalseAlarm) {
  GateOptions o;
  o.seeds = 1000;
  const GateResult r = run_gate(o);
  double worst = 0;
  std::string at;
  std::size_t failed = 0;
  for (const GateCheck& c : r.checks) {
    failed += c.result.pass ? 0 : 1;
    for (const TensorVerdict& v : c.result.tensors)
      if (v.present && v.max_ratio > worst) {
        worst = v.max_ratio;
        at = c.id + " " + v.name;
      }
  }
  EXPECT_EQ(failed, 0u);
  std::printf("default suite, 1000 seeds per case: %zu checks, %zu failed, largest error ratio %.3g (%s)\n",
              r.checks.size(), failed, worst, at.c_str());
}

}  // namespace
}  // namespace ttr::test
