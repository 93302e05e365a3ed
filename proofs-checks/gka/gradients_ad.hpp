// The independent side of GKA's gradient statements: reverse-mode automatic
// differentiation (reference/core/tape.hpp over mp) of the forward computations written
// here from the paper's forward definitions (eq. (CH), eq. (4), Alg. 1, eq. (27)),
// plus the unrolled solvers (Alg. 1 as printed with ω_0 = 2, CG) and a dense solve.
// Nothing here uses reference/solvers: the reference code is what the entries test.
// Heavy (MPFR): included only by the gka/gradients*.cpp translation units.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "proofs-checks/support.hpp"
#include "reference/core/tape.hpp"

namespace ttr::proofs::gka_grad {

// ---------------------------------------------------------------------------
// Reverse mode: the taped scalar of reference/core/tape.hpp over mp. Every
// operation on Var appends a node holding the partial derivatives with respect
// to its operands; Tape::adjoints sweeps the list backwards (the chain rule,
// nothing else). Constants (id < 0) record nothing.
using Tape = ttr::Tape<mp>;
using TapeScope = ttr::TapeScope<mp>;
using Var = ttr::Taped<mp>;
using ttr::adjoint;

inline mp dot(const mp* x, const mp* y, int n) {
  mp s = 0;
  for (int j = 0; j < n; ++j) s += x[j] * y[j];
  return s;
}
inline const mp& value(const mp& x) { return x; }
inline const mp& value(const Var& x) { return x.v; }


// ---------------------------------------------------------------------------
// Generic forward computations (S = mp or Var). Matrices are row-major n×n.
template <class S>
using Vec = std::vector<S>;

template <class S>
Vec<S> matvec(const Vec<S>& A, const Vec<S>& x, int n) {
  Vec<S> y(n);
  for (int i = 0; i < n; ++i) y[i] = dot(A.data() + static_cast<std::size_t>(i) * n, x.data(), n);
  return y;
}

// Gaussian elimination without pivoting on the full matrix (every entry is read,
// so reverse mode yields the gradient with respect to all n² entries; A + λI is
// symmetric positive definite here, so no pivot vanishes).
template <class S>
Vec<S> ge_solve(Vec<S> A, Vec<S> b, int n) {
  auto at = [n](int i, int j) { return static_cast<std::size_t>(i) * n + j; };
  for (int j = 0; j < n; ++j)
    for (int i = j + 1; i < n; ++i) {
      const S f = A[at(i, j)] / A[at(j, j)];
      for (int k = j + 1; k < n; ++k) A[at(i, k)] = A[at(i, k)] - f * A[at(j, k)];
      b[i] = b[i] - f * b[j];
    }
  Vec<S> x(n);
  for (int i = n - 1; i >= 0; --i) {
    S s = b[i];
    for (int k = i + 1; k < n; ++k) s = s - A[at(i, k)] * x[k];
    x[i] = s / A[at(i, i)];
  }
  return x;
}

// GKA Alg. 1 line by line (weight schedule, grad descent, momentum), with the
// text's ω_0 = 2 (App. B.1, Lemma 3). Returns ξ_{-1}, ξ_0, ..., ξ_r (index i+1).
template <class S>
std::vector<Vec<S>> chebyshev_alg1(const Vec<S>& H, const Vec<S>& q, int n, const mp& L, const mp& mu, int r) {
  const mp rho = (L - mu) / (L + mu);
  mp omega = 2;
  std::vector<Vec<S>> xi;
  xi.push_back(Vec<S>(n, S(mp(0))));
  Vec<S> x0(n);
  for (int j = 0; j < n; ++j) x0[j] = S(mp(2) / (L + mu)) * q[j];
  xi.push_back(x0);
  for (int i = 1; i <= r; ++i) {
    omega = 4 / (4 - rho * rho * omega);                                  // (weight schedule)
    const Vec<S>& prev = xi[i];
    const Vec<S>& prev2 = xi[i - 1];
    const Vec<S> Hx = matvec(H, prev, n);
    Vec<S> next(n);
    const S step(2 * omega / (L + mu)), mom(omega - 1);
    for (int j = 0; j < n; ++j) next[j] = prev[j] - step * (Hx[j] - q[j]);  // (grad descent)
    for (int j = 0; j < n; ++j) next[j] = next[j] + mom * (prev[j] - prev2[j]);  // (momentum)
    xi.push_back(std::move(next));
  }
  return xi;
}

// Conjugate gradient (Hestenes–Stiefel) from 0; returns x_1, ..., x_r (index i-1).
template <class S>
std::vector<Vec<S>> cg_iterates(const Vec<S>& A, const Vec<S>& q, int n, int r) {
  Vec<S> x(n, S(mp(0))), res = q, p = q;
  S rr = dot(res.data(), res.data(), n);
  std::vector<Vec<S>> out;
  for (int i = 0; i < r; ++i) {
    const Vec<S> Ap = matvec(A, p, n);
    const S alpha = rr / dot(p.data(), Ap.data(), n);
    for (int j = 0; j < n; ++j) {
      x[j] = x[j] + alpha * p[j];
      res[j] = res[j] - alpha * Ap[j];
    }
    const S rr_new = dot(res.data(), res.data(), n);
    const S beta = rr_new / rr;
    for (int j = 0; j < n; ++j) p[j] = res[j] + beta * p[j];
    rr = rr_new;
    out.push_back(x);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Random inputs: doubles on a 2^-53 grid (exact in mp), from the entry's stream.
inline mp uniform(std::mt19937_64& rng, double lo, double hi) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return mp(lo + (hi - lo) * u);
}
inline Vec<mp> random_vec(std::mt19937_64& rng, int n, double lo = -1, double hi = 1) {
  Vec<mp> v(n);
  for (auto& x : v) x = uniform(rng, lo, hi);
  return v;
}
// Σ_j k_j k_jᵀ over m random keys: symmetric positive semidefinite (definite for m ≥ n).
inline Vec<mp> random_gram(std::mt19937_64& rng, int n, int m) {
  Vec<mp> H(static_cast<std::size_t>(n) * n, mp(0));
  for (int s = 0; s < m; ++s) {
    const Vec<mp> k = random_vec(rng, n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) H[static_cast<std::size_t>(i) * n + j] += k[i] * k[j];
  }
  return H;
}
inline mp frobenius(const Vec<mp>& H) { return boost::multiprecision::sqrt(dot(H.data(), H.data(), static_cast<int>(H.size()))); }

// max |a − b| and max |b| over paired vectors: the norm-wise relative
// discrepancy of a candidate `a` against a reference `b`.
struct RelErr {
  mp num = 0, den = 0;
  void add(const mp& a, const mp& b) {
    const mp d = boost::multiprecision::abs(a - b), m = boost::multiprecision::abs(b);
    if (d > num) num = d;
    if (m > den) den = m;
  }
  void add(const Vec<mp>& a, const Vec<mp>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) add(a[i], b[i]);
  }
  double value() const { return den == 0 ? to_d(num) : to_d(num / den); }
};

inline Entry gka_entry(std::string id, std::string ref, std::string statement, Method method, std::string how,
                       Status status, std::string correction, std::function<Evidence(const ProofOptions&)> check,
                       bool slow = false) {
  return Entry{std::move(id),     Paper::GKA, std::move(ref),        std::move(statement), method, std::move(how),
               status,            std::move(correction), slow,         std::move(check)};
}

inline std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

// Random points per entry (gradients.cpp, gradients_gating.cpp), and how they measure.
inline int points(const ProofOptions& opt) { return opt.full ? 24 : 4; }
inline constexpr const char* kFormulaVsReverse =
    "max |formula − reverse mode| / max |reverse mode| over all components";

}  // namespace ttr::proofs::gka_grad

namespace ttr::proofs {
std::vector<Entry> gka_gating_gradient_entries();  // gradients_gating.cpp: eqs. (26)-(34), Table 1
std::vector<Entry> gka_solver_gradient_entries();  // gradients_solver.cpp: Lemma 2, then App. C.1
std::vector<Entry> gka_alg2_gradient_entries();    // gradients_alg2.cpp: eqs. (54)-(64), Alg. 2
}  // namespace ttr::proofs
