// The quick kla-precision-growth study as CI runs it, its claims asserted on the
// written CSV files with expectations derived here:
//  * growth: with p̄ = 0, Λ_t/Λ_{t−1} = ā^{-2}·(Λ_0 + Σ_{s≤t})/(Λ_0 + Σ_{s<t}) ≥ ā^{-2}
//    (KLA-K eq. (18)), so log2 Λ_t ≥ −2t log2 ā with increments ≥ −2 log2 ā;
//  * t*: the first token whose exact Λ_t exceeds fp32's largest value, recomputed
//    from the exact column with std::numeric_limits<float>::max();
//  * the unscaled forms' first NaN at t* + 1 (o = η/inf = 0 at t*, the gate
//    ā/(ā² + 0·inf) NaN from t* + 1) wherever the exact Λ crosses the limit by
//    more than the form's rounding can move it; NaN ever after;
//  * the scaled forms: o finite at every token, also past t*; ratio ≤ 8.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "tests/study/study_support.hpp"

namespace {

namespace fs = std::filesystem;
using namespace ttr::test;

const double kLimit = std::log2(static_cast<double>(std::numeric_limits<float>::max()));

TEST(StudyClaims, KlaPrecisionGrowthFailurePointAndScaledForms) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "kla";
  const CliResult r = run_quick_study("kla-precision-growth", dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* claim : {"closed_form", "unscaled_failure_point", "scaled_finite"})
    EXPECT_NE(r.out.find(std::string("agrees    ") + claim + " [theorem]"), std::string::npos) << claim << "\n" << r.out;

  // The exact precision of slot 0 per ā: growth and t*.
  const Csv prec = read_csv(dir / "precision.csv");
  std::map<std::string, std::map<int, double>> exact;  // abar -> t -> log2 Λ_t
  for (std::size_t i = 0; i < prec.rows.size(); ++i) {
    exact[prec.text(i, "abar")][static_cast<int>(prec.num(i, "t"))] = prec.num(i, "log2_lambda_exact");
    if (prec.text(i, "arithmetic") == "mpfr sequential" && std::isfinite(prec.num(i, "log2_lambda"))) {
      EXPECT_NEAR(prec.num(i, "log2_lambda"), prec.num(i, "log2_lambda_exact"), 1e-9);
    }
  }
  ASSERT_EQ(exact.size(), 4u);
  std::map<std::string, int> t_star;  // slot 0
  for (const auto& [abar, series] : exact) {
    const double step = -2 * std::log2(std::stod(abar));
    double prev = 0;  // log2 Λ_0 = log2 1
    for (const auto& [t, x] : series) {
      EXPECT_GE(x - prev, step - 1e-9) << "abar " << abar << " t " << t;
      EXPECT_GE(x, t * step - 1e-9);
      prev = x;
      if (!t_star.count(abar) && x > kLimit) t_star[abar] = t;
    }
    ASSERT_TRUE(t_star.count(abar)) << "every head's precision passes fp32's range within T: abar " << abar;
  }
  EXPECT_EQ(t_star.at("7.62939453125e-06"), 4) << "abar = 2^-17: 34 bits per token";

  // Per slot: the failure point.
  const Csv f = read_csv(dir / "failure.csv");
  int unscaled = 0, pinned = 0, scaled = 0;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const std::string what = f.text(i, "arithmetic") + " abar " + f.text(i, "abar") + " slot " + f.text(i, "slot");
    const int ts = static_cast<int>(f.num(i, "t_star")), first = static_cast<int>(f.num(i, "first_nan"));
    if (f.text(i, "slot") == "0") {
      EXPECT_EQ(ts, t_star.at(f.text(i, "abar"))) << what;
    }
    if (f.text(i, "form").find("unscaled") != std::string::npos) {
      ++unscaled;
      ASSERT_GT(ts, 0) << what;
      EXPECT_EQ(f.num(i, "finite_after_first_nan"), 0) << what;
      // How far rounding can move Λ_t: fp32 ≤ ~30 roundings of 2^-24 (< 1e-3 bits);
      // bf16 ≤ ~30 storage roundings of 2^-8 plus a subnormal entry near the
      // limit (< 0.5 bits). Beyond that margin the crossing token is certain.
      const double certain = f.text(i, "dtype") == "bf16" ? 0.5 : 1e-3;
      if (f.num(i, "margin_bits") > certain && ts + 1 <= 96) {
        EXPECT_EQ(first, ts + 1) << what;
        ++pinned;
      } else if (first > 0) {
        EXPECT_GE(first, ts) << what;
        EXPECT_LE(first, ts + 2) << what;
      }
    } else {
      ++scaled;
      EXPECT_EQ(first, 0) << "scaled forms never NaN: " << what;
    }
  }
  EXPECT_EQ(unscaled, 2 * 2 * 4 * 4);  // 2 forms × 2 dtypes × 4 heads × 4 slots
  EXPECT_EQ(scaled, unscaled);
  EXPECT_GE(pinned, unscaled / 2) << "most crossings are far enough from the limit to pin the token";

  // Per token: the scaled forms' ratios finite and under the threshold, also past t*.
  const Csv ra = read_csv(dir / "ratios.csv");
  int past = 0;
  for (std::size_t i = 0; i < ra.rows.size(); ++i) {
    if (ra.text(i, "form").find("unscaled") != std::string::npos) continue;
    const double x = ra.num(i, "ratio");
    EXPECT_TRUE(std::isfinite(x) && x <= 8.0) << ra.text(i, "arithmetic") << " t " << ra.text(i, "t") << ": " << x;
    past += ra.num(i, "t") > t_star.at(ra.text(i, "abar"));
  }
  EXPECT_GT(past, 100);
}

}  // namespace
