// reference/solvers/spectrum.hpp: float64 eigenvalues of symmetric matrices,
// against hand-derived spectra.
#include "reference/solvers/spectrum.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

constexpr double kTol = 1e-14;  // n·u·‖A‖ with n ≤ 4, ‖A‖ ≤ 10: far above it, far below any slip

// [[2, 1], [1, 2]]: eigenvalues 1 and 3 (vectors (1, ∓1)/√2).
TEST(Spectrum, TwoByTwoByHand) {
  const std::vector<double> A = {2, 1, 1, 2};
  const std::vector<double> e = ttr::symmetric_eigenvalues(A.data(), 2);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NEAR(e[0], 1.0, kTol);
  EXPECT_NEAR(e[1], 3.0, kTol);
  const auto [lo, hi] = ttr::symmetric_extreme_eigenvalues(A.data(), 2);
  EXPECT_NEAR(lo, 1.0, kTol);
  EXPECT_NEAR(hi, 3.0, kTol);
}

// An indefinite 4×4 with a known spectrum: T = tridiag(−1, 0, −1) of order 4 has
// eigenvalues 2cos(jπ/5), j = 1..4, in ascending order −2cos(π/5) < −2cos(2π/5) <
// 2cos(2π/5) < 2cos(π/5).
TEST(Spectrum, TridiagonalIndefiniteAscending) {
  std::vector<double> A(16, 0.0);
  for (int i = 0; i + 1 < 4; ++i) A[i * 4 + i + 1] = A[(i + 1) * 4 + i] = -1.0;
  const std::vector<double> e = ttr::symmetric_eigenvalues(A.data(), 4);
  const double pi = std::acos(-1.0);
  const std::vector<double> want = {-2 * std::cos(pi / 5), -2 * std::cos(2 * pi / 5), 2 * std::cos(2 * pi / 5),
                                    2 * std::cos(pi / 5)};
  ASSERT_EQ(e.size(), 4u);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(e[j], want[j], kTol) << j;
}

// Only the lower triangle is read (Eigen's SelfAdjointEigenSolver): an upper
// triangle of garbage leaves the spectrum of the symmetric lower part.
TEST(Spectrum, ReadsTheLowerTriangle) {
  const std::vector<double> A = {2, 1e300, 1, 2};
  const auto [lo, hi] = ttr::symmetric_extreme_eigenvalues(A.data(), 2);
  EXPECT_NEAR(lo, 1.0, kTol);
  EXPECT_NEAR(hi, 3.0, kTol);
}

}  // namespace
