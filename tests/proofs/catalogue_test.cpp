// The proof-check catalogue under CTest: it covers every item issue 6 lists,
// every fast entry reproduces its recorded finding, every printed-formula
// failure is far above working precision with a correction that holds, and
// `ttrcheck proofs` behaves as a command (exit codes, JSON).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "proofs-checks/catalogue.hpp"
#include "proofs-checks/report.hpp"
#include "tests/support/cli.hpp"

namespace ttr::proofs {
namespace {

using test::run_cli;
using test::TempDir;

// Issue 6, deliverable 2: every (paper, ref) it names, spelled as printed.
const std::vector<std::pair<Paper, std::string>>& required_items() {
  static const std::vector<std::pair<Paper, std::string>> items = [] {
    std::vector<std::pair<Paper, std::string>> v;
    auto add = [&](Paper p, std::initializer_list<const char*> refs) {
      for (const char* r : refs) v.emplace_back(p, r);
    };
    add(Paper::GKA, {"eq. (3)", "eq. (KF)", "eq. (4)", "eq. (5)", "Lemma 1", "eq. (7)", "eq. (23)", "eq. (24)",
                     "eq. (25)", "eq. (50)", "eq. (51)", "Lemma 2", "Lemma 3", "Lemma 4", "Remark 1", "Alg. 1",
                     "Alg. 2", "Table 1", "eq. (17)", "eq. (19)"});
    for (int i = 54; i <= 64; ++i) v.emplace_back(Paper::GKA, "eq. (" + std::to_string(i) + ")");
    for (int i = 26; i <= 34; ++i) v.emplace_back(Paper::GKA, "eq. (" + std::to_string(i) + ")");
    add(Paper::KLA_K, {"Thm 1", "eq. (16)", "eq. (17)", "eq. (18)", "Cor. 1.1", "Thm 2", "eq. (19)", "Cor. 2.1",
                       "Cor. 2.2", "eq. (20)", "eq. (21)", "eq. (22)", "eq. (23)", "Thm 3", "App. E.4"});
    add(Paper::KLA_Z, {"eq. (2)", "Thm 1 (i)", "Thm 1 (ii)", "Thm 1 (iii)", "Prop. 1", "Prop. 2", "eq. (5)",
                       "Prop. 3", "Prop. 4", "Prop. 5", "Prop. 6", "App. B.4"});
    add(Paper::PDN, {"Thm 3.1", "Thm C.1", "Thm C.2", "App. C.3", "Thm 3.2", "Thm C.5", "eq. (C.5.2)", "eq. (8)",
                     "Lemma E.1", "Lemma E.2", "Lemma E.3"});
    return v;
  }();
  return items;
}

TEST(ProofCatalogue, CoversEveryItemTheIssueLists) {
  std::set<std::pair<Paper, std::string>> present;
  for (const Entry& e : catalogue()) present.emplace(e.paper, e.ref);
  for (const auto& [paper, ref] : required_items())
    EXPECT_TRUE(present.count({paper, ref})) << to_string(paper) << " " << ref << " has no catalogue entry";
}

TEST(ProofCatalogue, EntriesAreWellFormed) {
  for (const Entry& e : catalogue()) {
    SCOPED_TRACE(e.id);
    EXPECT_FALSE(e.ref.empty());
    EXPECT_FALSE(e.statement.empty());
    EXPECT_FALSE(e.how.empty());
    EXPECT_EQ(e.id.find_first_of(" \t\n"), std::string::npos);
    EXPECT_EQ(e.id.find(std::string(1, '.')) != std::string::npos, true) << "ids are dotted: paper.ref.what";
    if (e.status == Status::not_checkable) EXPECT_EQ(e.method, Method::none);
    else EXPECT_NE(e.method, Method::none);
  }
}

// A regression is a recorded finding not observed again, or a check that threw.
TEST(ProofCatalogue, RegressionMeansNotReproduced) {
  Entry e{"test.synthetic", Paper::GKA, "eq. (0)", "s", Method::exact_identity, "h", Status::holds, "", false, {}};
  e.check = [](const ProofOptions&) { return Evidence{}; };  // reproduced = false
  EXPECT_TRUE(regressed(run_entry(e, {})));
  e.check = [](const ProofOptions&) { Evidence ev; ev.reproduced = true; return ev; };
  EXPECT_FALSE(regressed(run_entry(e, {})));
  e.check = [](const ProofOptions&) -> Evidence { throw std::runtime_error("boom"); };
  const Result r = run_entry(e, {});
  EXPECT_TRUE(regressed(r));
  EXPECT_EQ(r.error, "boom");
}

std::vector<std::string> fast_ids() {
  std::vector<std::string> ids;
  for (const Entry& e : catalogue())
    if (!e.slow && e.status != Status::not_checkable) ids.push_back(e.id);
  return ids;
}

const Entry& entry(const std::string& id) {
  return *std::find_if(catalogue().begin(), catalogue().end(), [&](const Entry& e) { return e.id == id; });
}

class FastEntry : public ::testing::TestWithParam<std::string> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(FastEntry);

TEST_P(FastEntry, ReproducesItsRecordedFinding) {
  const Entry& e = entry(GetParam());
  const Result r = run_entry(e, ProofOptions{});
  ASSERT_TRUE(r.error.empty()) << r.error;
  const Evidence& ev = r.evidence;
  EXPECT_TRUE(ev.reproduced) << to_string(e.status) << ": discrepancy " << ev.discrepancy << " tolerance "
                             << ev.tolerance << " (" << ev.measure << ") witness " << ev.witness;
  EXPECT_FALSE(ev.measure.empty());
  EXPECT_FALSE(ev.witness.empty());
  if (e.status == Status::fails_as_printed || e.status == Status::holds_with_correction) {
    // The printed form misses by far more than working precision (1e-8 vs a
    // tolerance of ~1e-63 at 256 bits: never rounding), and the corrected
    // form holds to the tolerance.
    ASSERT_TRUE(ev.printed_discrepancy.has_value()) << "a correction needs the printed form's discrepancy";
    EXPECT_FALSE(*ev.printed_discrepancy < 1e-8) << "printed form misses by only " << *ev.printed_discrepancy;
    EXPECT_LE(ev.discrepancy, ev.tolerance);
  }
  if (e.method == Method::exact_identity || e.method == Method::reverse_mode) {
    // Exact identities and adjoints are checked in MPFR: a tolerance looser
    // than 1e-40 would no longer separate "holds" from a small misprint.
    EXPECT_LE(ev.tolerance, 1e-40) << "exact identity with a loose tolerance";
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, FastEntry, ::testing::ValuesIn(fast_ids()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(ProofsCli, ListsUnknownIdsAndJson) {
  const auto list = run_cli({"proofs", "--list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  for (const Entry& e : catalogue()) EXPECT_NE(list.out.find(e.id), std::string::npos) << e.id;

  const auto bad = run_cli({"proofs", "--only", "no.such.entry"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("no.such.entry"), std::string::npos);
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;

  const auto bits = run_cli({"proofs", "--bits", "64"});
  EXPECT_EQ(bits.exit_code, 2);

  const auto ids = fast_ids();
  if (ids.empty()) GTEST_FAIL() << "catalogue has no fast entry";
  const TempDir dir;
  const auto one = run_cli({"proofs", "--only", ids.front(), "--json", dir / "p.json"});
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  std::ifstream in(dir / "p.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["kind"], "proofs");
  ASSERT_EQ(j["entries"].size(), 1u);
  EXPECT_EQ(j["entries"][0]["id"], ids.front());
  EXPECT_EQ(j["entries"][0]["regressed"], false);
  EXPECT_EQ(j["summary"]["regressed"], 0);

  // Nothing is written when the JSON target cannot be created.
  const auto unwritable = run_cli({"proofs", "--only", ids.front(), "--json", dir / "missing/dir/p.json"});
  EXPECT_EQ(unwritable.exit_code, 2);
}

}  // namespace
}  // namespace ttr::proofs
