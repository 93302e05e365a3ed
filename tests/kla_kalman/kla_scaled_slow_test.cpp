// The 10 000-case NaN hunt on KLA-K's scaled forms (label `slow`): every
// generator family, kla_zero_noise (p̄ = 0, ā down to 1e-24, λv up to 1e6) among
// them; no NaN/Inf where the oracle is finite, and no range finding either (the
// scaled representation has no intermediate beyond fp32 for these inputs:
// docs/kla-scaled.md). The CI-sized version is KlaScaled.NanHuntFindsNothingOnScaledForms.
#include <gtest/gtest.h>

#include <cstdio>

#include "fuzz/campaign.hpp"

namespace ttr::test {
namespace {

TEST(KlaScaledSlow, TenThousandCaseNanHuntFindsNothing) {
  const LayerEntry& e = find_layer("kla_kalman");
  for (Form form : {Form::chunk, Form::scan})
    for (const char* t : {"cpu:bf16", "cpu:fp32"}) {
      SCOPED_TRACE(std::string(form_name(form)) + " " + t);
      const auto target = fuzz::make_target(fuzz::parse_target(t), e, form, 16, Mutant::none);
      fuzz::CampaignOptions o;
      o.budget.cases = 10000;
      o.seed = 11;
      const fuzz::CampaignResult r = fuzz::run_campaign(e, *target, o);
      EXPECT_EQ(r.last.nonfinite_cases, 0);
      EXPECT_EQ(r.last.range_cases, 0);
      std::printf("kla_kalman %-5s %s: %lld cases in %.1f s, NaN/Inf %lld, range %lld, oracle non-finite %lld\n",
                  form_name(form), t, static_cast<long long>(r.last.cases), r.last.seconds,
                  static_cast<long long>(r.last.nonfinite_cases), static_cast<long long>(r.last.range_cases),
                  static_cast<long long>(r.oracle_nonfinite_cases));
    }
}

}  // namespace
}  // namespace ttr::test
