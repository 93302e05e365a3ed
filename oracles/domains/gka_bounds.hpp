// GKA's guaranteed domain (docs/domains/gka.md), shared by the
// forward derivation (gka.cpp) and the backward one (gka_backward.cpp): the
// per-token bounds of the forward quantities, on which the adjoint's bounds are
// built, and the values of the conditions.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "oracles/domains/sequences.hpp"

namespace ttr::domains::gka_detail {

constexpr double kInf = std::numeric_limits<double>::infinity();

// num/den for bounds: 0 when the numerator is (a zero quantity stays zero whatever
// divides it), +inf when the denominator is not positive (no lower bound: the
// quantity is not bounded by the inputs' magnitudes).
inline double quot(double num, double den) {
  if (num == 0.0) return 0.0;
  return den > 0.0 ? num / den : kInf;
}
// a·b for bounds: 0 when either factor is (0·inf would be NaN).
inline double mul(double a, double b) { return a == 0.0 || b == 0.0 ? 0.0 : a * b; }

enum class Solver { exact, chebyshev, cg };

// The configuration as the forms hold it. a, λ and scale are rounded to the dtype
// by the sequential form and to fp32 by the chunk form (received_number), while the
// exact trace runs on the unrounded values: the bounds take the less favourable.
struct Params {
  Solver solver = Solver::exact;
  bool adaptive = true;
  double a_lo = 0.0, a_hi = 0.0;      // adaptive ridge strength a
  double lam_lo = 0.0, lam_hi = 0.0;  // fixed λ
  double s = 1.0;                     // scale
  int iters = 30;
  double omega0 = 2.0, omega0_lo = 2.0;  // ω_0 as given and as rounded (the schedule grows with it)
  bool l2 = false;
  bool alg2 = false;  // sequential backward: chebyshev_backward = alg2
  Form form = Form::sequential;
  Direction direction = Direction::forward;
  int chunk = 64;
  // The unit roundoff of the iterates the chunk backward's reversal starts from and
  // retraces: the forward narrows ξ to the dtype before each product (2⁻⁸ bf16, 2⁻¹¹
  // fp16, 2⁻²⁴ fp32), while the reversal itself runs in fp32.
  double u_iterate = 0x1p-24;
};

// One token of one (sequence, head) problem: the inputs' norms and the forward
// bounds (docs/domains/gka.md, "Forward": the state, the regulariser, the solve).
struct Token {
  double kap = 0, nu = 0, sig = 0;      // ‖k_t‖, ‖v_t‖, ‖scale·q_t‖ (normalised rows with l2norm)
  double beta = 1, gamma = 1;           // β_t, γ_t = e^{g_t}
  double lq = 1, lk = 1;                // 1/√(‖x‖² + 1e-6) of the L2 norm (1 without)
  double dnorm = 0;                     // ‖do_t‖
  bool alpha = false;                   // the α-connection is given
  double H = 0, H_prev = 0, S = 0, S_prev = 0;  // Ĥ_t ≥ ‖H_t‖_F, Ŝ_t ≥ ‖S_t‖_F, and at t − 1
  double h = 0, n = 0;                  // ‖H_t‖_F ≥ h_t; λ_min(H_t) ≥ −n_t
  bool zero = true;                     // H_t = 0 exactly (nothing written, no H_0)
  bool skip = false;                    // degenerate: λ_t = 0, x_t = 0, no solve
  double m = 0;                         // λ_min(H_t + λ_t I) ≥ m_t = λ_lo − n_t
  double lam_lo = 0, lam_hi = 0;        // λ_t
  double lmu_lo = 0, lmu_hi = 0;        // L + μ = ‖H_t‖_F + 2λ_t
  double rho_lo = 0, rho_hi = 0;        // ρ = (L − μ)/(L + μ)
  double phat = 1;                      // |p_i| on the spectrum (Chebyshev's error polynomials)
  double theta = 0, phi = 0;            // ‖H_t‖_F/m_t, λ_t/m_t
  double xm = 0;                        // m_t·X_t: (1 + p̂)‖scale·q_t‖ (chebyshev), ‖scale·q_t‖
  double X = 0;                         // every iterate and the solution x_t
  double rhat = 0;                      // every residual (H + λI)ξ − scale·q
  double Qt = 0;                        // q̃_t
  double omax = 1;                      // Chebyshev's weights ω_i, i ≥ 1 (and 1 for c_0)
  double cbar = 0;                      // Chebyshev's c_i = 2ω_i/(L + μ) ≤ 2·omax/(L + μ)_lo
};

struct ProblemBounds {
  Problem p;
  std::vector<Token> tk;
  double D_H = 0, D_S = 0;  // ‖dhkk‖_F, ‖dht‖_F of this problem
};

// The values of the conditions, maximised over problems and tokens.
struct Bounds {
  double inputs = 0, energy = 0, gate = 0, states = 0, norm = 0, gram = 0, scalars = 0;
  double iterates = 0, solve = 0, output = 0, diagnostics = 0;
  // backward
  double adjoint = 0, solve_adjoint = 0, gradients = 0, gate_gradients = 0;
  double chunk_adjoint = 0, chunk_operands = 0;
  double reversal = 0;  // the chunk backward's Alg. 2 reversal: its rounding noise in fp32
};

// b = max(b, v). A NaN v is a bound that could not be formed (0·∞ or ∞ − ∞ of
// terms already unbounded): no finite bound, so +∞, beyond every limit and reported
// as `inf` (not "-nan") where the condition is named.
inline void up(double& b, double v) {
  if (std::isnan(b) || std::isnan(v)) b = kInf;
  else if (b < v) b = v;
}

// The Cholesky factorisation A = LLᵀ and its substitutions for a right-hand side of
// norm ≤ rhs (reference/solvers/dense.hpp), A's entries ≤ A_hat, its eigenvalues ≥ m:
// pivots d ∈ [m, A_jj], |L_ij| ≤ √A_ii, L_ij's numerator ≤ 2Â; ‖L⁻¹b‖ ≤ b/√m with
// partial sums ≤ b + √Â·b/√m; ‖x‖ ≤ b/m with partial sums ≤ b/√m + √Â·b/m.
inline double cholesky_bound(double A_hat, double m, double rhs) {
  const double sA = std::sqrt(A_hat), sm = m > 0 ? std::sqrt(m) : 0.0;
  return std::max({2.0 * A_hat, rhs + mul(sA, quot(rhs, sm)), quot(rhs, sm) + mul(sA, quot(rhs, m))});
}

// The partial results of one Chebyshev step ξ_{i+1} = ξ_i − c_i r_i + (ω_i − 1)(ξ_i − ξ_{i−1})
// (GKA Alg. 1) for a right-hand side of norm ≤ rhs, per eigencomponent of A (x*_j ≤ rhs/m,
// y = 1 − cλ_j ∈ [−ρ, 1), |p_i(y)| ≤ p̂): c_i r_i = −ω_i(1 − y)p_i x*_j; ξ_i − c_i r_i =
// (1 + (ω_i(1 − y) − 1)p_i)x*_j with ω_i(1 − y) − 1 ∈ [−1, ω_i(1 + ρ) − 1];
// ξ_i − ξ_{i−1} = (p_{i−1} − p_i)x*_j, and ξ_0 − ξ_{−1} = (1 − y)x*_j.
inline double chebyshev_partials(const Token& t, double rhs) {
  const double w1 = t.omax * (1.0 + t.rho_hi);
  return mul(std::max({1.0 + std::max(1.0, w1 - 1.0) * t.phat, w1 * t.phat, std::max(2.0 * t.phat, 1.0 + t.rho_hi)}),
             quot(rhs, t.m));
}

// The Chebyshev factors of one token (docs/domains/gka.md, "The Chebyshev solve"),
// at the largest ρ the token can have (every factor grows with ρ):
//   ω_i ≤ ω_i(ρ_hi);  ‖dξ_j‖ ≤ F_j‖dx‖, F_j = U_{r−j}(z)·Π_{n=j+1..r} ρω_n/2,
// z = 1 + 2n_t/h_t the largest |y/ρ| on the spectrum (1 when H_t is PSD).
// And |p_i| ≤ ε_i on the spectrum: p_i(y) = π_i(y/ρ)/τ_{i+1} with π_i(z) = T_{i+1}(z) +
// (2/ω_0 − 1)zU_i(z), |π_i| ≤ π_i(z) on [−1, z], τ_{i+1} = τ_1 Π_{n=1..i} 2/(ρω_n), τ_1 = 2/(ρω_0)
// (ω_0 = 0: π_i = zU_i, τ_1 = 1/ρ, the same limit); ε_i falls like the Chebyshev rate.
struct Cheb {
  std::vector<double> omega, F, eps;  // ω_0..ω_r, F_0..F_r, ε_0..ε_r
  double Fmax = 0;               // max_j F_j (also dξ_{−1} = −(ω_1 − 1)dξ_1)
  double sum_wF = 0;             // Σ_j 2ω_j F_j (j ≥ 1) + 2F_0: Φ = sum_wF/(L + μ)_lo
};
Cheb chebyshev_factors(double rho_hi, double z, int r, double omega0);
// For both values of ω_0 the trace and the form may use (elementwise maxima).
Cheb chebyshev_factors(const Params& P, double rho_hi, double z);

// The backward's bounds of one problem (gka_backward.cpp), added to b.
void backward_bounds(const Params& P, const ProblemBounds& pr, Bounds& b);

}  // namespace ttr::domains::gka_detail
