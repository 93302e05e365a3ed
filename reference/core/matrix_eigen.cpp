// The float and double products of matrix.hpp through Eigen: the only
// translation unit that includes Eigen for them.
#include <Eigen/Core>

#include "reference/core/matrix.hpp"

namespace ttr {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
Eigen::Map<const RowMajor<T>> view(const Matrix<T>& m) { return {m.a.data(), m.rows, m.cols}; }
template <class T>
Eigen::Map<RowMajor<T>> view(Matrix<T>& m) { return {m.a.data(), m.rows, m.cols}; }

template <class T, class Product>
void store(Matrix<T>& C, int rows, int cols, bool accumulate, const Product& p) {
  if (!accumulate) {
    C.assign(rows, cols, T(0));
    view(C).noalias() = p;
  } else {
    view(C).noalias() += p;
  }
}

}  // namespace

#define TTR_EIGEN_GEMM(T)                                                                                   \
  void gemm_nn(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool acc) {                          \
    store(C, A.rows, B.cols, acc, view(A) * view(B));                                                      \
  }                                                                                                        \
  void gemm_nt(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool acc) {                          \
    store(C, A.rows, B.rows, acc, view(A) * view(B).transpose());                                          \
  }                                                                                                        \
  void gemm_tn(const Matrix<T>& A, const Matrix<T>& B, Matrix<T>& C, bool acc) {                          \
    store(C, A.cols, B.cols, acc, view(A).transpose() * view(B));                                          \
  }
TTR_EIGEN_GEMM(float)
TTR_EIGEN_GEMM(double)
#undef TTR_EIGEN_GEMM

}  // namespace ttr
