// Shared by the backward-pass tests (tests/backward/): the two independent
// gradients a hand-derived adjoint is held against, both in MPFR at 512 bits.
//
//  * tape_gradient: reverse mode (reference/core/tape.hpp) through the FORWARD
//    reference code instantiated with Taped<mp>: the chain rule applied to every
//    operation the forward performs, with no knowledge of the adjoint recurrence.
//  * fd_gradient: central differences of the scalar loss, one input element at a
//    time, on the forward instantiated with mp.
//
// The loss is L = Σ_name ⟨cot[name], out[name]⟩ over the forward's outputs with
// given cotangents (do for o, dht for ht, ...): its gradient is the vector–Jacobian
// product the backward computes. A forward is a generic callable taking a
// TensorMap<S> of inputs and returning a TensorMap<S> of outputs, for S = mp and
// S = Taped<mp>.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/layers/adapter.hpp"
#include "reference/core/multiprecision.hpp"
#include "reference/core/tape.hpp"
#include "reference/core/tensor.hpp"
#include "tests/support/make_inputs.hpp"

namespace ttr::test::grad {

using mp = ttr::mpfr_real;
using tmp = ttr::Taped<mp>;

// 512-bit working precision for one test; restores the thread's default after.
struct Mp512 {
  unsigned saved = mp::default_precision();
  Mp512() { EXPECT_GE(ttr::precision_control<mp>::set_bits(512), 512u); }
  ~Mp512() { mp::default_precision(saved); }
};

// Uniform doubles in [lo, hi] (exact in mp).
inline Tensor<mp> rand_mp(Shape shape, std::uint64_t seed, double lo, double hi) {
  const Tensor<double> d = uniform(std::move(shape), seed, lo, hi);
  Tensor<mp> x;
  x.shape = d.shape;
  for (double e : d.data) x.data.emplace_back(e);
  return x;
}

template <class S>
S loss(const TensorMap<S>& out, const TensorMap<mp>& cot) {
  S l = S(mp(0));
  for (const auto& [name, c] : cot) {
    const Tensor<S>& o = out.at(name);
    EXPECT_EQ(o.shape, c.shape) << name;
    for (std::size_t e = 0; e < c.data.size(); ++e) l += S(c.data[e]) * o.data[e];
  }
  return l;
}

// Reverse mode through the forward: ∂L/∂input for every input tensor.
template <class F>
TensorMap<mp> tape_gradient(F&& forward, const TensorMap<mp>& in, const TensorMap<mp>& cot) {
  Tape<mp> tape;
  TapeScope<mp> scope(tape);
  TensorMap<tmp> tin;
  for (const auto& [name, x] : in) tin[name] = tape_inputs(x);
  const TensorMap<tmp> out = forward(tin);
  std::vector<std::pair<int, mp>> seeds;  // L = Σ cot·out, seeded without recording it
  for (const auto& [name, c] : cot) {
    const Tensor<tmp>& o = out.at(name);
    EXPECT_EQ(o.shape, c.shape) << name;
    for (std::size_t e = 0; e < c.data.size(); ++e)
      if (o.data[e].id >= 0) seeds.emplace_back(o.data[e].id, c.data[e]);
  }
  const std::vector<mp> adj = tape.adjoints(seeds);
  TensorMap<mp> g;
  for (const auto& [name, x] : tin) g[name] = tape_adjoints(adj, x);
  return g;
}

// Central differences (L(x + h e) − L(x − h e)) / 2h for every element of the inputs
// named in `which` (all inputs when empty).
template <class F>
TensorMap<mp> fd_gradient(F&& forward, TensorMap<mp> in, const TensorMap<mp>& cot, const mp& h,
                          const std::vector<std::string>& which = {}) {
  TensorMap<mp> g;
  for (auto& [name, x] : in) {
    if (!which.empty() && std::find(which.begin(), which.end(), name) == which.end()) continue;
    Tensor<mp>& gx = g[name];
    gx.shape = x.shape;
    for (std::size_t e = 0; e < x.data.size(); ++e) {
      const mp x0 = x.data[e];
      x.data[e] = x0 + h;
      const mp lp = loss(forward(in), cot);
      x.data[e] = x0 - h;
      const mp lm = loss(forward(in), cot);
      x.data[e] = x0;
      gx.data.push_back((lp - lm) / (2 * h));
    }
  }
  return g;
}

// max_e |got_e − want_e| / max_e |want_e| (normwise).
inline double rel_err(const Tensor<mp>& got, const Tensor<mp>& want) {
  EXPECT_EQ(got.shape, want.shape);
  if (got.shape != want.shape) return 1.0;
  mp num = 0, den = 0;
  for (std::size_t e = 0; e < want.data.size(); ++e) {
    num = std::max(num, mp(abs(got.data[e] - want.data[e])));
    den = std::max(den, mp(abs(want.data[e])));
  }
  return (den == 0 ? num : mp(num / den)).convert_to<double>();
}
inline double max_abs(const Tensor<mp>& x) {
  mp m = 0;
  for (const mp& e : x.data) m = std::max(m, mp(abs(e)));
  return m.convert_to<double>();
}

// Every gradient named in `want` agrees with `got` to `tol` (normwise relative) and
// is not identically zero (a zero gradient would agree with a zero adjoint).
// TTR_GRAD_VERBOSE=1 prints the measured errors.
inline double expect_grads_close(const TensorMap<mp>& got, const TensorMap<mp>& want, double tol, const char* what) {
  double worst = 0;
  for (const auto& [name, w] : want) {
    const auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << what << ": no gradient for " << name;
      continue;
    }
    const double e = rel_err(it->second, w);
    worst = std::max(worst, e);
    EXPECT_LT(e, tol) << what << ": d" << name << " relative error " << e;
    EXPECT_GT(max_abs(w), 1e-6) << what << ": d" << name << " vanishes: the comparison would prove nothing";
    if (std::getenv("TTR_GRAD_VERBOSE")) std::cout << "  " << what << " d" << name << ": " << e << "\n";
  }
  return worst;
}

// The central-difference step: h = 2^-120. Truncation error h²/6·|L'''| ≈ 3e-74·|L'''|;
// rounding error ≈ 2^-512·|L|/h ≈ 1e-118·|L|. The hand adjoint must agree to ≥ 60
// digits (issue 16): 1e-60 leaves margin for |L'''| up to ~1e13 relative to the
// gradient (with h = 2^-100 the measured errors, ≤ 2e-59, put it at ≲ 1e3).
inline mp fd_step() { return ldexp(mp(1), -120); }
inline constexpr double kFdTol = 1e-60;
// Hand adjoint vs reverse mode, both at 512 bits (unit roundoff ≈ 7.5e-155): the two
// sum the same terms in different orders over O(T·K·V) operations of size ≲ 1e2, so
// they agree to ~1e-150; 1e-70 is the project's MPFR agreement bar.
inline constexpr double kTapeTol = 1e-70;

// An optional input or cotangent, or nullptr: the adapters' optional_input,
// for the tensors the backward tests build by hand.
template <class S>
const Tensor<S>* opt(const TensorMap<S>& in, const char* name) {
  return ttr::layers::optional_input(in, name);
}

// A test problem: inputs (forward tensors) and the cotangents of the outputs.
struct Problem {
  TensorMap<mp> in, cot;
};

}  // namespace ttr::test::grad
