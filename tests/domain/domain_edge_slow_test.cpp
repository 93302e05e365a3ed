// The domains' soundness on the `varlen` suite's FLA boundaries ([0, 15, 100, 300,
// 1200, 2000]: sequences to 800 tokens), tests/domain/domain_edge.hpp; the long
// sequences make it ~85 % of the generated cases' time, so it is the slow
// binary's; the other cases run in CI (tests/domain/domain_edge_test.cpp).
#include "tests/domain/domain_edge.hpp"

namespace ttr::test {
namespace {

using namespace domain_probe;

TEST(DomainEdgeSlow, FlaBoundariesAtTheDomainsEdgeStayInRange) {
  int checked = 0;
  for (const std::string& name : domain_layers()) {
    const EdgeCount n = edge_cases(name, "varlen", {"fla_boundaries"});
    checked += n.checked;
  }
  std::printf("domain: %d cases with FLA's boundaries at the domain's edge, none beyond its format\n", checked);
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace ttr::test
