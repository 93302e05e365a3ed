// The proof checks' one dense linear-algebra toolkit: a row-major matrix, its
// products, Gaussian elimination (with and without pivoting), Cholesky, unit
// lower-triangular substitution, inverse, determinant, cyclic Jacobi
// eigenvalues, random test matrices and the relative-discrepancy measures the
// entries report. Generic over the scalar T: mp for the exact identities at
// opt.bits, double for Monte Carlo, GMP and Boost rationals for exact one-step
// identities, and the taped reverse-mode scalar of gka/gradients_ad.hpp.
//
// It is the independent side of the catalogue's comparisons, so it depends on
// nothing in reference/ (the code under test): naive textbook algorithms, the
// standard library only.
//
// Evaluation order is part of the interface. Every reduction runs from T(0) in
// increasing index order (Σ_k A_ik B_kj over k = 0, 1, …), and elimination and
// substitution follow exactly the loops below. The catalogue's JSON records
// measured residuals, so reordering an operation here changes recorded evidence:
// keep the order when editing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ttr::proofs::dense {

// ---------------------------------------------------------------------------
// Vectors are std::vector<T>; the operators below are found by code in, or
// using, this namespace.

// Σ_j x_j y_j from T(0), j increasing. Every reduction in this header calls
// dot(const T*, const T*, int) unqualified, so a scalar type may supply its
// own: the reverse-mode Var records one tape node per dot product.
template <class T>
T dot(const T* x, const T* y, int n) {
  T s(0);
  for (int j = 0; j < n; ++j) s += x[j] * y[j];
  return s;
}

template <class T>
T dot(const std::vector<T>& u, const std::vector<T>& v) {
  if (u.size() != v.size()) throw std::logic_error("dense::dot: size mismatch");
  return dot(u.data(), v.data(), static_cast<int>(u.size()));
}

template <class T>
T squared_norm(const std::vector<T>& v) {
  return dot(v, v);
}

template <class T>
T norm(const std::vector<T>& v) {
  using std::sqrt;
  return sqrt(squared_norm(v));
}

template <class T>
T max_abs(const std::vector<T>& v) {
  using std::abs;
  T m(0);
  for (const T& e : v) m = std::max<T>(m, abs(e));
  return m;
}

template <class T>
std::vector<T> operator+(std::vector<T> u, const std::vector<T>& v) {
  for (std::size_t i = 0; i < u.size(); ++i) u[i] += v[i];
  return u;
}

template <class T>
std::vector<T> operator-(std::vector<T> u, const std::vector<T>& v) {
  for (std::size_t i = 0; i < u.size(); ++i) u[i] -= v[i];
  return u;
}

template <class T>
std::vector<T> operator*(const T& s, std::vector<T> v) {
  for (T& e : v) e = s * e;
  return v;
}

template <class T>
std::vector<T> operator/(std::vector<T> v, const T& s) {
  for (T& e : v) e = e / s;
  return v;
}

// u ⊙ v
template <class T>
std::vector<T> cwise_product(std::vector<T> u, const std::vector<T>& v) {
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = u[i] * v[i];
  return u;
}

// ---------------------------------------------------------------------------
// Matrices: rows × cols, row-major, zero-initialised.

template <class T>
class Mat {
 public:
  Mat() = default;
  Mat(int rows, int cols) : rows_(rows), cols_(cols), a_(static_cast<std::size_t>(rows) * cols, T(0)) {}
  // From row-major values (e.g. a tensor's data).
  Mat(int rows, int cols, std::vector<T> values) : rows_(rows), cols_(cols), a_(std::move(values)) {
    if (a_.size() != static_cast<std::size_t>(rows) * cols) throw std::logic_error("dense::Mat: wrong value count");
  }
  static Mat identity(int n) {
    Mat m(n, n);
    for (int i = 0; i < n; ++i) m(i, i) = T(1);
    return m;
  }

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  T& operator()(int i, int j) { return a_[static_cast<std::size_t>(i) * cols_ + j]; }
  const T& operator()(int i, int j) const { return a_[static_cast<std::size_t>(i) * cols_ + j]; }
  // All entries, row-major.
  const std::vector<T>& values() const { return a_; }
  std::vector<T>& values() { return a_; }
  const T* row_data(int i) const { return a_.data() + static_cast<std::size_t>(i) * cols_; }
  std::vector<T> row(int i) const { return std::vector<T>(row_data(i), row_data(i) + cols_); }
  std::vector<T> col(int j) const {
    std::vector<T> c(rows_);
    for (int i = 0; i < rows_; ++i) c[i] = (*this)(i, j);
    return c;
  }

