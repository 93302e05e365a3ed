// The quick pdn-theorem study as CI runs it (d = 8, T = 40, 32 key sequences), PDN
// Thm 3.2 asserted on pdn.csv with expectations derived here:
//  * eq. (C.5.2) recomputed: E||o^LA − o*||² = (||S*||²/d)(1 − t/d + t(t−1)/d²), the study
//    normalising ||S*||²/d = 1;
//  * Thm 3.2 for t ≥ d + 1 under its conditions: mean DN error ≤ 1 ≤ (C.5.2), and ≤ LA's;
//  * one token by hand: S_1^DN = β v kᵀ, S_1^LA = v kᵀ and the exact update's S_1 =
//    v kᵀ/(1 + λ) (unit keys), so at λ → 0 DN with β = 1 and LA equal o* at t = 1, and
//    with β = 1/2, E||o^DN − o*||² = (1/4)E||v||²/d = (1/4)(||S*||²/d)/d = 1/(4d);
//  * β = 2.5 breaks the contraction ‖Δ_t‖² − ‖Δ_{t−1}‖² = −β(2−β)‖Δ_{t−1}k‖² > 0.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "tests/study/study_support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace ttr::test;

TEST(StudyClaims, PdnTheorem32OnItsConditionsAndBeyond) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "pdn";
  const CliResult r = run_quick_study("pdn-theorem", dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* claim : {"exact_update_optimal", "dn_contraction", "la_expectation", "theorem_3_2", "beta_up_to_2"})
    EXPECT_NE(r.out.find(std::string("agrees    ") + claim + " [theorem]"), std::string::npos) << claim << "\n" << r.out;
  const Csv c = read_csv(dir / "pdn.csv");
  const double d = 8;
  const std::set<std::string> theorem = {"beta=1", "beta=0.5", "beta~U(0 1)"};
  int checked = 0, la_checked = 0;
  std::set<std::string> settings;
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    const std::string s = c.text(i, "setting");
    settings.insert(s);
    const double t = c.num(i, "t"), dn = c.num(i, "dev_dn"), la = c.num(i, "dev_la");
    EXPECT_NEAR(c.num(i, "bound"), 1.0, 1e-12);
    // The exact update minimises the (ridge) loss, whatever the setting.
    EXPECT_GE(c.num(i, "ridge_gap_min"), -1e-12) << s << " t " << t;
    if (!theorem.count(s)) continue;
    EXPECT_EQ(c.text(i, "conditions"), "theorem");
    const double expected = 1 - t / d + t * (t - 1) / (d * d);
    if (t < d) {
      EXPECT_TRUE(std::isnan(c.num(i, "la_expected"))) << "o* = S* q only from t = d on";
    }
    if (t >= d) {  // o* = S* q from t = d on
      EXPECT_NEAR(c.num(i, "la_expected"), expected, 1e-12);
      EXPECT_LE(std::abs(la - expected), 5 * c.num(i, "dev_la_se")) << s << " t " << t;
      ++la_checked;
    }
    EXPECT_LE(c.num(i, "dn_contraction_excess"), 1e-12) << s << " t " << t;
    EXPECT_LE(c.num(i, "delta_dn_max"), 1 + 1e-12) << s << " t " << t;
    EXPECT_LE(c.num(i, "loss_pdn"), 1e-20) << "noiseless: the exact update interpolates, " << s << " t " << t;
    if (t >= d + 1) {
      EXPECT_LE(dn, 1.0) << s << " t " << t;
      EXPECT_LE(1.0, expected);
      EXPECT_LE(dn, la) << s << " t " << t;
      ++checked;
    }
    if (t == 1 && s == "beta=1") {
      EXPECT_LE(dn, 1e-20);
      EXPECT_LE(la, 1e-20);
    }
    if (t == 1 && s == "beta=0.5") {
      EXPECT_LE(std::abs(dn - 1 / (4 * d)), 5 * c.num(i, "dev_dn_se")) << dn;
    }
  }
  EXPECT_EQ(settings.size(), 9u);
  EXPECT_EQ(checked, 3 * (40 - 8));
  EXPECT_EQ(la_checked, 3 * (40 - 8 + 1));
  // Outside the proof's β ≤ 2 the operator error grows on some path at every step.
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    if (c.text(i, "setting") == "beta=2.5") {
      EXPECT_GT(c.num(i, "dn_contraction_excess"), 0);
    }
    if (c.text(i, "setting") == "beta=1.5") {
      EXPECT_LE(c.num(i, "dn_contraction_excess"), 1e-12);
    }
  }
}

}  // namespace
