// Larger fuzzing campaigns (label `slow`, not in CI): NaN hunts of 10 000 cases on
// every chunk and scan form of every layer (KLA-K's scaled forms included; the
// unscaled reference forms are not swept), bf16 and fp32 policies, correct
// kernels — no non-finite kernel failure (range findings, gate/range.hpp, are
// counted and printed, not failures) — 30 campaigns, 300 000 cases, 0 failures
// and 0 range findings, 3 min 22 s on the loaded 2-core development machine
// (2026-11-25); and the ratio objective's local search
// finding a precision bug (kaczmarz-eps-outside, ≈ 17 fp32 unit roundoffs, which
// random default-gate inputs catch only in 6 of 10 checks).
#include <gtest/gtest.h>

#include <cstdio>

#include "fuzz/campaign.hpp"

namespace ttr::test {
namespace {

TEST(FuzzSlow, NoNanFindingOnAnyCorrectKernel) {
  for (const LayerEntry& e : registry())
    for (Form form : e.form_list()) {
      if (form == Form::sequential || !sweeps_by_default(form)) continue;
      for (const char* t : {"cpu:bf16", "cpu:fp32"}) {
        SCOPED_TRACE(e.spec.name + " " + form_name(form) + " " + t);
        const auto target = fuzz::make_target(fuzz::parse_target(t), e, form, 16, Mutant::none);
        fuzz::CampaignOptions o;
        o.budget.cases = 10000;
        o.seed = 5;
        const fuzz::CampaignResult r = fuzz::run_campaign(e, *target, o);
        EXPECT_EQ(r.last.nonfinite_cases, 0);
        std::printf("%-26s %-5s %s: %lld cases, %.1f cases/s, NaN/Inf failures %lld, range %lld, oracle non-finite %lld\n",
                    e.spec.name.c_str(), form_name(form), t, static_cast<long long>(r.last.cases),
                    r.last.cases / r.last.seconds, static_cast<long long>(r.last.nonfinite_cases),
                    static_cast<long long>(r.last.range_cases), static_cast<long long>(r.oracle_nonfinite_cases));
      }
    }
}

TEST(FuzzSlow, RatioSearchFindsAPrecisionBug) {
  const LayerEntry& layer = find_layer("kaczmarz_delta_rule");
  const auto target = fuzz::make_target(fuzz::parse_target("cpu:fp32"), layer, Form::chunk, 16,
                                        Mutant::kaczmarz_eps_outside);
  fuzz::CampaignOptions o;
  o.objective = fuzz::Objective::ratio;
  o.budget.cases = 200;
  o.seed = 3;
  const fuzz::CampaignResult r = fuzz::run_campaign(layer, *target, o);
  EXPECT_GT(r.best_ratio_confirmed, kRatioThreshold);
  bool ratio_finding = false;
  for (const fuzz::Finding& f : r.findings) ratio_finding |= f.kind != fuzz::FindingKind::oracle_nonfinite && !f.check.pass;
  EXPECT_TRUE(ratio_finding);
  std::printf("kaczmarz-eps-outside fp32: best ratio %.3g screened, %.3g confirmed, first finding at case %lld\n",
              r.last.best_ratio, r.best_ratio_confirmed, static_cast<long long>(r.first_finding_case));
}

}  // namespace
}  // namespace ttr::test
