#include "reference/solvers/spectrum.hpp"

#include <Eigen/Eigenvalues>

namespace ttr {

std::vector<double> symmetric_eigenvalues(const double* A, int n) {
  const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> M(A, n, n);
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(M, Eigen::EigenvaluesOnly);
  return {es.eigenvalues().data(), es.eigenvalues().data() + n};  // ascending (Eigen's order)
}

std::pair<double, double> symmetric_extreme_eigenvalues(const double* A, int n) {
  if (n <= 0) return {0.0, 0.0};
  const std::vector<double> e = symmetric_eigenvalues(A, n);
  return {e.front(), e.back()};
}

}  // namespace ttr
