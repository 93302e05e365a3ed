// A small dense row-major matrix and the three products the chunk forms need,
// generic over the scalar type. The generic products accumulate left to right
// with mul_add_to (allocation-free for MPFR); float and double go through Eigen
// (vectorised, fp32/fp64 accumulation — the accumulation order is then Eigen's,
// which is what "fp32 accumulation" promises and no more). The Eigen overloads
// live in matrix_eigen.cpp so that only one translation unit pays for Eigen.
#pragma once

#include <cstddef>
#include <vector>

#include "reference/core/scalar.hpp"

namespace ttr {

template <class T>
struct Matrix {
  int rows = 0, cols = 0;
  std::vector<T> a;

  Matrix() = default;
  Matrix(int r, int c, const T& fill) : rows(r), cols(c), a(static_cast<std::size_t>(r) * c, fill) {}
  // Reshapes, keeping the allocation when it is large enough, and fills.
  void assign(int r, int c, const T& fill) {
    rows = r;
    cols = c;
    a.assign(static_cast<std::size_t>(r) * c, fill);
  }
  T& operator()(int i, int j) { return a[static_cast<std::size_t>(i) * cols + j]; }
  const T& operator()(int i, int j) const { return a[static_cast<std::size_t>(i) * cols + j]; }
  T* row(int i) { return a.data() + static_cast<std::size_t>(i) * cols; }
  const T* row(int i) const { return a.data() + static_cast<std::size_t>(i) * cols; }
};

// The three products in their defining order: each entry's sum left to right over
// the reduction index, through the scalar's own mul_add_to. gemm_nn/nt/tn below are
// these; a tier whose products have a faster kernel with the same order and the
// same roundings specialises gemm_* and keeps these as its reference (the Monte
// Carlo tier: mca.hpp, mca_gemm.cpp).
//
// C = A B (or C += A B when accumulate). A is m×k, B is k×n.
template <class T>
void gemm_nn_in_order(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool accumulate = false) {
  if (!accumulate) C.assign(A.rows, B.cols, from_double<T>(0.0));
  for (int i = 0; i < A.rows; ++i)
    for (int p = 0; p < A.cols; ++p) {
      const T& aip = A(i, p);
      const T* bp = B.row(p);
      T* ci = C.row(i);
      for (int j = 0; j < B.cols; ++j) mul_add_to(ci[j], aip, bp[j]);
    }
}
// C = A Bᵀ (or +=). A is m×k, B is n×k.
template <class T>
void gemm_nt_in_order(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool accumulate = false) {
  if (!accumulate) C.assign(A.rows, B.rows, from_double<T>(0.0));
  for (int i = 0; i < A.rows; ++i)
    for (int j = 0; j < B.rows; ++j) {
      const T* ai = A.row(i);
      const T* bj = B.row(j);
      T& c = C(i, j);
      for (int p = 0; p < A.cols; ++p) mul_add_to(c, ai[p], bj[p]);
    }
}
// C = Aᵀ B (or +=). A is k×m, B is k×n.
template <class T>
void gemm_tn_in_order(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool accumulate = false) {
  if (!accumulate) C.assign(A.cols, B.cols, from_double<T>(0.0));
  for (int p = 0; p < A.rows; ++p) {
    const T* ap = A.row(p);
    const T* bp = B.row(p);
    for (int i = 0; i < A.cols; ++i) {
      T* ci = C.row(i);
      for (int j = 0; j < B.cols; ++j) mul_add_to(ci[j], ap[i], bp[j]);
    }
  }
}

template <class T>
void gemm_nn(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool accumulate = false) {
  gemm_nn_in_order(A, B, C, accumulate);
}
template <class T>
void gemm_nt(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool accumulate = false) {
  gemm_nt_in_order(A, B, C, accumulate);
}
template <class T>
void gemm_tn(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool accumulate = false) {
  gemm_tn_in_order(A, B, C, accumulate);
}

void gemm_nn(const Matrix<float>& A, const Matrix<float>& B, Matrix<float>& C, bool accumulate = false);
void gemm_nt(const Matrix<float>& A, const Matrix<float>& B, Matrix<float>& C, bool accumulate = false);
void gemm_tn(const Matrix<float>& A, const Matrix<float>& B, Matrix<float>& C, bool accumulate = false);
void gemm_nn(const Matrix<double>& A, const Matrix<double>& B, Matrix<double>& C, bool accumulate = false);
void gemm_nt(const Matrix<double>& A, const Matrix<double>& B, Matrix<double>& C, bool accumulate = false);
void gemm_tn(const Matrix<double>& A, const Matrix<double>& B, Matrix<double>& C, bool accumulate = false);

// X = (I + L)⁻¹ B for strictly lower-triangular L (its diagonal and upper part
// are ignored), by forward substitution row by row: X_i = B_i − Σ_{j<i} L_ij X_j.
// This is the UT-transform solve of the delta rule (PDN §2.2).
template <class T>
void unit_lower_solve(const Matrix<T>& L, const Matrix<T>& B, Matrix<T>& X) {
  X = B;
  for (int i = 0; i < L.rows; ++i) {
    T* xi = X.row(i);
    for (int j = 0; j < i; ++j) {
      const T m = -L(i, j);
      const T* xj = X.row(j);
      for (int c = 0; c < X.cols; ++c) mul_add_to(xi[c], m, xj[c]);
    }
  }
}

}  // namespace ttr
