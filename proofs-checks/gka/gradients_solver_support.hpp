// What gradients_solver.cpp (Lemma 2) and gradients_alg2.cpp (App. C.1, Alg. 2)
// share: the systems, the recorded unrolled iterations and their reverse-mode
// gradients, Alg. 2 as printed, and the tolerances' amplification G_r (the argument
// is in gradients_solver.cpp's header comment).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "proofs-checks/gka/gradients_ad.hpp"
#include "proofs-checks/support/dense.hpp"
#include "reference/solvers/chebyshev.hpp"
#include "reference/solvers/iterative.hpp"

namespace ttr::proofs::gka_solver {

using namespace gka_grad;
using dense::dot;
using dense::Mat;
using dense::outer;
using dense::operator*;  // scalar × std::vector

struct System {
  int n = 0;
  Mat<mp> A;
  mp L, mu;
};

inline System random_system(std::mt19937_64& rng, int n, int keys) {
  System s;
  s.n = n;
  const Mat<mp> H(n, n, random_gram(rng, n, keys));
  const mp a = uniform(rng, 0.02, 0.09), f = H.norm();  // κ = (1+a)/a ∈ [12, 51]
  s.A = dense::plus_identity(H, mp(a * f));
  s.L = f + a * f;
  s.mu = a * f;
  return s;
}

// A recorded unrolled iteration (Alg. 1 or CG) up to r_max; sweep(r) gives the
// reverse-mode gradient of ⟨dξ, ξ_r⟩.
struct Recorded {
  std::unique_ptr<Tape> tape = std::make_unique<Tape>();
  Vec<Var> A, q;  // A row-major, as the unrolled solvers of gradients_ad.hpp take it
  std::vector<Vec<Var>> xi;  // Chebyshev: ξ_{-1}..ξ_{r_max} (index i+1); CG: x_1..x_{r_max} (index i-1)
  bool cg = false;
};

inline Recorded record(const System& s, const Vec<mp>& q, int r_max, bool cg) {
  Recorded rec;
  rec.cg = cg;
  TapeScope scope(*rec.tape);
  for (const mp& a : s.A.values()) rec.A.push_back(Var::input(a));
  for (const mp& x : q) rec.q.push_back(Var::input(x));
  rec.xi = cg ? cg_iterates(rec.A, rec.q, s.n, r_max) : chebyshev_alg1(rec.A, rec.q, s.n, s.L, s.mu, r_max);
  return rec;
}

struct AutoGrad {
  Vec<mp> dq, dA;            // dA row-major
  std::vector<Vec<mp>> dxi;  // Chebyshev: dξ_0..dξ_r (index i)
};

inline AutoGrad sweep(Recorded& rec, const Vec<mp>& dxi_r, int r) {
  const int n = static_cast<int>(rec.q.size());
  const Vec<Var>& out = rec.cg ? rec.xi[r - 1] : rec.xi[r + 1];
  std::vector<std::pair<int, mp>> seeds;  // the gradient of ⟨dξ_r, ξ_r⟩
  for (int j = 0; j < n; ++j) seeds.emplace_back(out[j].id, dxi_r[j]);
  const auto adj = rec.tape->adjoints(seeds);
  AutoGrad g;
  for (const Var& x : rec.q) g.dq.push_back(adjoint(adj, x));
  for (const Var& x : rec.A) g.dA.push_back(adjoint(adj, x));
  if (!rec.cg)
    for (int i = 0; i <= r; ++i) {
      Vec<mp> v;
      for (const Var& x : rec.xi[i + 1]) v.push_back(adjoint(adj, x));
      g.dxi.push_back(v);
    }
  return g;
}

inline auto applier(const System& s) {
  return [&s](const mp* x, mp* y) {
    for (int i = 0; i < s.n; ++i) y[i] = dot(s.A.row_data(i), x, s.n);
  };
}

// Weights ω_0..ω_r of Alg. 1's schedule from ω_0 = 2.
inline Vec<mp> omegas(const System& s, int r) {
  const mp rho = (s.L - s.mu) / (s.L + s.mu);
  Vec<mp> w{mp(2)};
  for (int i = 1; i <= r; ++i) w.push_back(4 / (4 - rho * rho * w.back()));
  return w;
}

// G_r = Π_{i=1}^r 4/(ρ²ω_i²): first-order amplification of rounding by the
// weight reversal of eq. (57)/(62) over r steps (≥ that of the iterate reversal).
inline double growth(const System& s, int r) {
  const Vec<mp> w = omegas(s, r);
  const mp rho = (s.L - s.mu) / (s.L + s.mu);
  mp g = 1;
  for (int i = 1; i <= r; ++i) g *= 4 / (rho * rho * w[i] * w[i]);
  return to_d(g);
}

// Largest relative error scaled by the reversal's amplification G_r.
struct Scaled {
  double worst = 0, raw = 0, G = 1;
  void add(const RelErr& e, double g) {
    worst = std::max(worst, e.value() / g);
    raw = std::max(raw, e.value());
    G = std::max(G, g);
  }
  std::string detail() const {
    return "unscaled largest relative error " + fmt(raw) + ", largest G_r " + fmt(G);
  }
};
inline constexpr const char* kScaled =
    "max over (system, r) of (relative error vs reverse mode of unrolled Alg. 1) / G_r";

// ---------------------------------------------------------------------------
// GKA Alg. 2 as printed (eqs. (60)-(64) in the printed order), with switches for
// the two corrections: fix60 uses −(2ν_i/(L+μ))q in eq. (60); fix63 weights dξ_0
// by 2/(L+μ) (the initialised ν_0 = 1) rather than by ν_0 from eq. (62).
// Optionally takes the stored iterates instead of reversing (to isolate eq. (64)).
struct Alg2 {
  Vec<mp> dq;
  Mat<mp> dH;
  std::vector<Vec<mp>> xi_rec;  // ξ_{i-2} recovered at step i (index i-2+1 = i-1), ξ_{-1}..ξ_{r-2}
  std::vector<Vec<mp>> dxi;     // dξ_0..dξ_r (index i)
  Vec<mp> nu;                   // ν_0..ν_r as the loop leaves them
};

inline Alg2 alg2(const System& s, const Vec<mp>& q, const std::vector<Vec<mp>>& stored, const mp& omega_r,
          const Vec<mp>& dxi_r, int r, bool fix60, bool fix63, bool use_stored = false) {
  const int n = s.n;
  const mp LM = s.L + s.mu, rho = (s.L - s.mu) / LM;
  Alg2 out;
  out.xi_rec.assign(r, Vec<mp>());
  out.dxi.assign(r + 1, Vec<mp>());
  out.nu.assign(r + 2, mp(0));
  // Initialize: dξ_{r+1} ← 0, ν_r ← ω_r, ν_{r+1} ← 0, ν_0 ← 1, dq, dH.
  Vec<mp> d_next(n, mp(0)), d = dxi_r;
  out.nu[r] = omega_r;
  out.nu[r + 1] = 0;
  out.nu[0] = 1;
  const mp cr = 2 * out.nu[r] / LM;
  Vec<mp> xi = stored[r + 1], xim1 = stored[r];
  out.dq = cr * d;
  out.dH = outer(mp(-cr) * d, xim1);
  out.dxi[r] = d;
  for (int i = r; i >= 1; --i) {
    const mp nui = out.nu[i], ci = 2 * nui / LM;
    // (60)
    const Vec<mp> Ax = s.A * xim1;
    Vec<mp> xim2(n);
    for (int j = 0; j < n; ++j)
      xim2[j] = -(xi[j] - (nui * xim1[j] - ci * Ax[j]) + (fix60 ? -ci : ci) * q[j]) / (nui - 1);
    out.xi_rec[i - 1] = xim2;
    if (use_stored) xim2 = stored[i - 1];
    // (61)
    const Vec<mp> Ad = s.A * d;
    Vec<mp> dprev(n);
    for (int j = 0; j < n; ++j) dprev[j] = (nui * d[j] - ci * Ad[j]) - (out.nu[i + 1] - 1) * d_next[j];
    // (62)
    out.nu[i - 1] = 4 / (rho * rho) * (1 - 1 / nui);
    // (63), (64)
    const mp w = (fix63 && i == 1) ? mp(1) : out.nu[i - 1];
    const mp cw = 2 * w / LM;
    for (int j = 0; j < n; ++j) out.dq[j] += cw * dprev[j];
    out.dH -= outer(cw * dprev, xim2);
    out.dxi[i - 1] = dprev;
    d_next = d;
    d = dprev;
    xi = xim1;
    xim1 = xim2;
  }
  return out;
}

// ---------------------------------------------------------------------------
struct Case {
  System s;
  Vec<mp> q, dxi;
};

// Runs fn(case, recorded, r) over random systems and r in `rs`.
template <class Fn>
void over_cases(const ProofOptions& opt, const std::string& id, int n_lo, int n_hi, int systems, const std::vector<int>& rs,
                bool cg, Fn fn) {
  auto rng = entry_rng(opt, id);
  const int r_max = *std::max_element(rs.begin(), rs.end());
  for (int k = 0; k < systems; ++k) {
    Case c;
    const int n = n_lo + static_cast<int>(rng() % (n_hi - n_lo + 1));
    // CG needs n distinct eigenvalues to run n steps without breaking down: 2n keys.
    c.s = random_system(rng, n, cg ? 2 * n : 1 + static_cast<int>(rng() % (2 * n)));
    c.q = random_vec(rng, n);
    c.dxi = random_vec(rng, n);
    Recorded rec = record(c.s, c.q, r_max, cg);
    for (int r : rs) fn(c, rec, r, k);
  }
}

// eq. (56) as printed: dξ_{r−1} = A_rdξ_r, dξ_{i−2} = A_{i−1}dξ_{i−1} + b_idξ_i, with
// the forward weights ω_i. Returns dξ_0..dξ_r.
inline std::vector<Vec<mp>> dxi_eq56(const Case& c, int r) {
  const Vec<mp> w = omegas(c.s, r);
  const mp LM = c.s.L + c.s.mu;
  const int n = c.s.n;
  auto Ai = [&](int i, const Vec<mp>& x) {
    const Vec<mp> Ax = c.s.A * x;
    Vec<mp> y(n);
    for (int j = 0; j < n; ++j) y[j] = w[i] * x[j] - 2 * w[i] / LM * Ax[j];
    return y;
  };
  std::vector<Vec<mp>> d(r + 1);
  d[r] = c.dxi;
  d[r - 1] = Ai(r, d[r]);
  for (int i = r; i >= 2; --i) {
    d[i - 2] = Ai(i - 1, d[i - 1]);
    for (int j = 0; j < n; ++j) d[i - 2][j] += -(w[i] - 1) * d[i][j];
  }
  return d;
}

inline std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int r = lo; r <= hi; ++r) v.push_back(r);
  return v;
}
// r values for the App. C.1 entries (every r in the full run).
inline std::vector<int> alg2_rs(const ProofOptions& opt) {
  return opt.full ? range(1, 30) : std::vector<int>{1, 2, 3, 4, 5, 7, 10, 15, 20, 30};
}
inline std::vector<int> few_rs(const ProofOptions& opt) {
  return opt.full ? range(1, 30) : std::vector<int>{1, 2, 5, 30};
}
inline int alg2_systems(const ProofOptions& opt) { return opt.full ? 12 : 3; }

inline std::string seed_str(const ProofOptions& opt) { return "seed " + std::to_string(opt.seed); }

// P = [Alg. 1 on e_1, …, e_n], so that ξ_r = P q (eq. (52)).
inline Mat<mp> alg1_matrix(const System& s, int r) {
  Mat<mp> P(s.n, s.n);
  for (int j = 0; j < s.n; ++j) {
    Vec<mp> ej(s.n, mp(0));
    ej[j] = 1;
    const Vec<mp> col = chebyshev_alg1(s.A.values(), ej, s.n, s.L, s.mu, r).back();
    for (int i = 0; i < s.n; ++i) P(i, j) = col[i];
  }
  return P;
}

inline constexpr const char* kVsReverse = "max |formula − reverse mode of unrolled Alg. 1| / max |reverse mode|";

}  // namespace ttr::proofs::gka_solver
