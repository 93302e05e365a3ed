// Every catalogue entry, slow ones included, at full effort (label slow).
#include <gtest/gtest.h>

#include "proofs-checks/catalogue.hpp"

namespace ttr::proofs {
namespace {

TEST(ProofCatalogueFull, EveryEntryReproducesAtFullEffort) {
  ProofOptions opt;
  opt.full = true;
  for (const Entry& e : catalogue()) {
    const Result r = run_entry(e, opt);
    EXPECT_FALSE(regressed(r)) << e.id << " (" << to_string(e.status) << "): "
                               << (r.error.empty() ? r.evidence.witness : r.error) << " discrepancy "
                               << r.evidence.discrepancy << " tolerance " << r.evidence.tolerance;
  }
}

}  // namespace
}  // namespace ttr::proofs
