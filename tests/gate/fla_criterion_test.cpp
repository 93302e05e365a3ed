// flash-linear-attention's criterion as the gate applies it for comparison
// (gate/judge.hpp: `fla`, `fla-ci`): the per-tensor thresholds of FLA's tests,
// assert_close's absolute pass (max |Δ| ≤ 1e-6), its CI setting (a miss with
// relative RMS < 1 % or max |Δ| ≤ 0.3 is only a warning), and Judge::fla on a
// candidate whose relative RMS is known by construction.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::test {
namespace {

TEST(FlaCriterion, PerTensorThresholdsAreFlasTests) {
  EXPECT_EQ(fla_threshold("o", Direction::forward), 0.005);
  EXPECT_EQ(fla_threshold("ht", Direction::forward), 0.005);
  for (const char* t : {"dq", "dk", "dv", "dh0", "dw", "dlambda_v"}) EXPECT_EQ(fla_threshold(t, Direction::backward), 0.008) << t;
  for (const char* t : {"dg", "dbeta", "dg_atk", "dbeta_atk", "da_bar", "dp_bar"})
    EXPECT_EQ(fla_threshold(t, Direction::backward), 0.02) << t;
}

TEST(FlaCriterion, TestRuleAndCiRuleOnHandPickedValues) {
  struct Row {
    double rel, max_abs, threshold;
    bool test_rule, ci_rule;
  };
  const Row rows[] = {
      {0.004, 0.1, 0.005, true, true},    // below the threshold
      {0.006, 0.1, 0.005, false, true},   // a miss below 1 %: CI warns only
      {0.02, 0.2, 0.008, false, true},    // a miss above 1 % but max |Δ| ≤ 0.3: CI warns only
      {0.02, 0.5, 0.008, false, false},   // above 1 % and above 0.3: both fail
      {0.015, 0.5, 0.02, true, true},     // dg/dbeta's 0.02
      {0.5, 1e-7, 0.005, true, true},     // max |Δ| ≤ 1e-6 passes outright
      {std::numeric_limits<double>::quiet_NaN(), 1.0, 0.005, false, false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(fla_passes(Criterion::fla, r.rel, r.max_abs, r.threshold), r.test_rule) << r.rel << " " << r.max_abs;
    EXPECT_EQ(fla_passes(Criterion::fla_ci, r.rel, r.max_abs, r.threshold), r.ci_rule) << r.rel << " " << r.max_abs;
  }
}

// A candidate c = r·(1 + ε) has relative RMS ε·RMS(r)/(RMS(r) + 1e-8), known
// without the criterion's code: the judge must report that over the threshold.
TEST(FlaCriterion, JudgeReportsRelativeRmsOverTheThreshold) {
  const CaseInputs ci = case_inputs("linear_attn", "tiny", "basic");
  const LayerEntry& layer = find_layer("linear_attn");
  Judge judge(layer, ci.tensors, ci.config, Arith{Tier::fp32, 0});
  const TensorMap<double> ref = judge.oracle();
  ModelSpec ms;
  ms.form = Form::chunk;
  ms.dtype = Tier::fp32;
  for (const double eps : {0.004, 0.006}) {
    TensorMap<double> cand = ref;
    for (auto& [name, t] : cand)
      for (double& x : t.data) x *= 1.0 + eps;
    const CheckResult r = judge.fla(cand, ms, Criterion::fla);
    ASSERT_FALSE(r.tensors.empty());
    for (const TensorVerdict& v : r.tensors) {
      const Tensor<double>& o = ref.at(v.name);
      double ss = 0, mx = 0;
      for (double x : o.data) {
        ss += x * x;
        mx = std::max(mx, std::fabs(x));
      }
      const double rms = std::sqrt(ss / static_cast<double>(o.data.size()));
      EXPECT_NEAR(v.max_ratio, eps * rms / (rms + 1e-8) / 0.005, 1e-9) << v.name;
      EXPECT_NEAR(v.max_abs_error, eps * mx, eps * mx * 1e-12) << v.name;
      const bool expect_pass = eps < 0.005 || eps * mx <= 1e-6;
      EXPECT_EQ(v.pass, expect_pass) << v.name << " eps " << eps;
    }
    // FLA's CI rule: a 0.6 % miss is a warning, not a failure.
    EXPECT_TRUE(judge.fla(cand, ms, Criterion::fla_ci).pass) << eps;
  }
  // A NaN fails under both rules, whatever its size against the rest.
  TensorMap<double> cand = ref;
  cand.at("o").data[0] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(judge.fla(cand, ms, Criterion::fla).pass);
  EXPECT_FALSE(judge.fla(cand, ms, Criterion::fla_ci).pass);
}

}  // namespace
}  // namespace ttr::test
