// proofs-checks/support/dense.hpp, the proof checks' own linear algebra: the
// solves, inverse, determinant and triangular substitution exactly over the
// rationals against hand-computed answers, Cholesky, Jacobi and the random
// orthogonal matrices in double, the discrepancy measures on hand-computed
// values, and the summation order the catalogue's recorded residuals rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "proofs-checks/support/dense.hpp"
#include "tests/support/rational.hpp"

namespace {

using namespace ttr::proofs::dense;
using Q = ttr::test::rational;
using Vq = std::vector<Q>;

Mat<Q> rational_matrix(int rows, int cols, std::vector<int> values) {
  std::vector<Q> v(values.begin(), values.end());
  return Mat<Q>(rows, cols, v);
}

TEST(DenseToolkit, ProductsTransposeOuterAndNorms) {
  const Mat<Q> A = rational_matrix(2, 3, {1, 2, 3, 4, 5, 6}), B = rational_matrix(3, 2, {1, 0, 0, 1, 1, 1});
  const Mat<Q> AB = A * B;  // [[1+3, 2+3], [4+6, 5+6]]
  EXPECT_EQ(AB.values(), (Vq{4, 5, 10, 11}));
  EXPECT_EQ((A * Vq{1, 1, 1}), (Vq{6, 15}));
  EXPECT_EQ(A.transpose().values(), (Vq{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(outer(Vq{1, 2}, Vq{3, 4, 5}).values(), (Vq{3, 4, 5, 6, 8, 10}));
  EXPECT_EQ(A.squared_norm(), Q(91));  // 1 + 4 + 9 + 16 + 25 + 36
  EXPECT_EQ(inner(A, A), Q(91));
  EXPECT_EQ(dot(Vq{1, 2, 3}, Vq{4, 5, 6}), Q(32));
  EXPECT_EQ(plus_identity(rational_matrix(2, 2, {1, 2, 3, 4}), Q(10)).values(), (Vq{11, 2, 3, 14}));
  EXPECT_EQ((Q(2) * A - A).values(), A.values());
  EXPECT_EQ((Q(1, 2) * Vq{2, 4} + Vq{1, 1}), (Vq{2, 3}));
  EXPECT_THROW(A * A, std::logic_error);
}

// A zero leading pivot: elimination must swap rows. A x = b with x = (1, −1, 2).
TEST(DenseToolkit, SolveWithPartialPivotingIsExactOverTheRationals) {
  const Mat<Q> A = rational_matrix(3, 3, {0, 2, 1, 1, 1, 0, 2, 0, 3});
  const Vq x{1, -1, 2};
  const Vq b = A * x;  // (0, 0, 8)
  EXPECT_EQ(b, (Vq{0, 0, 8}));
  EXPECT_EQ(solve(A, b), x);
  // Several right-hand sides at once: each column as if alone.
  const Mat<Q> X = solve(A, Mat<Q>::identity(3));
  EXPECT_EQ((A * X).values(), Mat<Q>::identity(3).values());
  EXPECT_EQ(inverse(A).values(), X.values());
  EXPECT_THROW(solve(rational_matrix(2, 2, {1, 2, 2, 4}), Vq{1, 1}), std::runtime_error);
}

TEST(DenseToolkit, SolveUnpivotedIsExactOnPositiveDefiniteSystems) {
  const Mat<Q> A = rational_matrix(3, 3, {4, 2, 0, 2, 5, 1, 0, 1, 3});
  const Vq x{Q(1, 2), -1, 3};
  EXPECT_EQ(solve_unpivoted(A, A * x), x);
}

TEST(DenseToolkit, DeterminantCarriesTheSwapSign) {
  EXPECT_EQ(determinant(rational_matrix(2, 2, {0, 1, 1, 0})), Q(-1));
  EXPECT_EQ(determinant(rational_matrix(3, 3, {0, 2, 1, 1, 1, 0, 2, 0, 3})), Q(-8));  // 0 − 2·3 + 1·(−2)
  EXPECT_EQ(determinant(rational_matrix(3, 3, {2, 0, 0, 0, 3, 0, 0, 0, 5})), Q(30));
  EXPECT_EQ(determinant(rational_matrix(2, 2, {1, 2, 2, 4})), Q(0));
}

// (I + L) X = B with L strictly lower: its diagonal and upper part are ignored.
TEST(DenseToolkit, UnitLowerSolveIgnoresDiagonalAndUpperPart) {
  const Mat<Q> L = rational_matrix(3, 3, {9, 9, 9, 2, 9, 9, 1, 3, 9});
  const Mat<Q> X = rational_matrix(3, 2, {1, 0, 0, 1, 1, 1});
  const Mat<Q> I_plus_L = rational_matrix(3, 3, {1, 0, 0, 2, 1, 0, 1, 3, 1});
  EXPECT_EQ(unit_lower_solve(L, I_plus_L * X).values(), X.values());
}

TEST(DenseToolkit, CholeskySolve) {
  // [[4, 2], [2, 3]] x = (2, 1): x = (1/2, 0), every step exact in double.
  const Mat<double> A(2, 2, {4, 2, 2, 3});
  EXPECT_EQ(cholesky_solve(A, {2.0, 1.0}), (std::vector<double>{0.5, 0.0}));
  EXPECT_THROW(cholesky_solve(Mat<double>(2, 2, {1, 2, 2, 1}), {1.0, 1.0}), std::runtime_error);
}

TEST(DenseToolkit, JacobiEigenvaluesAndRandomOrthogonal) {
  std::vector<double> eig = symmetric_eigenvalues(Mat<double>(2, 2, {2, 1, 1, 2}), 1e-15);
  std::sort(eig.begin(), eig.end());
  EXPECT_NEAR(eig[0], 1.0, 1e-14);
  EXPECT_NEAR(eig[1], 3.0, 1e-14);
  std::mt19937_64 rng(7);
  const Mat<double> Qm = random_orthogonal<double>(rng, 5);
  EXPECT_LT(rel_diff_inf(Qm.transpose() * Qm, Mat<double>::identity(5)), 1e-14);
  EXPECT_GT(rel_diff_inf(Qm, Mat<double>::identity(5)), 0.1);  // not the identity
}

TEST(DenseToolkit, DiscrepancyMeasures) {
  const std::vector<double> x{1, 2}, y{1, 4};
  EXPECT_EQ(rel_diff_inf(x, y), 0.5);                   // max|x − y| = 2 over max|y| = 4
  EXPECT_EQ(rel_diff_2(x, y), std::sqrt(4.0 / 17.0));  // ‖x − y‖² = 4, ‖y‖² = 17
  EXPECT_EQ(rel_diff_2(x, {0.0, 0.0}), std::sqrt(5.0));
  EXPECT_EQ(rel_err(3.0, 4.0), 0.25);
  EXPECT_EQ(rel_err(1.0, 0.0), 1.0);
}

// Sums run from 0 in increasing index order: 1e16 + 1 rounds back to 1e16 in
// double, so (1e16, 1, −1e16)·(1, 1, 1) is 0 left to right (any other order
// that adds the 1 last gives 1). The catalogue's recorded residuals depend on it.
TEST(DenseToolkit, SumsRunLeftToRight) {
  const std::vector<double> r{1e16, 1, -1e16}, ones{1, 1, 1};
  EXPECT_EQ(dot(r, ones), 0.0);
  EXPECT_EQ((Mat<double>(1, 3, r) * ones)[0], 0.0);
  EXPECT_EQ((Mat<double>(1, 3, r) * Mat<double>(3, 1, ones))(0, 0), 0.0);
  EXPECT_EQ(inner(Mat<double>(1, 3, r), Mat<double>(1, 3, ones)), 0.0);
}

}  // namespace