  Mat transpose() const {
    Mat t(cols_, rows_);
    for (int i = 0; i < rows_; ++i)
      for (int j = 0; j < cols_; ++j) t(j, i) = (*this)(i, j);
    return t;
  }
  // ‖A‖_F², row-major order.
  T squared_norm() const { return dot(a_.data(), a_.data(), static_cast<int>(a_.size())); }
  T norm() const {
    using std::sqrt;
    return sqrt(squared_norm());
  }
  // The same matrix in another scalar (e.g. constants for a tape).
  template <class U>
  Mat<U> cast() const {
    std::vector<U> v;
    v.reserve(a_.size());
    for (const T& e : a_) v.push_back(U(e));
    return Mat<U>(rows_, cols_, std::move(v));
  }
  void swap_rows(int i, int k) {
    for (int j = 0; j < cols_; ++j) std::swap((*this)(i, j), (*this)(k, j));
  }

  Mat& operator+=(const Mat& b) {
    check_same_shape(b);
    for (std::size_t e = 0; e < a_.size(); ++e) a_[e] += b.a_[e];
    return *this;
  }
  Mat& operator-=(const Mat& b) {
    check_same_shape(b);
    for (std::size_t e = 0; e < a_.size(); ++e) a_[e] -= b.a_[e];
    return *this;
  }

 private:
  void check_same_shape(const Mat& b) const {
    if (b.rows_ != rows_ || b.cols_ != cols_) throw std::logic_error("dense::Mat: shape mismatch");
  }
  int rows_ = 0, cols_ = 0;
  std::vector<T> a_;
};

template <class T>
Mat<T> operator+(Mat<T> a, const Mat<T>& b) {
  return a += b;
}

template <class T>
Mat<T> operator-(Mat<T> a, const Mat<T>& b) {
  return a -= b;
}

// s A, entry by entry.
template <class T>
Mat<T> operator*(const T& s, Mat<T> a) {
  for (T& e : a.values()) e = s * e;
  return a;
}

// A/s, entry by entry.
template <class T>
Mat<T> operator/(Mat<T> a, const T& s) {
  for (T& e : a.values()) e = e / s;
  return a;
}

// A B: (AB)_ij = Σ_k A_ik B_kj from T(0), k increasing.
template <class T>
Mat<T> operator*(const Mat<T>& a, const Mat<T>& b) {
  if (a.cols() != b.rows()) throw std::logic_error("dense::Mat: product shape mismatch");
  Mat<T> c(a.rows(), b.cols());
  for (int i = 0; i < a.rows(); ++i)
    for (int k = 0; k < a.cols(); ++k)
      for (int j = 0; j < b.cols(); ++j) c(i, j) += a(i, k) * b(k, j);
  return c;
}

// A x: (Ax)_i = dot(row i of A, x).
template <class T>
std::vector<T> operator*(const Mat<T>& a, const std::vector<T>& x) {
  if (static_cast<std::size_t>(a.cols()) != x.size()) throw std::logic_error("dense::Mat: matvec shape mismatch");
  std::vector<T> y(a.rows());
  for (int i = 0; i < a.rows(); ++i) y[i] = dot(a.row_data(i), x.data(), a.cols());
  return y;
}

// ⟨A, B⟩_F = Σ A_e B_e over the entries in row-major order.
template <class T>
T inner(const Mat<T>& a, const Mat<T>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) throw std::logic_error("dense::inner: shape mismatch");
  return dot(a.values().data(), b.values().data(), static_cast<int>(a.values().size()));
}

// u vᵀ
template <class T>
Mat<T> outer(const std::vector<T>& u, const std::vector<T>& v) {
  Mat<T> m(static_cast<int>(u.size()), static_cast<int>(v.size()));
  for (int i = 0; i < m.rows(); ++i)
    for (int j = 0; j < m.cols(); ++j) m(i, j) = u[i] * v[j];
  return m;
}

// Diag(d)
template <class T>
Mat<T> diagonal(const std::vector<T>& d) {
  Mat<T> m(static_cast<int>(d.size()), static_cast<int>(d.size()));
  for (int i = 0; i < m.rows(); ++i) m(i, i) = d[i];
  return m;
}

// A + s I, touching only the diagonal (A_ii + s; off-diagonal entries unchanged).
template <class T>
Mat<T> plus_identity(Mat<T> a, const T& s) {
  for (int i = 0; i < a.rows(); ++i) a(i, i) = a(i, i) + s;
  return a;
}

// ---------------------------------------------------------------------------
// Solves.

