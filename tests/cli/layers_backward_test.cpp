// `ttrcheck layers` lists, per layer, the backward direction's cotangents and
// gradients, which inputs are differentiable (and why not, where one is not), and
// says that config keys get no gradient (issue 16's interface). The gradient lists
// of gated_delta_rule and kla_kalman are written out by hand from the issue and
// docs/gradients.md; every layer's list must be d<input> for exactly its
// differentiable inputs, in input order.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "oracles/registry.hpp"
#include "tests/support/cli.hpp"

namespace {

using ttr::test::CliResult;
using ttr::test::run_cli;

std::vector<std::string> names_of(const nlohmann::json& a) {
  std::vector<std::string> n;
  for (const auto& t : a) n.push_back(t.at("name").get<std::string>());
  return n;
}

TEST(LayersBackward, JsonListsGradientsOfExactlyTheDifferentiableInputs) {
  const CliResult r = run_cli({"layers", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), ttr::registry().size());
  for (const auto& l : j) {
    const std::string layer = l.at("name").get<std::string>();
    SCOPED_TRACE(layer);
    ASSERT_TRUE(l.contains("backward")) << "every layer has a backward direction";
    std::vector<std::string> want;
    for (const auto& in : l.at("inputs")) {
      ASSERT_TRUE(in.contains("differentiable")) << in.at("name");
      if (in.at("differentiable").get<bool>())
        want.push_back("d" + in.at("name").get<std::string>());
      else
        EXPECT_FALSE(in.value("not_differentiable_why", std::string()).empty()) << in.at("name") << ": no reason";
    }
    EXPECT_EQ(names_of(l.at("backward").at("gradients")), want);
    const auto cot = names_of(l.at("backward").at("cotangents"));
    ASSERT_FALSE(cot.empty());
    EXPECT_EQ(cot.front(), "do");
    EXPECT_TRUE(l.at("backward").at("cotangents").front().at("required").get<bool>());
  }
  const auto gradients = [&](const std::string& layer) {
    for (const auto& l : j)
      if (l.at("name") == layer) return names_of(l.at("backward").at("gradients"));
    return std::vector<std::string>{};
  };
  EXPECT_EQ(gradients("gated_delta_rule"), (std::vector<std::string>{"dq", "dk", "dv", "dg", "dbeta", "dh0"}));
  EXPECT_EQ(gradients("kla_kalman"), (std::vector<std::string>{"dq", "dk", "dv", "dlambda_v", "da_bar", "dp_bar",
                                                               "dlambda_init", "deta_init"}));
}

TEST(LayersBackward, TextNamesCotangentsGradientsAndConfiguration) {
  const CliResult r = run_cli({"layers", "--layer", "kla_kalman"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("backward (--backward): cotangents do, do_var?, dlambda_T?, deta_T? (? optional) -> gradients "
                       "dq, dk, dv, dlambda_v, da_bar, dp_bar, dlambda_init, deta_init; config keys are configuration "
                       "and get no gradient"),
            std::string::npos)
      << r.out;
}

}  // namespace
