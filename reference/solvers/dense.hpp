// Dense symmetric positive definite solves in the working precision: Cholesky
// (A = LLᵀ) and, for any nonsingular A, LU with partial pivoting. Row-major n×n.
#pragma once

#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "reference/core/scalar.hpp"

namespace ttr {

// Solves A x = b for SPD A by Cholesky. Returns false (x untouched) when a pivot
// is not positive, i.e. A is not numerically SPD in this arithmetic.
template <class T>
bool cholesky_solve(const std::vector<T>& A, int n, const T* b, T* x) {
  using std::sqrt;
  const T zero = from_double<T>(0.0);
  std::vector<T> L(static_cast<std::size_t>(n) * n, zero);
  auto at = [n](int i, int j) { return static_cast<std::size_t>(i) * n + j; };
  for (int j = 0; j < n; ++j) {
    T d = A[at(j, j)];
    for (int k = 0; k < j; ++k) d -= L[at(j, k)] * L[at(j, k)];
    if (!(d > zero)) return false;
    L[at(j, j)] = sqrt(d);
    for (int i = j + 1; i < n; ++i) {
      T s = A[at(i, j)];
      for (int k = 0; k < j; ++k) s -= L[at(i, k)] * L[at(j, k)];
      L[at(i, j)] = s / L[at(j, j)];
    }
  }
  std::vector<T> y(n);
  for (int i = 0; i < n; ++i) {  // L y = b
    T s = b[i];
    for (int k = 0; k < i; ++k) s -= L[at(i, k)] * y[k];
    y[i] = s / L[at(i, i)];
  }
  for (int i = n - 1; i >= 0; --i) {  // Lᵀ x = y
    T s = y[i];
    for (int k = i + 1; k < n; ++k) s -= L[at(k, i)] * x[k];
    x[i] = s / L[at(i, i)];
  }
  return true;
}

// Solves A x = b by LU with partial pivoting. Returns false on an exactly zero pivot.
template <class T>
bool lu_solve(std::vector<T> A, int n, const T* b, T* x) {
  using std::abs;
  auto at = [n](int i, int j) { return static_cast<std::size_t>(i) * n + j; };
  std::vector<T> r(b, b + n);
  const T zero = from_double<T>(0.0);
  for (int j = 0; j < n; ++j) {
    int p = j;
    for (int i = j + 1; i < n; ++i)
      if (abs(A[at(i, j)]) > abs(A[at(p, j)])) p = i;
    if (A[at(p, j)] == zero) return false;
    if (p != j) {
      for (int k = 0; k < n; ++k) std::swap(A[at(p, k)], A[at(j, k)]);
      std::swap(r[p], r[j]);
    }
    for (int i = j + 1; i < n; ++i) {
      const T f = A[at(i, j)] / A[at(j, j)];
      for (int k = j; k < n; ++k) A[at(i, k)] -= f * A[at(j, k)];
      r[i] -= f * r[j];
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    T s = r[i];
    for (int k = i + 1; k < n; ++k) s -= A[at(i, k)] * x[k];
    x[i] = s / A[at(i, i)];
  }
  return true;
}

}  // namespace ttr
