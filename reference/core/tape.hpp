// A taped reverse-mode scalar, generic over the base scalar R (double, or
// mpfr_real from multiprecision.hpp): Taped<R> satisfies the scalar concept of
// scalar.hpp, so every forward form in reference/ written as a template over T
// can be instantiated with T = Taped<R> and differentiated automatically.
//
// Every operation on a Taped value appends to the thread's current Tape<R> a node
// holding the partial derivatives of its result with respect to its operands (a
// Wengert list); Tape::adjoints sweeps the list backwards, which is the chain rule
// and nothing else. Constants (id < 0) record nothing, so a forward pass over
// constants needs no tape; Taped::input(x) makes an independent variable and
// needs one (TapeScope sets it for a scope).
//
//   Tape<mp> tape;  TapeScope<mp> scope(tape);
//   Taped<mp> x = Taped<mp>::input(2), y = x * exp(x);
//   auto adj = tape.adjoints(y.id);   // adjoint(adj, x) = (1 + x) e^x
//
// Partials are computed in R when the node is made, so a result in R is exactly
// what the same expression evaluated on plain R values gives (for MPFR: at the
// thread's default precision; the tiers' fused mul_add_to is not used for Taped).
// Comparisons and abs' sign look at values only (piecewise derivatives; abs'(0) is
// taken as 0).
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <string>
#include <utility>
#include <vector>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

template <class R>
class Tape {
 public:
  struct Arg {
    int node;
    R partial;
  };
  int push(std::vector<Arg>&& args) {
    nodes_.push_back(std::move(args));
    return static_cast<int>(nodes_.size()) - 1;
  }
  // d(output)/d(node) for every node up to `output`.
  std::vector<R> adjoints(int output) const {
    std::vector<R> adj(static_cast<std::size_t>(output) + 1, R(0));
    adj[output] = 1;
    sweep(adj, output);
    return adj;
  }
  // Σ_k seed_k · d(node_k)/d(node) for every node up to the highest seeded one:
  // the gradient of ⟨seed, outputs⟩ without recording the inner product.
  std::vector<R> adjoints(const std::vector<std::pair<int, R>>& seeds) const {
    int top = -1;
    for (const auto& s : seeds) top = std::max(top, s.first);
    std::vector<R> adj(static_cast<std::size_t>(top) + 1, R(0));
    for (const auto& s : seeds)
      if (s.first >= 0) adj[s.first] += s.second;
    sweep(adj, top);
    return adj;
  }
  std::size_t size() const { return nodes_.size(); }

 private:
  void sweep(std::vector<R>& adj, int top) const {
    for (int i = top; i >= 0; --i) {
      if (adj[i] == 0) continue;
      for (const Arg& a : nodes_[i]) adj[a.node] += adj[i] * a.partial;
    }
  }
  std::vector<std::vector<Arg>> nodes_;
};

template <class R>
inline thread_local Tape<R>* current_tape = nullptr;

// Sets the tape new Taped<R> nodes are recorded on, for one scope.
template <class R>
class TapeScope {
 public:
  explicit TapeScope(Tape<R>& t) : old_(current_tape<R>) { current_tape<R> = &t; }
  ~TapeScope() { current_tape<R> = old_; }
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape<R>* old_;
};

template <class R>
struct Taped {
  using Arg = typename Tape<R>::Arg;
  R v;
  int id = -1;

  Taped() : v(0) {}
  Taped(const R& x) : v(x) {}  // a constant
  template <std::integral I>
  Taped(I x) : v(x) {}  // a constant (integers only: a double never narrows silently)
  // An independent variable on the current tape.
  static Taped input(const R& x) {
    Taped r(x);
    r.id = current_tape<R>->push({});
    return r;
  }
  // A node with the given partials (none: a constant).
  static Taped node(R value, std::vector<Arg>&& args) {
    Taped r(std::move(value));
    if (!args.empty()) r.id = current_tape<R>->push(std::move(args));
    return r;
  }
  static void arg(std::vector<Arg>& a, const Taped& x, R partial) {
    if (x.id >= 0) a.push_back({x.id, std::move(partial)});
  }

