// The independent side of GKA's gradient statements: reverse-mode automatic
// differentiation (a Wengert list over mp) of the forward computations written
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

namespace ttr::proofs::gka_grad {

// ---------------------------------------------------------------------------
// Reverse mode: every operation on Var appends a node holding the partial
// derivatives with respect to its operands; adjoints() sweeps the list backwards
// (the chain rule, nothing else). Constants (id < 0) record nothing.
class Tape {
 public:
  struct Arg {
    int node;
    mp partial;
  };
  int push(std::vector<Arg>&& args) {
    nodes_.push_back(std::move(args));
    return static_cast<int>(nodes_.size()) - 1;
  }
  // d(output)/d(node) for every node up to `output`.
  std::vector<mp> adjoints(int output) const {
    std::vector<mp> adj(static_cast<std::size_t>(output) + 1, mp(0));
    adj[output] = 1;
    for (int i = output; i >= 0; --i) {
      if (adj[i] == 0) continue;
      for (const Arg& a : nodes_[i]) adj[a.node] += adj[i] * a.partial;
    }
    return adj;
  }
  // Σ_k seed_k · d(node_k)/d(node) for every node up to the highest seeded one:
  // the gradient of ⟨seed, outputs⟩ without recording the inner product.
  std::vector<mp> adjoints(const std::vector<std::pair<int, mp>>& seeds) const {
    int top = -1;
    for (const auto& s : seeds) top = std::max(top, s.first);
    std::vector<mp> adj(static_cast<std::size_t>(top) + 1, mp(0));
    for (const auto& s : seeds)
      if (s.first >= 0) adj[s.first] += s.second;
    for (int i = top; i >= 0; --i) {
      if (adj[i] == 0) continue;
      for (const Arg& a : nodes_[i]) adj[a.node] += adj[i] * a.partial;
    }
    return adj;
  }
  std::size_t size() const { return nodes_.size(); }

 private:
  std::vector<std::vector<Arg>> nodes_;
};

inline thread_local Tape* current_tape = nullptr;

// Sets the tape new Vars are recorded on, for one scope.
class TapeScope {
 public:
  explicit TapeScope(Tape& t) : old_(current_tape) { current_tape = &t; }
  ~TapeScope() { current_tape = old_; }
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* old_;
};

struct Var {
  mp v;
  int id = -1;
  Var() : v(0) {}
  Var(const mp& x) : v(x) {}  // a constant
  Var(int x) : v(x) {}
  static Var input(const mp& x) {
    Var r(x);
    r.id = current_tape->push({});
    return r;
  }
};

inline Var make_node(mp value, std::vector<Tape::Arg>&& args) {
  Var r(value);
  if (!args.empty()) r.id = current_tape->push(std::move(args));
  return r;
}
inline void arg(std::vector<Tape::Arg>& a, const Var& x, mp partial) {
  if (x.id >= 0) a.push_back({x.id, std::move(partial)});
}

inline Var operator+(const Var& x, const Var& y) {
  std::vector<Tape::Arg> a;
  arg(a, x, mp(1));
  arg(a, y, mp(1));
  return make_node(x.v + y.v, std::move(a));
}
inline Var operator-(const Var& x, const Var& y) {
  std::vector<Tape::Arg> a;
  arg(a, x, mp(1));
  arg(a, y, mp(-1));
  return make_node(x.v - y.v, std::move(a));
}
inline Var operator-(const Var& x) {
  std::vector<Tape::Arg> a;
  arg(a, x, mp(-1));
  return make_node(-x.v, std::move(a));
}
inline Var operator*(const Var& x, const Var& y) {
  std::vector<Tape::Arg> a;
  arg(a, x, y.v);
  arg(a, y, x.v);
  return make_node(x.v * y.v, std::move(a));
}
inline Var operator/(const Var& x, const Var& y) {
  std::vector<Tape::Arg> a;
  const mp inv = 1 / y.v;
  arg(a, x, inv);
  arg(a, y, -x.v * inv * inv);
  return make_node(x.v * inv, std::move(a));
}
inline Var& operator+=(Var& x, const Var& y) { return x = x + y; }
inline Var& operator-=(Var& x, const Var& y) { return x = x - y; }
inline Var sqrt(const Var& x) {
  const mp s = boost::multiprecision::sqrt(x.v);
  std::vector<Tape::Arg> a;
  arg(a, x, 1 / (2 * s));
  return make_node(s, std::move(a));
}
inline Var exp(const Var& x) {
  const mp e = boost::multiprecision::exp(x.v);
  std::vector<Tape::Arg> a;
  arg(a, x, e);
  return make_node(e, std::move(a));
}
// One node for a dot product (the matrix-vector products dominate the tapes).
inline Var dot(const Var* x, const Var* y, int n) {
  mp s = 0;
  std::vector<Tape::Arg> a;
  for (int j = 0; j < n; ++j) {
    s += x[j].v * y[j].v;
    arg(a, x[j], y[j].v);
    arg(a, y[j], x[j].v);
  }
  return make_node(s, std::move(a));
}
inline mp dot(const mp* x, const mp* y, int n) {
  mp s = 0;
  for (int j = 0; j < n; ++j) s += x[j] * y[j];
  return s;
}
inline const mp& value(const mp& x) { return x; }
inline const mp& value(const Var& x) { return x.v; }

// Adjoint of x in a sweep from some output (0 when x is a constant or later).
inline mp adjoint(const std::vector<mp>& adj, const Var& x) {
  return x.id >= 0 && static_cast<std::size_t>(x.id) < adj.size() ? adj[x.id] : mp(0);
}

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
                       Status status, std::string correction, std::function<Evidence(const RunOptions&)> check,
                       bool slow = false) {
  return Entry{std::move(id),     Paper::GKA, std::move(ref),        std::move(statement), method, std::move(how),
               status,            std::move(correction), slow,         std::move(check)};
}

inline std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", x);
  return b;
}

}  // namespace ttr::proofs::gka_grad

namespace ttr::proofs {
std::vector<Entry> gka_solver_gradient_entries();  // gradients_solver.cpp
}  // namespace ttr::proofs
