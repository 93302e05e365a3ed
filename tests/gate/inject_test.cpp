// Injected errors (gate/inject.hpp) touch exactly the elements their shape names,
// by exactly the relative amount asked; the gate judges the same kernel outputs at
// every magnitude, a clean ladder rung (ε = 0) passes and a doubled output fails.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "gate/gate.hpp"
#include "gate/inject.hpp"
#include "oracles/error.hpp"
#include "oracles/registry.hpp"

namespace ttr::test {
namespace {

// o [B=2, T=5, H=3, V=2] with element e = e + 1, ht [B=2, H=3, K=1, V=2].
TensorMap<double> sample() {
  TensorMap<double> m;
  m["o"] = Tensor<double>({2, 5, 3, 2}, 0.0);
  m["ht"] = Tensor<double>({2, 3, 1, 2}, 0.0);
  for (auto& [name, t] : m)
    for (std::size_t e = 0; e < t.data.size(); ++e) t.data[e] = static_cast<double>(e + 1);
  return m;
}

std::vector<TensorSpec> outputs() {
  TensorSpec o, ht;
  o.name = "o";
  o.dims = {"B", "T", "H", "V"};
  ht.name = "ht";
  ht.dims = {"B", "H", "K", "V"};
  return {o, ht};
}

TEST(Inject, ShapesTouchExactlyTheirElements) {
  const double eps = 0.25;  // exact in binary: x(1 + ε) is exact for these integers
  {
    TensorMap<double> m = sample();
    inject_error(m, outputs(), InjectShape::scale, eps, 2, 0);
    for (const auto& [name, t] : m)
      for (std::size_t e = 0; e < t.data.size(); ++e) EXPECT_EQ(t.data[e], (e + 1) * 1.25) << name << e;
  }
  {
    TensorMap<double> m = sample();
    inject_error(m, outputs(), InjectShape::chunk_first_row, eps, 2, 0);
    const Tensor<double>& o = m.at("o");
    for (std::size_t e = 0; e < o.data.size(); ++e) {
      const std::size_t t = e / 6 % 5;  // 3 heads × 2 values per token
      EXPECT_EQ(o.data[e], (e + 1) * (t % 2 == 0 ? 1.25 : 1.0)) << e;  // t = 0, 2, 4 start chunks of 2
    }
    const Tensor<double>& ht = m.at("ht");
    for (std::size_t e = 0; e < ht.data.size(); ++e) EXPECT_EQ(ht.data[e], e + 1.0) << "states have no tokens";
  }
  {
    TensorMap<double> m = sample();
    inject_error(m, outputs(), InjectShape::one_head, eps, 2, 0);
    const Tensor<double>& o = m.at("o");
    for (std::size_t e = 0; e < o.data.size(); ++e) EXPECT_EQ(o.data[e], (e + 1) * (e / 2 % 3 == 0 ? 1.25 : 1.0)) << e;
    const Tensor<double>& ht = m.at("ht");
    for (std::size_t e = 0; e < ht.data.size(); ++e) EXPECT_EQ(ht.data[e], (e + 1) * (e / 2 % 3 == 0 ? 1.25 : 1.0));
  }
  {
    TensorMap<double> a = sample(), b = sample(), c = sample();
    inject_error(a, outputs(), InjectShape::noise, eps, 2, 7);
    inject_error(b, outputs(), InjectShape::noise, eps, 2, 7);
    inject_error(c, outputs(), InjectShape::noise, eps, 2, 8);
    std::set<double> factors;
    bool differs = false;
    for (const auto& [name, t] : a)
      for (std::size_t e = 0; e < t.data.size(); ++e) {
        factors.insert(t.data[e] / (e + 1.0));
        EXPECT_EQ(t.data[e], b.at(name).data[e]) << "same seed, same signs";
        differs = differs || t.data[e] != c.at(name).data[e];
      }
    EXPECT_EQ(factors, (std::set<double>{0.75, 1.25}));
    EXPECT_TRUE(differs) << "another seed draws other signs";
  }
  {
    TensorMap<double> m = sample();
    inject_error(m, outputs(), InjectShape::scale, 0.0, 2, 0);
    EXPECT_EQ(m.at("o").data, sample().at("o").data);
  }
  EXPECT_THROW(parse_inject_shape("sideways"), InputError);
  for (const std::string& n : inject_shape_names()) EXPECT_EQ(inject_shape_name(parse_inject_shape(n)), n);
}

TEST(Inject, GateJudgesEveryRungOfTheLadder) {
  GateOptions o;
  o.layers = {"linear_attn"};
  o.cases = {"small"};
  o.directions = {Direction::forward};
  o.seeds = 1;
  o.threads = 2;
  o.inject = InjectShape::scale;
  o.inject_magnitudes = {0.0, 1.0};
  const GateResult r = run_gate(o);
  ASSERT_FALSE(r.checks.empty());
  std::size_t clean = 0, doubled = 0;
  for (const GateCheck& c : r.checks) {
    if (c.id.ends_with("/inject=scale@0")) {
      ++clean;
      EXPECT_TRUE(c.result.pass) << c.id;  // the correct kernel, uninjected
    } else if (c.id.ends_with("/inject=scale@1")) {
      ++doubled;
      EXPECT_FALSE(c.result.pass) << c.id;  // every output doubled
    } else {
      ADD_FAILURE() << "unexpected check id " << c.id;
    }
  }
  EXPECT_EQ(clean, doubled);
  EXPECT_GT(clean, 0u);
  o.mutant = "causal-mask-strict";
  EXPECT_THROW(validate_gate_options(o), InputError);
}

}  // namespace
}  // namespace ttr::test
