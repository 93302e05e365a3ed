// Range classification of non-finite failures (gate/range.hpp, docs/error-model.md
// "Range findings"), on hand-built inputs whose exact intermediates are derived here:
//
//  * GDN near overflow (the finding of `ttrcheck fuzz --layer gated_delta_rule
//    --target cpu:bf16 --objective ratio --budget 60s --seed 7`: inputs ~4e37 whose
//    fp32 intermediates overflow while the output is representable), rebuilt at
//    T = 2: q = k = e₁, g = 0, β = 1, v₁ = 2^127, v₂ = −2^127 (bf16 values). In the
//    chunk form A = [[0, 0], [1, 0]] (β k₂·k₁ = 1), (I + A)⁻¹ = [[1, 0], [−1, 1]],
//    so U₂ = v₂ − v₁ = −2^128: beyond fp32's 3.40e38 = (2 − 2^-23)·2^127, an
//    overflow of the accumulation of U = (I + A)⁻¹(β ⊙ V). The exact outputs are
//    representable: the delta rule with β = 1 and a repeated unit key overwrites,
//    S_t = k v_tᵀ, so o_t = scale·v_t (|o| = 2^127/√2) and ht = e₁ v₂ᵀ.
//    Classified `range`, naming the U intermediate; a pass by default, a failure
//    with strict_range.
//  * The planted overflow bug `gate-exp-unmasked` (gate/mutants.cpp): g = (0, −100),
//    q = k = v = 0. The mutant forms e^{b_t − b_s} for every pair, e^{100} ≈ 2.7e43
//    overflows fp32 and inf·0 = NaN, where the truth is 0. The correct chunk form
//    forms only s ≤ t (e^{−100} ≥ 0, no overflow): not a range finding — a failure.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "fuzz/campaign.hpp"
#include "gate/judge.hpp"
#include "gate/range.hpp"
#include "gate/report.hpp"
#include "oracles/registry.hpp"
#include "reference/core/mutant.hpp"

namespace ttr::test {
namespace {

TensorMap<double> gdn_inputs(double v1, double v2, double g2) {
  TensorMap<double> in;
  const std::int64_t T = 2, K = 2, V = 2;
  in["q"] = Tensor<double>({1, T, 1, K}, 0.0);
  in["k"] = Tensor<double>({1, T, 1, K}, 0.0);
  in["v"] = Tensor<double>({1, T, 1, V}, 0.0);
  in["g"] = Tensor<double>({1, T, 1}, 0.0);
  in["beta"] = Tensor<double>({1, T, 1}, 1.0);
  in["g"].data[1] = g2;
  if (v1 != 0 || v2 != 0) {
    for (std::int64_t t = 0; t < T; ++t) {
      in["q"].data[static_cast<std::size_t>(t * K)] = 1.0;
      in["k"].data[static_cast<std::size_t>(t * K)] = 1.0;
    }
    for (std::int64_t j = 0; j < V; ++j) {
      in["v"].data[static_cast<std::size_t>(j)] = v1;
      in["v"].data[static_cast<std::size_t>(V + j)] = v2;
    }
  }
  return in;
}

std::int64_t nonfinite_failures(const CheckResult& r) {
  std::int64_t n = 0;
  for (const TensorVerdict& v : r.tensors) n += v.nonfinite_failures;
  return n;
}

ModelSpec bf16_chunk() {
  ModelSpec ms;
  ms.form = Form::chunk;
  ms.dtype = Tier::bf16;
  ms.chunk_size = 16;
  return ms;
}

TEST(Range, GdnNearOverflowIsARangeFinding) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  const TensorMap<double> in = gdn_inputs(0x1p127, -0x1p127, 0.0);
  const Config cfg = Config::make(e.spec, {});
  Judge judge(e, in, cfg);
  // The truth is representable: o_t = v_t/√2, ht = e₁ v₂ᵀ.
  const TensorMap<double>& oracle = judge.oracle();
  EXPECT_DOUBLE_EQ(oracle.at("o").data[0], 0x1p127 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(oracle.at("o").data[2], -0x1p127 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(oracle.at("ht").data[0], -0x1p127);
  const TensorMap<double> cand = run_layer(e, Form::chunk, {Tier::bf16, 0}, in, cfg, 16).values;
  ASSERT_FALSE(std::isfinite(cand.at("o").data[2])) << "U₂ = −2^128 overflows fp32: the kernel's o₂ is not finite";

  const CheckResult r = judge(cand, bf16_chunk());
  EXPECT_GT(nonfinite_failures(r), 0);
  ASSERT_TRUE(r.range.beyond);
  EXPECT_EQ(r.range.intermediate, "W = (I + A)⁻¹ (β ⊙ K ⊙ e^{b}), U = (I + A)⁻¹ (β ⊙ V)");
  EXPECT_EQ(r.range.format, "fp32");
  EXPECT_EQ(r.range.value, -0x1p128);  // exactly v₂ − v₁
  EXPECT_EQ(r.range.limit, 0x1.fffffep127);
  EXPECT_TRUE(r.range_excused);
  EXPECT_TRUE(r.pass);
  EXPECT_STREQ(verdict_name(r), "range");
  EXPECT_EQ(check_json("id", r).at("range").at("excused"), true);

  judge.set_strict_range(true);
  const CheckResult strict = judge(cand, bf16_chunk());
  EXPECT_TRUE(strict.range.beyond);
  EXPECT_FALSE(strict.pass);
  EXPECT_STREQ(verdict_name(strict), "fail");

  // Half the magnitude: U₂ = −2^127 fits, nothing is beyond, and the check passes outright.
  const TensorMap<double> half = gdn_inputs(0x1p126, -0x1p126, 0.0);
  EXPECT_FALSE(trace_range(e, half, cfg, bf16_chunk()).beyond);
}

TEST(Range, PlantedOverflowBugStaysAFailure) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  const TensorMap<double> in = gdn_inputs(0, 0, -100.0);
  const Config cfg = Config::make(e.spec, {});
  TensorMap<double> cand;
  {
    const MutantScope bug(Mutant::gate_exp_unmasked);
    cand = run_layer(e, Form::chunk, {Tier::bf16, 0}, in, cfg, 16).values;
  }
  // The pair (t, s) = (0, 1) above the diagonal: e^{b_0 − b_1} = e^{100} = inf, times the mask's 0.
  ASSERT_TRUE(std::isnan(cand.at("o").data[0])) << "e^{100}·0 = NaN in the mutated kernel";
  Judge judge(e, in, cfg);
  const CheckResult r = judge(cand, bf16_chunk());
  EXPECT_GT(nonfinite_failures(r), 0);
  EXPECT_FALSE(r.range.beyond) << r.range.intermediate;
  EXPECT_FALSE(r.pass);
  // The trace runs the correct form even when called inside the mutant's scope.
  const MutantScope bug(Mutant::gate_exp_unmasked);
  EXPECT_FALSE(trace_range(e, in, cfg, bf16_chunk()).beyond);
}

// The fuzz campaign: a NaN hunt with the planted bug gives `nonfinite` findings
// (kernel failures), never `range` ones.
TEST(Range, FuzzerKeepsPlantedBugAsKernelFailure) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  const auto target = fuzz::make_target(fuzz::parse_target("cpu:bf16"), e, Form::chunk, 16, Mutant::gate_exp_unmasked);
  fuzz::CampaignOptions o;
  o.budget.cases = 120;
  o.seed = 1;
  o.minimise = false;
  const fuzz::CampaignResult r = fuzz::run_campaign(e, *target, o);
  EXPECT_GT(r.last.nonfinite_cases, 0);
  EXPECT_EQ(r.last.range_cases, 0);
}

}  // namespace
}  // namespace ttr::test

