// Calibration of kla_kalman's chunk and scan backward forms (reference/kla_kalman/
// scan_backward.hpp) against their gradient error model (gate/error_model.hpp,
// direction backward): correct kernels must pass. 500 seeds × the tiny suite's 2
// cases = 1000 input sets per form and dtype (issue 17's calibration size), ×
// {scan, chunk (C = 2: odd T gives a partial chunk)} × {bf16, fp32} = 4000 checks
// against the MPFR-256 oracle, zero failures; the distribution of the worst
// gradient ratio per check is printed (docs/gradients.md quotes it). Label slow:
// about a minute on the shared 2-core machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"

namespace ttr {
namespace {

TEST(KlaScanBackwardCalibration, CorrectKernelsPassTheirGradientModelOn4000Checks) {
  const LayerEntry& e = find_layer("kla_kalman");
  const std::vector<VectorCase> cases = suite_cases(e.spec, "tiny");
  std::vector<double> worst;
  int failures = 0;
  for (std::uint64_t seed = 1; seed <= 500; ++seed)
    for (const VectorCase& c : cases) {
      const TensorMap<double> in = generate_backward_inputs(e.spec, c, seed);
      const Config cfg = Config::make(e.spec, c.config);
      Judge judge(e, in, cfg, Arith{Tier::mpfr, 256}, Direction::backward);
      for (Form form : {Form::scan, Form::chunk})
        for (Tier dtype : {Tier::bf16, Tier::fp32}) {
          ModelSpec ms;
          ms.form = form;
          ms.direction = Direction::backward;
          ms.dtype = dtype;
          ms.chunk_size = 2;
          const TensorMap<double> cand =
              run_layer(e, form, Arith{dtype, 0}, in, cfg, ms.chunk_size, Direction::backward).values;
          const CheckResult r = judge(cand, ms);
          double w = 0.0;
          for (const TensorVerdict& t : r.tensors) w = std::max(w, t.max_ratio);
          worst.push_back(w);
          if (!r.pass) {
            ++failures;
            ADD_FAILURE() << form_name(form) << " " << tier_name(dtype) << " " << c.name << " seed " << seed
                          << ": worst ratio " << w;
          }
        }
    }
  EXPECT_EQ(worst.size(), 4000u);
  EXPECT_EQ(failures, 0);
  std::sort(worst.begin(), worst.end());
  const auto q = [&](double p) { return worst[static_cast<std::size_t>(p * static_cast<double>(worst.size() - 1))]; };
  std::printf("kla_kalman chunk/scan backward, %zu checks: worst ratio per check median %.3g, p99 %.3g, max %.3g\n",
              worst.size(), q(0.5), q(0.99), worst.back());
}

}  // namespace
}  // namespace ttr
