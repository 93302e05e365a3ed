// The fuzzer's varlen_boundaries family (fuzz/generators.cpp): valid offsets
// (0 .. T, non-decreasing, B = 1, initial states [N, ...]) that hit the places
// varlen kernels break — boundaries on a chunk edge and one token either side,
// one-token and empty sequences — and that local search leaves valid.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "fuzz/generators.hpp"
#include "oracles/registry.hpp"
#include "oracles/varlen.hpp"

namespace ttr::test {
namespace {

TEST(VarlenFuzz, BoundariesAreValidAndAdversarial) {
  const LayerEntry& e = find_layer("gated_delta_rule");
  const std::vector<std::string> families = fuzz::families_for(e.spec);
  ASSERT_TRUE(std::count(families.begin(), families.end(), "varlen_boundaries"));
  fuzz::GeneratorOptions opt;
  opt.chunk = 16;
  std::set<std::string> seen;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE(seed);
    const fuzz::Case c = fuzz::generate_case(e.spec, "varlen_boundaries", opt, seed);
    const std::vector<std::int64_t> cu = cu_seqlens_of(c.inputs);
    ASSERT_GE(cu.size(), 2u);
    const std::int64_t T = c.inputs.at("q").shape.at(1);
    EXPECT_EQ(c.inputs.at("q").shape.at(0), 1);
    EXPECT_EQ(cu.front(), 0);
    EXPECT_EQ(cu.back(), T);
    for (std::size_t i = 1; i < cu.size(); ++i) {
      ASSERT_GE(cu[i], cu[i - 1]);
      const std::int64_t len = cu[i] - cu[i - 1], b = cu[i];
      if (len == 0) seen.insert("empty");
      if (len == 1) seen.insert("single");
      if (i + 1 < cu.size() && b > 0 && b % 16 == 0) seen.insert("on edge");
      if (i + 1 < cu.size() && b % 16 == 1) seen.insert("one past");
      if (i + 1 < cu.size() && b % 16 == 15) seen.insert("one before");
    }
    if (c.inputs.count("h0")) {
      EXPECT_EQ(c.inputs.at("h0").shape.at(0), static_cast<std::int64_t>(cu.size()) - 1);
    }
    // It runs (the slicer re-checks the offsets) and a local-search neighbour keeps them.
    EXPECT_NO_THROW(run_layer(e, Form::chunk, {Tier::fp64, 0}, c.inputs, Config::make(e.spec, c.config), 16));
    const fuzz::Case m = fuzz::mutate_case(e.spec, c, seed + 1000);
    EXPECT_EQ(cu_seqlens_of(m.inputs), cu);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"empty", "single", "on edge", "one past", "one before"}));
}

}  // namespace
}  // namespace ttr::test
