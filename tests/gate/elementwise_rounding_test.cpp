// The error model's elementwise functions round once per argument
// (reference/core/mca.hpp; docs/error-model.md, "Elementwise functions"):
//
//  * within one Monte Carlo run, exp/log/sqrt at the same argument get the same
//    perturbation (as a kernel's rounding of the same value is the same), at other
//    arguments and in other runs different ones, within ±u; what the other
//    operations draw does not depend on the elementwise calls between them
//    (every perturbation is keyed on its own operation and operands:
//    tests/gate/repeated_operands_test.cpp);
//  * the finding this fixes: with a gate constant over the sequence, g_t =
//    bf16(−0.01), a bf16 kernel rounds e^{g} = 0.990040 to 0.988281 at every token
//    and the state's ~100-token memory turns that into a coherent error. The bf16
//    sequential backward of simple_gla — the definition with every operation
//    rounded, a correct kernel — was judged at ratio 10.6 on dg by the sweep-decay
//    study when the model drew exp's perturbations independently; it must pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/float16.hpp"
#include "reference/core/mca.hpp"

namespace ttr::test {
namespace {

TEST(McaElementwise, SameArgumentSameRoundingWithinARun) {
  const double u = std::ldexp(1.0, -8);
  mca_seed(11, u, McaFormat::bf16, 0.0, McaFormat::any);
  const double g = -0.010009765625;  // bf16(−0.01)
  const double e1 = exp(McaReal(g)).value();
  const double other = (McaReal(1.0 / 3) * McaReal(1.0 / 7)).value();  // a draw in between
  const double e2 = exp(McaReal(g)).value();
  EXPECT_EQ(e1, e2);
  EXPECT_NE(e1, std::exp(g));                              // perturbed ...
  EXPECT_LE(std::fabs(e1 / std::exp(g) - 1.0), u);         // ... within u
  EXPECT_NE(exp(McaReal(g * 2)).value() / std::exp(g * 2), e1 / std::exp(g));  // another argument
  EXPECT_NE(log(McaReal(0.3)).value(), std::log(0.3));
  EXPECT_EQ(log(McaReal(0.3)).value(), log(McaReal(0.3)).value());
  EXPECT_EQ(sqrt(McaReal(0.3)).value(), sqrt(McaReal(0.3)).value());
  EXPECT_NE(sqrt(McaReal(0.3)).value() / std::sqrt(0.3), log(McaReal(0.3)).value() / std::log(0.3));
  // Another run (seed): another rounding of the same argument.
  mca_seed(12, u, McaFormat::bf16, 0.0, McaFormat::any);
  EXPECT_NE(exp(McaReal(g)).value(), e1);
  // What the other operations draw does not depend on the arguments of the
  // elementwise calls between them.
  const auto draws = [&](double arg) {
    mca_seed(13, u, McaFormat::bf16, 0.0, McaFormat::any);
    const double a = (McaReal(1.0 / 3) * McaReal(1.0 / 7)).value();
    (void)exp(McaReal(arg));
    const double b = (McaReal(1.0 / 5) * McaReal(1.0 / 11)).value();
    return std::pair{a, b};
  };
  EXPECT_EQ(draws(-0.5), draws(-0.25));
  (void)other;
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
}

// The finding's case, longer: simple_gla, T = 256 (past the ~100-token memory of
// e^{−0.01}), K = V = 16, every gate bf16(−0.01); the bf16 sequential backward judged
// under its own (sequential, bf16) model against the MPFR oracle. With exp's
// perturbations drawn independently the dg ratios here were 9.76, 14.1 and 10.3
// (seeds 1–3: this test failed); with one rounding per argument the worst ratio of
// dq, dk, dv, dg is 2.49. A correct kernel must pass.
TEST(McaElementwise, ConstantGateBf16SequentialBackwardPasses) {
  const LayerEntry& e = find_layer("simple_gla");
  const Dims dims{{"B", 1}, {"T", 256}, {"H", 2}, {"K", 16}, {"V", 16}};
  double worst = 0.0;
  for (std::uint64_t seed : {1, 2, 3}) {
    TensorMap<double> in = generate_backward_inputs(e.spec, VectorCase{"constant_gate", "", dims, Regime{}, {}}, seed);
    for (double& x : in.at("g").data) x = BF16Format::round(-0.01);
    const Config cfg = Config::make(e.spec, {});
    Judge judge(e, in, cfg, Arith{Tier::mpfr, 256}, Direction::backward);
    ModelSpec ms;
    ms.form = Form::sequential;
    ms.direction = Direction::backward;
    ms.dtype = Tier::bf16;
    ms.seed = seed;
    const TensorMap<double> cand =
        run_layer(e, Form::sequential, Arith{Tier::bf16, 0}, in, cfg, 64, Direction::backward).values;
    const CheckResult r = judge(cand, ms);
    for (const TensorVerdict& t : r.tensors) {
      EXPECT_TRUE(t.pass) << "seed " << seed << ": " << t.name << " ratio " << t.max_ratio;
      worst = std::max(worst, t.max_ratio);
    }
  }
  EXPECT_GT(worst, 0.0);  // a bf16 kernel is not exact
  RecordProperty("worst_ratio", std::to_string(worst));
  std::printf("worst ratio over dq, dk, dv, dg, 3 seeds: %.3g\n", worst);
}

}  // namespace
}  // namespace ttr::test
