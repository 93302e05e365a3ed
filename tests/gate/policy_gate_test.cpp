// The foreign policies in the gate (gate/policies.hpp, `gate --policy`): each runs the
// CPU forms in its concrete arithmetic (concrete_tier: tf32 → the tf32 tier, fp32
// compute with TF32 at every narrow point; bf16-storage → the bf16 tier) and judges
// them under its own model. Checked here: the tf32 tier rounds to TF32 where it narrows
// (its outputs lie on the TF32 grid, an independent rounding computed in double agrees
// with Tf32Policy), correct kernels of each policy pass under it and fail under the
// smaller models (so a pass means the policy's model, not a loose judge), the gate's
// ids and reports name the policy, and what the gate cannot run is refused in one line.
// The calibration over many seeds is the slow test (gate_calibration_slow_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gate/gate.hpp"
#include "gate/judge.hpp"
#include "gate/policies.hpp"
#include "oracles/error.hpp"
#include "oracles/oracle.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/tf32_policy.hpp"

namespace ttr::test {
namespace {

// x rounded to 11 significant bits, nearest even, in double arithmetic: frexp's
// mantissa in [0.5, 1) scaled by 2^11 is an integer after rounding (nearbyint rounds
// halves to even under the default rounding mode). Independent of policy.hpp's bit
// manipulation; normal floats only.
double tf32_by_scaling(double x) {
  int e = 0;
  const double m = std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11);
}

bool on_tf32_grid(double x) {
  const float f = static_cast<float>(x);
  if (static_cast<double>(f) != x) return false;
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x1FFFu) == 0;
}

Dims small_dims() { return {{"B", 1}, {"T", 77}, {"H", 2}, {"K", 16}, {"V", 16}, {"N", 16}, {"D", 16}}; }

TEST(PolicyGate, Tf32PolicyRoundsToNearestEvenTf32) {
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 20000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint32_t bits = static_cast<std::uint32_t>(s >> 32) & 0xBFFFFFFFu;  // |x| below 2 · 2^63: normal, finite
    float x;
    std::memcpy(&x, &bits, 4);
    if (!std::isnormal(x)) continue;
    ASSERT_EQ(static_cast<double>(Tf32Policy::narrow(x)), tf32_by_scaling(x)) << x;
  }
  // Ties go to the even neighbour: 1 + 2^-11 is half-way between 1 and 1 + 2^-10.
  EXPECT_EQ(Tf32Policy::narrow(1.0f + std::ldexp(1.0f, -11)), 1.0f);
  EXPECT_EQ(Tf32Policy::narrow(-1.0f - 3 * std::ldexp(1.0f, -11)), -1.0f - std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isinf(Tf32Policy::narrow(INFINITY)));
  EXPECT_TRUE(std::isnan(Tf32Policy::narrow(NAN)));
}

TEST(PolicyGate, Tf32TierOutputsLieOnTheTf32GridAndFp32OnesDoNot) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  const VectorCase vc{"small", "", small_dims(), {}, gate_config(e.spec)};
  const TensorMap<double> in = generate_inputs(e.spec, vc, 7);
  const Config cfg = Config::make(e.spec, vc.config);
  const TensorMap<double> t = run_layer(e, Form::chunk, {Tier::tf32, 0}, in, cfg, 16).values;
  const TensorMap<double> f = run_layer(e, Form::chunk, {Tier::fp32, 0}, in, cfg, 16).values;
  std::size_t off_grid = 0, n = 0;
  for (double x : t.at("o").data) EXPECT_TRUE(on_tf32_grid(x)) << x;  // o is narrowed, as the form states
  for (double x : f.at("o").data) off_grid += on_tf32_grid(x) ? 0 : 1, ++n;
  EXPECT_GT(off_grid, n / 2);  // an fp32 run's outputs mostly use the low 13 bits
  // The sequential form narrows nothing: the tier does not serve it.
  EXPECT_THROW(e.runner(Form::sequential, Tier::tf32), InputError);
}

double worst(const CheckResult& r) {
  double w = 0.0;
  for (const TensorVerdict& v : r.tensors)
    if (v.present) w = std::max(w, v.nonfinite_failures ? INFINITY : v.max_ratio);
  return w;
}

// One unit by hand, as the gate runs it: the candidate of `run` judged under `judged`.
CheckResult judge_as(const char* layer, Direction d, Tier run, PolicyChoice judged) {
  const LayerEntry& e = find_layer(layer);
  const VectorCase vc{"small", "", small_dims(), {}, gate_config(e.spec)};
  const TensorMap<double> in = d == Direction::backward ? generate_backward_inputs(e.spec, vc, 1003)
                                                        : generate_inputs(e.spec, vc, 1003);
  const Config cfg = Config::make(e.spec, vc.config);
  Judge judge(e, in, cfg, {Tier::mpfr, 256}, d);
  return judge(run_layer(e, Form::chunk, {run, 0}, in, cfg, 16, d).values,
               policy_model(Form::chunk, d, judged, 16, 1003));
}

