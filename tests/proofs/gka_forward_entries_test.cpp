// The GKA forward entries of the proof-check catalogue (proofs-checks/gka/forward*.cpp):
// the required paper references are covered and the known misprints recorded as
// such (that every entry reproduces is tests/proofs/catalogue_test.cpp's job).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "proofs-checks/catalogue.hpp"
#include "proofs-checks/gka/gka.hpp"

namespace {

using namespace ttr::proofs;

TEST(GkaForwardEntries, CoverTheRequiredReferences) {
  std::set<std::string> refs, ids;
  for (const Entry& e : gka_forward_entries()) {
    EXPECT_EQ(e.paper, Paper::GKA);
    EXPECT_TRUE(ids.insert(e.id).second) << "duplicate id " << e.id;
    refs.insert(e.ref);
  }
  for (const char* ref : {"eq. (3)", "eq. (KF)", "eq. (4)", "eq. (5)", "eq. (CH)", "Lemma 3", "Lemma 4", "Remark 1",
                          "Alg. 1", "Sec. 4.2", "eq. (17)", "eq. (19)", "docs/layers.md gka"})
    EXPECT_TRUE(refs.count(ref)) << ref;
}

// The known misprints are recorded as such (a change of status must be deliberate).
TEST(GkaForwardEntries, KnownMisprintsAreRecorded) {
  auto status_of = [](const std::string& id) {
    for (const Entry& e : gka_forward_entries())
      if (e.id == id) return e.status;
    ADD_FAILURE() << "no entry " << id;
    return Status::not_checkable;
  };
  EXPECT_EQ(status_of("gka.alg1.line2_omega0"), Status::fails_as_printed);
  EXPECT_EQ(status_of("gka.sec42.chunk_matvec"), Status::fails_as_printed);
  EXPECT_EQ(status_of("gka.eq5.write_gate"), Status::holds_with_correction);
  EXPECT_EQ(status_of("gka.layers.zero_state"), Status::holds_with_correction);
}

}  // namespace
