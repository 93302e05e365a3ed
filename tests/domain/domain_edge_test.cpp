// The domains' soundness on generated cases, one test per layer
// (tests/domain/domain_edge.hpp says what is checked): the `tiny` suite and the
// short cases of the `varlen` suite (boundaries on a chunk edge and one past it,
// empty and one-token sequences). FLA's boundaries (T = 2000, ~85 % of the time)
// are the slow binary's (tests/domain/domain_edge_slow_test.cpp).
#include "tests/domain/domain_edge.hpp"

namespace ttr::test {
namespace {

using namespace domain_probe;

class DomainEdge : public ::testing::TestWithParam<std::string> {};

TEST_P(DomainEdge, GeneratedCasesAtTheDomainsEdgeStayInRange) {
  const EdgeCount tiny = edge_cases(GetParam(), "tiny");
  const EdgeCount varlen = edge_cases(GetParam(), "varlen", {"chunk_edges", "empty_sequences", "single_tokens"});
  // Every layer is checked somewhere inside its domain, not only declared outside it.
  EXPECT_GT(tiny.checked, 10) << GetParam();
  EXPECT_GT(varlen.checked, 10) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Layers, DomainEdge, ::testing::ValuesIn(domain_layers()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ttr::test