namespace detail {

// Gaussian elimination of [A | B] to [U | B'], column by column: row i > col
// becomes row_i − (A_i,col/A_col,col) row_col, on the columns right of col (the
// ones left of it are never read again) and on all of B. With Pivot, the first
// row of largest |A_i,col| (i ≥ col) is swapped up first. Returns the parity of
// the swaps (±1), or 0 at an exactly zero pivot (Pivot only).
template <bool Pivot, class T>
int eliminate(Mat<T>& a, Mat<T>& b) {
  const int n = a.rows();
  if (a.cols() != n || b.rows() != n) throw std::logic_error("dense: elimination shape mismatch");
  int sign = 1;
  for (int col = 0; col < n; ++col) {
    if constexpr (Pivot) {
      using std::abs;
      int piv = col;
      for (int i = col + 1; i < n; ++i)
        if (abs(a(i, col)) > abs(a(piv, col))) piv = i;
      if (a(piv, col) == 0) return 0;
      if (piv != col) {
        a.swap_rows(piv, col);
        b.swap_rows(piv, col);
        sign = -sign;
      }
    }
    for (int i = col + 1; i < n; ++i) {
      const T f = a(i, col) / a(col, col);
      for (int j = col + 1; j < n; ++j) a(i, j) -= f * a(col, j);
      for (int j = 0; j < b.cols(); ++j) b(i, j) -= f * b(col, j);
    }
  }
  return sign;
}

// U X = B for upper-triangular U, in place of B: X_ij = (B_ij − Σ_{k>i} U_ik X_kj)/U_ii.
template <class T>
void back_substitute(const Mat<T>& u, Mat<T>& b) {
  for (int i = u.rows() - 1; i >= 0; --i)
    for (int j = 0; j < b.cols(); ++j) {
      T s = b(i, j);
      for (int k = i + 1; k < u.rows(); ++k) s -= u(i, k) * b(k, j);
      b(i, j) = s / u(i, i);
    }
}

template <class T>
Mat<T> column(const std::vector<T>& v) {
  return Mat<T>(static_cast<int>(v.size()), 1, v);
}

}  // namespace detail

// A X = B by Gaussian elimination with partial pivoting (each column of B is
// solved exactly as it would be alone). Throws on an exactly singular A.
template <class T>
Mat<T> solve(Mat<T> a, Mat<T> b) {
  if (detail::eliminate<true>(a, b) == 0) throw std::runtime_error("dense::solve: singular matrix");
  detail::back_substitute(a, b);
  return b;
}

template <class T>
std::vector<T> solve(const Mat<T>& a, const std::vector<T>& b) {
  return solve(a, detail::column(b)).values();
}

// A x = b by Gaussian elimination without pivoting: every entry of A is used as
// stored, so under reverse mode the result depends on all n² entries (A must
// have nonzero leading pivots, e.g. symmetric positive definite).
template <class T>
std::vector<T> solve_unpivoted(Mat<T> a, const std::vector<T>& b) {
  Mat<T> x = detail::column(b);
  detail::eliminate<false>(a, x);
  detail::back_substitute(a, x);
  return x.values();
}

template <class T>
Mat<T> inverse(const Mat<T>& a) {
  return solve(a, Mat<T>::identity(a.rows()));
}

// det A = ± Π U_ii from the pivoted elimination (0 at an exactly zero pivot).
template <class T>
T determinant(Mat<T> a) {
  Mat<T> none(a.rows(), 0);
  const int sign = detail::eliminate<true>(a, none);
  if (sign == 0) return T(0);
  T d(1);
  for (int i = 0; i < a.rows(); ++i) d *= a(i, i);
  return sign < 0 ? T(-d) : d;
}

// A x = b for symmetric positive definite A by Cholesky, A = L Lᵀ (lower
// triangle of A only), then L y = b and Lᵀ x = y. Throws when a pivot is ≤ 0.
template <class T>
std::vector<T> cholesky_solve(Mat<T> a, std::vector<T> b) {
  using std::sqrt;
  const int n = a.rows();
  for (int j = 0; j < n; ++j) {
    T d = a(j, j);
    for (int k = 0; k < j; ++k) d -= a(j, k) * a(j, k);
    if (!(d > 0)) throw std::runtime_error("dense::cholesky_solve: matrix not positive definite");
    const T l = sqrt(d);
    a(j, j) = l;
    for (int i = j + 1; i < n; ++i) {
      T s = a(i, j);
      for (int k = 0; k < j; ++k) s -= a(i, k) * a(j, k);
      a(i, j) = s / l;
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < i; ++k) b[i] -= a(i, k) * b[k];
    b[i] /= a(i, i);
  }
  for (int i = n - 1; i >= 0; --i) {
    for (int k = i + 1; k < n; ++k) b[i] -= a(k, i) * b[k];
    b[i] /= a(i, i);
  }
  return b;
}

// (I + L) X = B for strictly lower-triangular L (its diagonal and upper part are
// ignored), by forward substitution: X_r = B_r − Σ_{i<r} L_ri X_i.
template <class T>
Mat<T> unit_lower_solve(const Mat<T>& l, Mat<T> b) {
  for (int r = 0; r < b.rows(); ++r)
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < b.cols(); ++j) b(r, j) -= l(r, i) * b(i, j);
  return b;
}

