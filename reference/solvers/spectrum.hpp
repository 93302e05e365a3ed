// Extreme eigenvalues of a symmetric matrix, in float64 (Eigen's
// SelfAdjointEigenSolver). Used for diagnostics such as GKA's kappa: the
// eigenvalues carry an absolute error of order n·u·‖A‖_F (u = 2^-53), so a
// condition number κ computed from them has relative error of order n·u·κ.
#pragma once

#include <Eigen/Eigenvalues>
#include <utility>

namespace ttr {

inline std::pair<double, double> symmetric_extreme_eigenvalues(const double* A, int n) {
  const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> M(A, n, n);
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(M, Eigen::EigenvaluesOnly);
  return {es.eigenvalues().minCoeff(), es.eigenvalues().maxCoeff()};
}

}  // namespace ttr
