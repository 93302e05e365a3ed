// First-order and Krylov solvers for A ξ = q, A symmetric positive definite with
// spectrum in [μ, L] (the settings of GKA §3, eq. (4) and App. B): conjugate
// gradient, gradient descent with the optimal fixed step 2/(L+μ), and Nesterov's
// accelerated gradient for strongly convex quadratics. All start from ξ = 0, run
// `iters` steps, and take `apply(x, y)`: y = A x.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/core/scalar.hpp"

namespace ttr {

// What conjugate_gradient computed, for its reverse pass (cg_backward.hpp): for the
// `steps` completed iterations i = 0..steps-1, the direction p_i, A p_i, the residual
// r_i, and the scalars rr_i = r_i·r_i, pAp_i = p_i·A p_i, α_i, β_i; also r_steps and
// rr_steps.
template <class T>
struct CgTrace {
  int steps = 0;
  std::vector<std::vector<T>> p, Ap, r;
  std::vector<T> rr, pAp, alpha, beta;
};

// Whether CG's divisor x (‖r_i‖² or p_iᵀAp_i) is 0. In an interval tier the
// comparison is undecidable where x's enclosure contains 0 (Boost's mpfi throws from
// a noexcept operator, i.e. aborts): there CG's branch, and any enclosure of its
// result, does not exist, and this throws a runtime_error saying so.
template <class T>
bool cg_divisor_is_zero(const T& x, const char* what, int step) {
  if constexpr (is_interval_v<T>) {
    if (!(scalar_traits<T>::lower(x) > 0.0 || scalar_traits<T>::upper(x) < 0.0))
      throw std::runtime_error(std::string("CG step ") + std::to_string(step) + ": the enclosure of " + what +
                               " contains 0");
    return false;
  } else {
    return x == from_double<T>(0.0);
  }
}

// Conjugate gradient (Hestenes–Stiefel). Stops early when the residual is
// exactly zero, where the next step would divide 0 by 0. With `trace`, records
// every iterate (the arithmetic is the same with and without).
template <class T, class Apply>
std::vector<T> conjugate_gradient(Apply&& apply, const T* q, int n, int iters, CgTrace<T>* trace = nullptr) {
  const T zero = from_double<T>(0.0);
  std::vector<T> x(n, zero), r(q, q + n), p(q, q + n), Ap(n);
  T rr = dot(r.data(), r.data(), n);
  if (trace) *trace = CgTrace<T>{};
  for (int i = 0; i < iters && !cg_divisor_is_zero(rr, "‖r_i‖²", i); ++i) {
    apply(p.data(), Ap.data());
    const T pAp = dot(p.data(), Ap.data(), n);
    if (cg_divisor_is_zero(pAp, "p_iᵀAp_i", i)) break;
    const T alpha = rr / pAp;
    if (trace) {
      trace->p.push_back(p);
      trace->Ap.push_back(Ap);
      trace->r.push_back(r);
      trace->rr.push_back(rr);
      trace->pAp.push_back(pAp);
      trace->alpha.push_back(alpha);
    }
    for (int j = 0; j < n; ++j) {
      x[j] += alpha * p[j];
      r[j] -= alpha * Ap[j];
    }
    const T rr_new = dot(r.data(), r.data(), n);
    const T beta = rr_new / rr;
    for (int j = 0; j < n; ++j) p[j] = r[j] + beta * p[j];
    rr = rr_new;
    if (trace) {
      trace->beta.push_back(beta);
      ++trace->steps;
    }
  }
  if (trace) {
    trace->r.push_back(r);
    trace->rr.push_back(rr);
  }
  return x;
}

// ξ_{i} = ξ_{i-1} − (2/(L+μ)) (A ξ_{i-1} − q): contraction factor (κ−1)/(κ+1).
template <class T, class Apply>
std::vector<T> gradient_descent(Apply&& apply, const T* q, int n, const T& L, const T& mu, int iters) {
  const T step = from_double<T>(2.0) / (L + mu);
  std::vector<T> x(n, from_double<T>(0.0)), Ax(n);
  for (int i = 0; i < iters; ++i) {
    apply(x.data(), Ax.data());
    for (int j = 0; j < n; ++j) x[j] -= step * (Ax[j] - q[j]);
  }
  return x;
}

// Nesterov's accelerated gradient with constant momentum (√κ−1)/(√κ+1) and step
// 1/L: y = ξ_i + m (ξ_i − ξ_{i-1}), ξ_{i+1} = y − (A y − q)/L.
template <class T, class Apply>
std::vector<T> nesterov_agd(Apply&& apply, const T* q, int n, const T& L, const T& mu, int iters) {
  using std::sqrt;
  const T one = from_double<T>(1.0);
  const T s = sqrt(L / mu);
  const T m = (s - one) / (s + one);
  std::vector<T> x(n, from_double<T>(0.0)), x_prev = x, y(n), Ay(n);
  for (int i = 0; i < iters; ++i) {
    for (int j = 0; j < n; ++j) y[j] = x[j] + m * (x[j] - x_prev[j]);
    apply(y.data(), Ay.data());
    x_prev = x;
    for (int j = 0; j < n; ++j) x[j] = y[j] - (Ay[j] - q[j]) / L;
  }
  return x;
}

}  // namespace ttr
