// Calibration of the gradient error model on correct backward kernels: every
// layer × backward form × dtype of the default suite over 1000 random input sets
// — 250 seeds of each of the four small cases — with zero failures (label `slow`;
// `ctest --preset slow`; several hours on 2 cores). The same run, sharded and with
// the per-gradient ratio table, is bench/gradient-calibration
// (docs/error-model-gradients.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "gate/gate.hpp"

namespace ttr::test {
namespace {

TEST(GateCalibration, ThousandSeedsNoFalseAlarmInTheGradients) {
  GateOptions o;
  o.cases = {"small", "edges", "near_duplicate_keys", "initial_states"};
  o.seeds = 250;
  o.seed = 1000;  // beyond the seeds the fast gate test and the default gate use
  o.directions = {Direction::backward};
  const GateResult r = run_gate(o);
  std::map<std::string, std::pair<double, std::string>> worst;  // gradient -> largest ratio, check
  std::size_t failed = 0;
  for (const GateCheck& c : r.checks) {
    failed += c.result.pass ? 0 : 1;
    for (const TensorVerdict& v : c.result.tensors)
      if (v.present && v.max_ratio > worst[v.name].first) worst[v.name] = {v.max_ratio, c.id};
  }
  EXPECT_EQ(failed, 0u);
  EXPECT_GT(r.checks.size(), 0u);
  std::printf("backward forms, 1000 input sets per layer/form/dtype: %zu checks, %zu failed\n", r.checks.size(),
              failed);
  for (const auto& [name, w] : worst)
    std::printf("  %-8s largest ratio %.3g (%s)\n", name.c_str(), w.first, w.second.c_str());
}

}  // namespace
}  // namespace ttr::test
