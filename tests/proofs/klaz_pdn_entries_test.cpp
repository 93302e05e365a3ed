// KLA-Z and PDN catalogue entries: every entry reproduces its recorded status
// at the default options, fails_as_printed / holds_with_correction entries show
// a printed discrepancy far above working precision with the correction
// holding, and every required (paper, ref) is covered.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "proofs-checks/catalogue.hpp"

namespace ttr::proofs {
namespace {

void run_all(const std::vector<Entry>& entries) {
  const RunOptions opt;
  for (const Entry& e : entries) {
    SCOPED_TRACE(e.id);
    ASSERT_TRUE(static_cast<bool>(e.check));
    const Result r = run_entry(e, opt);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_TRUE(r.evidence.reproduced) << "discrepancy " << r.evidence.discrepancy << " tolerance "
                                       << r.evidence.tolerance << " (" << r.evidence.measure << ") witness "
                                       << r.evidence.witness << " detail " << r.evidence.detail;
    // nominal budget < 1 s per entry (≈ 0.8 s at most on a loaded 2-core machine); 5 s flags a real regression
    EXPECT_LT(r.seconds, 5.0) << "fast run too slow";
    if (e.status == Status::fails_as_printed || e.status == Status::holds_with_correction) {
      ASSERT_TRUE(r.evidence.printed_discrepancy.has_value());
      EXPECT_GE(*r.evidence.printed_discrepancy, 1e-8);
      EXPECT_LE(r.evidence.discrepancy, r.evidence.tolerance);
      EXPECT_FALSE(e.correction.empty());
    }
  }
}

TEST(KlaZEntries, AllReproduce) { run_all(kla_z_entries()); }
TEST(PdnEntries, AllReproduce) { run_all(pdn_entries()); }

TEST(KlaZPdnEntries, CoverTheRequiredRefs) {
  EXPECT_NO_THROW(catalogue());  // unique ids, checks present, corrections stated
  std::set<std::string> kz, pdn;
  for (const Entry& e : kla_z_entries()) {
    EXPECT_EQ(e.paper, Paper::KLA_Z) << e.id;
    EXPECT_EQ(e.id.rfind("kla_z.", 0), 0u) << e.id;
    kz.insert(e.ref);
  }
  for (const Entry& e : pdn_entries()) {
    EXPECT_EQ(e.paper, Paper::PDN) << e.id;
    EXPECT_EQ(e.id.rfind("pdn.", 0), 0u) << e.id;
    pdn.insert(e.ref);
  }
  for (const char* ref : {"eq. (2)", "Thm 1 (i)", "Thm 1 (ii)", "Thm 1 (iii)", "Prop. 1", "Prop. 2", "eq. (5)",
                          "Prop. 3", "Prop. 4", "Prop. 5", "Prop. 6", "App. B.4"})
    EXPECT_TRUE(kz.count(ref)) << "KLA-Z " << ref;
  for (const char* ref : {"Thm 3.1", "Thm C.1", "Thm C.2", "App. C.3", "Thm 3.2", "Thm C.5", "eq. (C.5.2)", "eq. (8)",
                          "Lemma E.1", "Lemma E.2", "Lemma E.3"})
    EXPECT_TRUE(pdn.count(ref)) << "PDN " << ref;
}

}  // namespace
}  // namespace ttr::proofs
