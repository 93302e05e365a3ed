// Extreme eigenvalues of a symmetric matrix, in float64 (Eigen's
// SelfAdjointEigenSolver). Used for diagnostics such as GKA's kappa: the
// eigenvalues carry an absolute error of order n·u·‖A‖_F (u = 2^-53), so a
// condition number κ computed from them has relative error of order n·u·κ.
// Compiled once (spectrum.cpp): Eigen's eigensolver would otherwise be parsed and
// generated again in every GKA runner of every tier.
#pragma once

#include <utility>
#include <vector>

namespace ttr {

// A: n×n, row-major, symmetric (the lower triangle is read): its eigenvalues in
// ascending order, and the extreme two (λ_min, λ_max).
std::vector<double> symmetric_eigenvalues(const double* A, int n);
std::pair<double, double> symmetric_extreme_eigenvalues(const double* A, int n);

}  // namespace ttr
