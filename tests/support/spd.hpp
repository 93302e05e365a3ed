// Deterministic SPD test systems for the solver tests: A = V diag(λ) Vᵀ with a
// known spectrum and eigenbasis (so the exact solution is V diag(1/λ) Vᵀ q), in
// any scalar type, plus random vectors.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/core/scalar.hpp"
#include "tests/support/make_inputs.hpp"

namespace ttr::test {

template <class T>
T num(double x) {
  return ttr::from_double<T>(x);
}

template <class T>
T norm(const std::vector<T>& x) {
  using std::sqrt;
  T s = num<T>(0);
  for (const T& e : x) s += e * e;
  return sqrt(s);
}

// A = V diag(lam) Vᵀ with V = H_3 H_2 H_1 (Householder reflectors of random vectors).
template <class T>
struct Spd {
  int n = 0;
  T L, mu;
  std::vector<T> lam, V, A;
  void apply(const T* x, T* y) const {
    for (int i = 0; i < n; ++i) {
      T s = num<T>(0);
      for (int j = 0; j < n; ++j) s += A[static_cast<std::size_t>(i) * n + j] * x[j];
      y[i] = s;
    }
  }
  auto op() const {
    return [this](const T* x, T* y) { apply(x, y); };
  }
  std::vector<T> coords(const std::vector<T>& x) const {
    std::vector<T> c(n, num<T>(0));
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) c[j] += V[static_cast<std::size_t>(i) * n + j] * x[i];
    return c;
  }
  std::vector<T> from_coords(const std::vector<T>& c) const {
    std::vector<T> x(n, num<T>(0));
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) x[i] += V[static_cast<std::size_t>(i) * n + j] * c[j];
    return x;
  }
  std::vector<T> solve(const std::vector<T>& q) const {
    std::vector<T> c = coords(q);
    for (int j = 0; j < n; ++j) c[j] /= lam[j];
    return from_coords(c);
  }
  T a_norm2(const std::vector<T>& e) const {  // eᵀAe
    std::vector<T> Ae(n);
    apply(e.data(), Ae.data());
    T s = num<T>(0);
    for (int i = 0; i < n; ++i) s += e[i] * Ae[i];
    return s;
  }
};

// Eigenvalues: λ_0 = μ, λ_{n-1} = L, the others spread in (μ, L).
template <class T>
Spd<T> make_spd(int n, double mu, double L, std::uint64_t seed) {
  Spd<T> s;
  s.n = n;
  s.mu = num<T>(mu);
  s.L = num<T>(L);
  Uniform u{seed};
  s.lam.resize(n);
  for (int j = 0; j < n; ++j)
    s.lam[j] = j == 0 ? s.mu : j == n - 1 ? s.L : s.mu + (s.L - s.mu) * num<T>(u.next(0.05, 0.95));
  s.V.assign(static_cast<std::size_t>(n) * n, num<T>(0));
  for (int i = 0; i < n; ++i) s.V[static_cast<std::size_t>(i) * n + i] = num<T>(1);
  for (int h = 0; h < 3; ++h) {
    std::vector<T> w(n);
    for (auto& e : w) e = num<T>(u.next(-1, 1));
    T ww = num<T>(0);
    for (auto& e : w) ww += e * e;
    for (int j = 0; j < n; ++j) {
      T d = num<T>(0);
      for (int i = 0; i < n; ++i) d += w[i] * s.V[static_cast<std::size_t>(i) * n + j];
      const T f = num<T>(2) * d / ww;
      for (int i = 0; i < n; ++i) s.V[static_cast<std::size_t>(i) * n + j] -= f * w[i];
    }
  }
  s.A.assign(static_cast<std::size_t>(n) * n, num<T>(0));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      T a = num<T>(0);
      for (int k = 0; k < n; ++k)
        a += s.V[static_cast<std::size_t>(i) * n + k] * s.lam[k] * s.V[static_cast<std::size_t>(j) * n + k];
      s.A[static_cast<std::size_t>(i) * n + j] = a;
    }
  return s;
}

template <class T>
std::vector<T> random_vec(int n, std::uint64_t seed) {
  Uniform u{seed};
  std::vector<T> x(n);
  for (auto& e : x) e = num<T>(u.next(-1, 1));
  return x;
}

}  // namespace ttr::test