namespace ttr::test {
namespace {

// An infinity of the right sign where the truth is within threshold × (modelled
// error + u·|truth|) of the dtype's largest value is a correct kernel's rounding
// carried past the top (docs/error-model.md, "Non-finite values"); anywhere
// else, or with the wrong sign, a failure. bf16: top 3.3895e38, u = 2^-8,
// threshold 8: u·8 = 3.1 %, so 3.3e38 with no modelled error is accepted
// (3.3e38·1.031 > top), 3.2e38 is not (3.30e38 < top) unless the row's model
// says 2e36 (3.2e38 + 8·(2e36 + 1.25e36) = 3.46e38 > top).
TEST(Range, InfinityWithinTheModelledErrorOfTheTopIsNotAFailure) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  const TensorSpec& ht = *e.spec.output("ht");
  LayerSpec only_ht = e.spec;
  only_ht.outputs = {ht};
  const auto verdict = [&](double truth, double cand, double rms) {
    const TensorMap<double> oracle{{"ht", Tensor<double>({1, 1, 1, 1}, truth)}};
    const TensorMap<double> candidate{{"ht", Tensor<double>({1, 1, 1, 1}, cand)}};
    ErrorModel m;
    m.spec.dtype = Tier::bf16;
    m.u = unit_roundoff(Tier::bf16);
    m.rms["ht"] = Tensor<double>({1}, rms);
    return compare(only_ht, oracle, m, candidate).tensors.at(0);
  };
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(verdict(3.3e38, inf, 0.0).pass);
  EXPECT_FALSE(verdict(3.2e38, inf, 0.0).pass);
  EXPECT_TRUE(verdict(3.2e38, inf, 2e36).pass);
  EXPECT_FALSE(verdict(3.3e38, -inf, 0.0).pass) << "wrong sign";
  EXPECT_FALSE(verdict(3.3e38, std::nan(""), 0.0).pass) << "a NaN is never faithful";
  EXPECT_EQ(verdict(3.3e38, inf, 0.0).nonfinite_failures, 0);
}

}  // namespace
}  // namespace ttr::test
