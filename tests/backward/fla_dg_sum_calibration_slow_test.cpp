// Calibration sample of the backward form `sequential_dg_sum` (FLA's fused-recurrent
// dg by a reverse running sum; reference/family/gated_linear_dg_sum.hpp): its bf16 and
// fp32 tiers are correct kernels of that algorithm, so judged against the MPFR oracle
// under its own gradient model every row's ratio must stay under the threshold, on
// more seeds and larger cases than the CI test (tests/backward/chunk_backward_test.cpp,
// tiny suite, one seed): the tiny suite and the stress suite's cases but `long`
// (T = 4096: minutes in MPFR) and `value_edges` (range findings, excused, not
// calibration), 8 seeds each. Prints the worst ratio per layer and dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"

namespace ttr::test {
namespace {

TEST(FlaDgSumCalibration, CorrectKernelsOfTheRunningSumPassTheirModel) {
  for (const char* layer : {"gla", "simple_gla"}) {
    const LayerEntry& e = find_layer(layer);
    std::vector<VectorCase> cases = suite_cases(e.spec, "tiny");
    for (const VectorCase& c : suite_cases(e.spec, "stress"))
      if (c.name != "long" && c.name != "value_edges") cases.push_back(c);
    for (Tier dtype : {Tier::bf16, Tier::fp32}) {
      double worst = 0.0;
      std::string where;
      int judged = 0;
      for (const VectorCase& c : cases)
        for (std::uint64_t seed = 0; seed < 8; ++seed) {
          const TensorMap<double> in = generate_backward_inputs(e.spec, c, 100 + seed);
          const Config cfg = Config::make(e.spec, c.config);
          Judge judge(e, in, cfg, Arith{Tier::mpfr, 256}, Direction::backward);
          ModelSpec ms;
          ms.form = Form::sequential_dg_sum;
          ms.direction = Direction::backward;
          ms.dtype = dtype;
          ms.seed = seed;
          const TensorMap<double> cand =
              run_layer(e, ms.form, Arith{dtype, 0}, in, cfg, 64, Direction::backward).values;
          const CheckResult r = judge(cand, ms);
          for (const TensorVerdict& t : r.tensors) {
            EXPECT_TRUE(t.pass) << layer << " " << tier_name(dtype) << " " << c.name << " seed " << seed << ": "
                                << t.name << " ratio " << t.max_ratio;
            if (t.max_ratio > worst) {
              worst = t.max_ratio;
              where = c.name + " seed " + std::to_string(seed) + " " + t.name;
            }
          }
          ++judged;
        }
      std::printf("sequential_dg_sum %s %s: %d checks, worst ratio %.3g (%s)\n", layer, tier_name(dtype), judged,
                  worst, where.c_str());
      EXPECT_GT(worst, 0.0);
    }
  }
}

}  // namespace
}  // namespace ttr::test
