// Calibration of the gate on correct kernels: every layer × form × dtype of the
// default suite over 1000 random input sets — 250 seeds of each of the four
// small cases — plus 10 seeds of the K = V = 64 `realistic` case, with zero
// failures (label `slow`; `ctest --preset slow`; about 30 minutes on 2 cores).
// Prints the largest error ratio seen, the number quoted in docs/error-model.md.
// The same for the foreign policies (gate/policies.hpp: tf32, bf16-storage, and the
// native fp16 the default gate does not run), each judging the CPU forms run in its
// concrete arithmetic (`gate --policy`).
#include <gtest/gtest.h>

#include <cstdio>

#include "gate/gate.hpp"

namespace ttr::test {
namespace {

GateResult run(std::vector<std::string> cases, int seeds, std::vector<PolicyChoice> policies = {}) {
  GateOptions o;
  o.policies = std::move(policies);
  o.cases = std::move(cases);
  o.seeds = seeds;
  o.seed = 1000;  // beyond the seeds the fast gate test and the default gate use
  return run_gate(o);
}

void expect_no_false_alarm(const char* what, std::vector<PolicyChoice> policies) {
  GateResult r = run({"small", "edges", "near_duplicate_keys", "initial_states"}, 250, policies);
  GateResult big = run({"realistic"}, 10, policies);
  r.checks.insert(r.checks.end(), big.checks.begin(), big.checks.end());
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
  std::printf("default suite, %s, 1000 input sets per layer/form/dtype + 10 realistic: %zu checks, %zu failed, largest error ratio %.3g (%s)\n",
              what, r.checks.size(), failed, worst, at.c_str());
}

TEST(GateCalibration, ThousandSeedsNoFalseAlarm) { expect_no_false_alarm("bf16 and fp32", {}); }

TEST(GateCalibration, ForeignPoliciesThousandSeedsNoFalseAlarm) {
  expect_no_false_alarm("tf32, bf16-storage, fp16",
                        {parse_policy("tf32"), parse_policy("bf16-storage"), parse_policy("fp16")});
}

}  // namespace
}  // namespace ttr::test
