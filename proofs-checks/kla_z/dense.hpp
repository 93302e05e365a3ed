// Small dense linear algebra for the KLA-Z and PDN catalogue entries, generic
// over the scalar (mp for the exact identities, double for Monte Carlo).
// Deliberately naive and independent of reference/: these are the "second
// formulation" side of the comparisons (dense products, Gaussian elimination).
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <stdexcept>
#include <vector>

#include "proofs-checks/support.hpp"

namespace ttr::proofs::dense {

template <class T>
struct Mat {
  int r = 0, c = 0;
  std::vector<T> a;
  Mat() = default;
  Mat(int rows, int cols) : r(rows), c(cols), a(static_cast<std::size_t>(rows) * cols, T(0)) {}
  T& operator()(int i, int j) { return a[static_cast<std::size_t>(i) * c + j]; }
  const T& operator()(int i, int j) const { return a[static_cast<std::size_t>(i) * c + j]; }
};

template <class T>
Mat<T> eye(int n) {
  Mat<T> m(n, n);
  for (int i = 0; i < n; ++i) m(i, i) = T(1);
  return m;
}

template <class T>
Mat<T> mul(const Mat<T>& x, const Mat<T>& y) {
  if (x.c != y.r) throw std::logic_error("dense::mul: shape mismatch");
  Mat<T> z(x.r, y.c);
  for (int i = 0; i < x.r; ++i)
    for (int k = 0; k < x.c; ++k) {
      if (x(i, k) == 0) continue;
      for (int j = 0; j < y.c; ++j) z(i, j) += x(i, k) * y(k, j);
    }
  return z;
}

template <class T>
Mat<T> tr(const Mat<T>& x) {
  Mat<T> z(x.c, x.r);
  for (int i = 0; i < x.r; ++i)
    for (int j = 0; j < x.c; ++j) z(j, i) = x(i, j);
  return z;
}

template <class T>
Mat<T> add(Mat<T> x, const Mat<T>& y, const T& s = T(1)) {  // x + s·y
  for (std::size_t i = 0; i < x.a.size(); ++i) x.a[i] += s * y.a[i];
  return x;
}

template <class T>
Mat<T> scaled(Mat<T> x, const T& s) {
  for (auto& e : x.a) e *= s;
  return x;
}

// u vᵀ
template <class T>
Mat<T> outer(const std::vector<T>& u, const std::vector<T>& v) {
  Mat<T> z(static_cast<int>(u.size()), static_cast<int>(v.size()));
  for (int i = 0; i < z.r; ++i)
    for (int j = 0; j < z.c; ++j) z(i, j) = u[i] * v[j];
  return z;
}

template <class T>
std::vector<T> matvec(const Mat<T>& x, const std::vector<T>& v) {
  std::vector<T> z(x.r, T(0));
  for (int i = 0; i < x.r; ++i)
    for (int j = 0; j < x.c; ++j) z[i] += x(i, j) * v[j];
  return z;
}

template <class T>
T dotv(const std::vector<T>& u, const std::vector<T>& v) {
  T s(0);
  for (std::size_t i = 0; i < u.size(); ++i) s += u[i] * v[i];
  return s;
}

template <class T>
T frob2(const Mat<T>& x) {
  T s(0);
  for (const auto& e : x.a) s += e * e;
  return s;
}

template <class T>
T trace(const Mat<T>& x) {
  T s(0);
  for (int i = 0; i < std::min(x.r, x.c); ++i) s += x(i, i);
  return s;
}

template <class T>
T max_abs(const std::vector<T>& a) {
  using std::abs;
  T m(0);
  for (const auto& e : a) m = std::max<T>(m, abs(e));
  return m;
}

// A double for evidence text: 4 significant digits, scientific when small or large.
inline std::string sci(double x) {
  std::ostringstream o;
  o.precision(4);
  o << x;
  return o.str();
}

inline double to_d_any(double x) { return x; }
inline double to_d_any(const mp& x) { return to_d(x); }

// max |x − y| / max(max |y|, floor): the relative discrepancy of two arrays.
template <class T>
double rel_diff(const std::vector<T>& x, const std::vector<T>& y, double floor = 1e-300) {
  using std::abs;
  if (x.size() != y.size()) throw std::logic_error("dense::rel_diff: size mismatch");
  T m(0);
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max<T>(m, abs(x[i] - y[i]));
  const double scale = std::max(floor, static_cast<double>(to_d_any(max_abs(y))));
  return static_cast<double>(to_d_any(m)) / scale;
}

template <class T>
double rel_diff(const Mat<T>& x, const Mat<T>& y) {
  return rel_diff(x.a, y.a);
}

// Solves X Y = B for Y by Gaussian elimination with partial pivoting (B n×m).
template <class T>
Mat<T> solve(Mat<T> x, Mat<T> b) {
  using std::abs;
  const int n = x.r;
  for (int col = 0; col < n; ++col) {
    int piv = col;
    for (int i = col + 1; i < n; ++i)
      if (abs(x(i, col)) > abs(x(piv, col))) piv = i;
    if (x(piv, col) == 0) throw std::runtime_error("dense::solve: singular matrix");
    if (piv != col) {
      for (int j = 0; j < n; ++j) std::swap(x(piv, j), x(col, j));
      for (int j = 0; j < b.c; ++j) std::swap(b(piv, j), b(col, j));
    }
    for (int i = col + 1; i < n; ++i) {
      const T f = x(i, col) / x(col, col);
      if (f == 0) continue;
      for (int j = col; j < n; ++j) x(i, j) -= f * x(col, j);
      for (int j = 0; j < b.c; ++j) b(i, j) -= f * b(col, j);
    }
  }
  for (int i = n - 1; i >= 0; --i)
    for (int j = 0; j < b.c; ++j) {
      T s = b(i, j);
      for (int k = i + 1; k < n; ++k) s -= x(i, k) * b(k, j);
      b(i, j) = s / x(i, i);
    }
  return b;
}

template <class T>
Mat<T> inverse(const Mat<T>& x) {
  return solve(x, eye<T>(x.r));
}

// det(X) by elimination with partial pivoting.
template <class T>
T det(Mat<T> x) {
  using std::abs;
  const int n = x.r;
  T d(1);
  for (int col = 0; col < n; ++col) {
    int piv = col;
    for (int i = col + 1; i < n; ++i)
      if (abs(x(i, col)) > abs(x(piv, col))) piv = i;
    if (x(piv, col) == 0) return T(0);
    if (piv != col) {
      for (int j = 0; j < n; ++j) std::swap(x(piv, j), x(col, j));
      d = -d;
    }
    d *= x(col, col);
    for (int i = col + 1; i < n; ++i) {
      const T f = x(i, col) / x(col, col);
      for (int j = col; j < n; ++j) x(i, j) -= f * x(col, j);
    }
  }
  return d;
}

// Uniform in [lo, hi) as an exactly representable double, converted exactly.
template <class T>
T uniform(std::mt19937_64& rng, double lo, double hi) {
  return T(std::uniform_real_distribution<double>(lo, hi)(rng));
}

template <class T>
std::vector<T> random_vec(std::mt19937_64& rng, int n, double lo = -1, double hi = 1) {
  std::vector<T> v(n);
  for (auto& e : v) e = uniform<T>(rng, lo, hi);
  return v;
}

template <class T>
Mat<T> random_mat(std::mt19937_64& rng, int r, int c, double lo = -1, double hi = 1) {
  Mat<T> m(r, c);
  for (auto& e : m.a) e = uniform<T>(rng, lo, hi);
  return m;
}

}  // namespace ttr::proofs::dense