// A TF32 kernel passes as tf32 and is far outside fp32's model; a kernel storing in
// bf16 passes as bf16-storage, and measured by tf32's model its error is larger (bf16's
// u is 2^2 times the tf32 model's one-ulp 2^-10; measured 2.1–3.5× on these cases, and
// its ratios there land on either side of the threshold, so the check is the factor,
// not a verdict). Forward and backward, a scalar-gate and a per-key-gate layer.
TEST(PolicyGate, ConcreteArithmeticsPassTheirPolicyAndFailTheSmallerOne) {
  const PolicyChoice fp32 = parse_policy("fp32"), tf32 = parse_policy("tf32"), storage = parse_policy("bf16-storage");
  for (const char* layer : {"gated_delta_rule", "kda"})
    for (const Direction d : {Direction::forward, Direction::backward}) {
      const std::string at = std::string(layer) + " " + direction_name(d);
      const CheckResult t_as_t = judge_as(layer, d, concrete_tier(tf32), tf32);
      const CheckResult t_as_f = judge_as(layer, d, concrete_tier(tf32), fp32);
      const CheckResult s_as_s = judge_as(layer, d, concrete_tier(storage), storage);
      const CheckResult s_as_t = judge_as(layer, d, concrete_tier(storage), tf32);
      std::printf("%s: tf32 run as tf32 %.3g, as fp32 %.3g; bf16-storage run as bf16-storage %.3g, as tf32 %.3g\n",
                  at.c_str(), worst(t_as_t), worst(t_as_f), worst(s_as_s), worst(s_as_t));
      EXPECT_TRUE(t_as_t.pass) << at << " " << worst(t_as_t);
      EXPECT_GT(worst(t_as_f), 100.0) << at;  // TF32's ulp is 2^14 fp32's u: far past the threshold 8
      EXPECT_TRUE(s_as_s.pass) << at << " " << worst(s_as_s);
      EXPECT_GT(worst(s_as_t), 1.5 * worst(s_as_s)) << at;
    }
}

TEST(PolicyGate, GateRunsAndNamesTheGivenPolicies) {
  GateOptions o;
  o.layers = {"linear_attn", "gated_delta_rule"};
  o.cases = {"small"};
  o.seeds = 1;
  o.seed = 2000;
  o.threads = 2;
  o.policies = {parse_policy("tf32"), parse_policy("bf16-storage"), parse_policy("fp16")};
  const GateResult r = run_gate(o);
  EXPECT_TRUE(r.pass);
  std::size_t per[3] = {0, 0, 0};
  for (const GateCheck& c : r.checks) {
    EXPECT_TRUE(c.result.pass) << c.id << " " << worst(c.result);
    const std::string p = c.id.substr(c.id.find('/', c.id.find('/') + 1) + 1);  // after layer/form/
    if (p.starts_with("tf32/")) {
      ++per[0];
      EXPECT_EQ(c.result.policy, Policy::tf32) << c.id;
      EXPECT_EQ(c.result.dtype, Tier::fp32) << c.id;
    } else if (p.starts_with("bf16-storage/")) {
      ++per[1];
      EXPECT_EQ(c.result.policy, Policy::bf16_storage) << c.id;
    } else if (p.starts_with("fp16/")) {
      ++per[2];
      EXPECT_EQ(c.result.dtype, Tier::fp16) << c.id;
    } else {
      ADD_FAILURE() << "unexpected policy in " << c.id;
    }
  }
  // linear_attn: chunk, scan; gated_delta_rule: chunk — forward and backward each.
  EXPECT_EQ(per[0], per[1]);
  EXPECT_EQ(per[0], per[2]);
  EXPECT_GE(per[0], 4u);
}

TEST(PolicyGate, DuplicateAndDevicePoliciesAreRefused) {
  GateOptions o;
  o.policies = {parse_policy("tf32"), parse_policy("tf32")};
  try {
    validate_gate_options(o);
    ADD_FAILURE() << "a policy given twice was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--policy tf32 given twice");
  }
  o.policies = {parse_policy("fp32"), parse_policy("bf16-storage")};
  o.backend = Backend::cuda;
  EXPECT_THROW(validate_gate_options(o), InputError);
  o.policies = {parse_policy("bf16")};
  EXPECT_NO_THROW(validate_gate_options(o));
  EXPECT_TRUE(device_policy(parse_policy("fp32")));
  EXPECT_FALSE(device_policy(parse_policy("fp16")));
  EXPECT_FALSE(device_policy(parse_policy("tf32")));
}

}  // namespace
}  // namespace ttr::test