  friend Taped operator+(const Taped& x, const Taped& y) {
    std::vector<Arg> a;
    arg(a, x, R(1));
    arg(a, y, R(1));
    return node(x.v + y.v, std::move(a));
  }
  friend Taped operator-(const Taped& x, const Taped& y) {
    std::vector<Arg> a;
    arg(a, x, R(1));
    arg(a, y, R(-1));
    return node(x.v - y.v, std::move(a));
  }
  friend Taped operator-(const Taped& x) {
    std::vector<Arg> a;
    arg(a, x, R(-1));
    return node(-x.v, std::move(a));
  }
  friend Taped operator*(const Taped& x, const Taped& y) {
    std::vector<Arg> a;
    arg(a, x, y.v);
    arg(a, y, x.v);
    return node(x.v * y.v, std::move(a));
  }
  // x/y = x · (1/y): the value is x·inv with inv rounded once (as the GKA proof checks
  // have always evaluated it).
  friend Taped operator/(const Taped& x, const Taped& y) {
    std::vector<Arg> a;
    const R inv = 1 / y.v;
    arg(a, x, inv);
    arg(a, y, -x.v * inv * inv);
    return node(x.v * inv, std::move(a));
  }
  friend Taped& operator+=(Taped& x, const Taped& y) { return x = x + y; }
  friend Taped& operator-=(Taped& x, const Taped& y) { return x = x - y; }
  friend Taped& operator*=(Taped& x, const Taped& y) { return x = x * y; }
  friend Taped& operator/=(Taped& x, const Taped& y) { return x = x / y; }

  friend bool operator==(const Taped& x, const Taped& y) { return x.v == y.v; }
  friend bool operator!=(const Taped& x, const Taped& y) { return x.v != y.v; }
  friend bool operator<(const Taped& x, const Taped& y) { return x.v < y.v; }
  friend bool operator>(const Taped& x, const Taped& y) { return x.v > y.v; }
  friend bool operator<=(const Taped& x, const Taped& y) { return x.v <= y.v; }
  friend bool operator>=(const Taped& x, const Taped& y) { return x.v >= y.v; }

  friend Taped sqrt(const Taped& x) {
    using std::sqrt;
    const R s = sqrt(x.v);
    std::vector<Arg> a;
    arg(a, x, 1 / (2 * s));
    return node(s, std::move(a));
  }
  friend Taped exp(const Taped& x) {
    using std::exp;
    const R e = exp(x.v);
    std::vector<Arg> a;
    arg(a, x, e);
    return node(e, std::move(a));
  }
  friend Taped log(const Taped& x) {
    using std::log;
    std::vector<Arg> a;
    arg(a, x, 1 / x.v);
    return node(log(x.v), std::move(a));
  }
  friend Taped abs(const Taped& x) {
    std::vector<Arg> a;
    arg(a, x, R(x.v > 0 ? 1 : x.v < 0 ? -1 : 0));
    return node(x.v < 0 ? R(-x.v) : x.v, std::move(a));
  }
  // One node for a dot product (matrix-vector products dominate the tapes).
  friend Taped dot(const Taped* x, const Taped* y, int n) {
    R s = 0;
    std::vector<Arg> a;
    for (int j = 0; j < n; ++j) {
      s += x[j].v * y[j].v;
      arg(a, x[j], y[j].v);
      arg(a, y[j], x[j].v);
    }
    return node(s, std::move(a));
  }
};

// Adjoint of x in a sweep from some output (0 when x is a constant or later).
template <class R>
R adjoint(const std::vector<R>& adj, const Taped<R>& x) {
  return x.id >= 0 && static_cast<std::size_t>(x.id) < adj.size() ? adj[x.id] : R(0);
}

template <class R>
struct scalar_traits<Taped<R>> {
  static std::string name() { return "taped " + scalar_traits<R>::name(); }
  static Taped<R> from_double(double x) { return Taped<R>(scalar_traits<R>::from_double(x)); }
  static double to_double(const Taped<R>& x) { return scalar_traits<R>::to_double(x.v); }
};

template <class R>
struct precision_control<Taped<R>> {
  static unsigned set_bits(unsigned bits) { return precision_control<R>::set_bits(bits); }
};

// Tensor helpers: a tensor of independent variables, the values of a taped tensor,
// and the adjoints of a tensor's entries.
template <class R>
Tensor<Taped<R>> tape_inputs(const Tensor<R>& x) {
  Tensor<Taped<R>> r;
  r.shape = x.shape;
  r.data.reserve(x.data.size());
  for (const R& e : x.data) r.data.push_back(Taped<R>::input(e));
  return r;
}
template <class R>
Tensor<R> tape_values(const Tensor<Taped<R>>& x) {
  Tensor<R> r;
  r.shape = x.shape;
  r.data.reserve(x.data.size());
  for (const Taped<R>& e : x.data) r.data.push_back(e.v);
  return r;
}
template <class R>
Tensor<R> tape_adjoints(const std::vector<R>& adj, const Tensor<Taped<R>>& x) {
  Tensor<R> r;
  r.shape = x.shape;
  r.data.reserve(x.data.size());
  for (const Taped<R>& e : x.data) r.data.push_back(adjoint(adj, e));
  return r;
}

}  // namespace ttr