// ---------------------------------------------------------------------------
// Eigenvalues of a symmetric matrix by cyclic Jacobi rotations, until the
// off-diagonal part has norm ≤ rel_tol·‖A‖_F (or after max_sweeps sweeps).
// Returns the diagonal, unsorted.
template <class T>
std::vector<T> symmetric_eigenvalues(Mat<T> a, const T& rel_tol, int max_sweeps = 60) {
  using std::abs;
  using std::sqrt;
  const int n = a.rows();
  const T scale = a.norm();
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    T off(0);
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) off += a(i, j) * a(i, j);
    if (sqrt(off) <= rel_tol * scale) break;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        if (a(p, q) == 0) continue;
        const T theta = (a(q, q) - a(p, p)) / (2 * a(p, q));
        const T t = (theta >= 0 ? 1 : -1) / (abs(theta) + sqrt(theta * theta + 1));
        const T c = 1 / sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // A ← Jᵀ A J
          const T akp = a(k, p), akq = a(k, q);
          a(k, p) = c * akp - s * akq;
          a(k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {
          const T apk = a(p, k), aqk = a(q, k);
          a(p, k) = c * apk - s * aqk;
          a(q, k) = s * apk + c * aqk;
        }
      }
  }
  std::vector<T> d(n);
  for (int i = 0; i < n; ++i) d[i] = a(i, i);
  return d;
}

// ---------------------------------------------------------------------------
// Random test data: doubles, so every value is exact in any precision (the same
// seed gives the same inputs at 128 or 512 bits).

template <class T>
T uniform(std::mt19937_64& rng, double lo, double hi) {
  return T(std::uniform_real_distribution<double>(lo, hi)(rng));
}

template <class T>
std::vector<T> random_vector(std::mt19937_64& rng, int n, double lo = -1, double hi = 1) {
  std::vector<T> v(n);
  for (T& e : v) e = uniform<T>(rng, lo, hi);
  return v;
}

template <class T>
Mat<T> random_matrix(std::mt19937_64& rng, int rows, int cols, double lo = -1, double hi = 1) {
  Mat<T> m(rows, cols);
  for (T& e : m.values()) e = uniform<T>(rng, lo, hi);
  return m;
}

// A product of `reflections` Householder reflections I − 2uuᵀ/uᵀu with random u:
// orthogonal to working precision (for SPD matrices of a prescribed spectrum).
template <class T>
Mat<T> random_orthogonal(std::mt19937_64& rng, int n, int reflections = 3) {
  Mat<T> q = Mat<T>::identity(n);
  for (int h = 0; h < reflections; ++h) {
    const std::vector<T> u = random_vector<T>(rng, n);
    const T uu = squared_norm(u);
    std::vector<T> s = q * u;  // Q ← Q − (2Qu/uᵀu) uᵀ
    for (T& e : s) e = 2 * e / uu;
    q -= outer(s, u);
  }
  return q;
}

// ---------------------------------------------------------------------------
// Discrepancy measures (in double, for Evidence).

// |x − y|/|y| (|x − y| when y = 0).
template <class T>
T rel_err(const T& x, const T& y) {
  using std::abs;
  const T d = abs(x - y);
  return y == 0 ? d : T(d / abs(y));
}

// max_i |x_i − y_i| / max(floor, max_i |y_i|): the ∞-norm relative discrepancy
// of x against the reference y.
template <class T>
double rel_diff_inf(const std::vector<T>& x, const std::vector<T>& y, double floor = 1e-300) {
  using std::abs;
  if (x.size() != y.size()) throw std::logic_error("dense::rel_diff_inf: size mismatch");
  T m(0);
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max<T>(m, abs(x[i] - y[i]));
  return static_cast<double>(m) / std::max(floor, static_cast<double>(max_abs(y)));
}

template <class T>
double rel_diff_inf(const Mat<T>& x, const Mat<T>& y) {
  return rel_diff_inf(x.values(), y.values());
}

// ‖x − y‖₂/‖y‖₂ (‖x − y‖₂ when y = 0), as sqrt(Σ(x−y)²/Σy²).
template <class T>
double rel_diff_2(const std::vector<T>& x, const std::vector<T>& y) {
  using std::sqrt;
  if (x.size() != y.size()) throw std::logic_error("dense::rel_diff_2: size mismatch");
  T d(0), n(0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    d += (x[i] - y[i]) * (x[i] - y[i]);
    n += y[i] * y[i];
  }
  return static_cast<double>(n == 0 ? T(sqrt(d)) : T(sqrt(d / n)));
}

template <class T>
double rel_diff_2(const Mat<T>& x, const Mat<T>& y) {
  return rel_diff_2(x.values(), y.values());
}

}  // namespace ttr::proofs::dense
