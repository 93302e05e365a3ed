// GKA gradient statements at the solver level: Lemma 2 in full (Chebyshev's
// implicit gradient, Table 1, equals the reverse-mode gradient of the unrolled
// iteration for every r; for CG it does not), the proof of Lemma 2 (eqs. (52),
// (53)), and App. C.1: eqs. (54)-(64) and Alg. 2.
//
// Independent side: reverse mode (gradients_ad.hpp) of Alg. 1 written line by line
// (ω_0 = 2 as in the text, App. B.1 and Lemma 3) and of CG written here, with
// every entry of A and of q an input, loss ⟨dξ_r, ξ_r⟩. Under test: the printed
// formulas (implemented as printed here) and the reference solvers
// (reference/solvers/chebyshev.hpp, iterative.hpp).
//
// Systems: A = H + λI with H = Σ k_jk_jᵀ random, λ = a‖H‖_F, a ∈ [0.02, 0.09],
// L = ‖H‖_F + λ, μ = λ (GKA eq. (4): spectrum in [μ, L], κ = (a+1)/a ∈ [12, 51],
// the regime κ ≥ 10 of GKA Remark 2).
// Tolerance: exact_tolerance(bits) = 2^(48−bits). The forward iterations are
// contractions (rounding damped). Alg. 2 runs recursions backwards: the weight
// reversal ν_{i−1} = (4/ρ²)(1 − 1/ν_i) (eq. (57)/(62)) has derivative 4/(ρ²ν_i²),
// → 1/(ω*_1 − 1) ≈ 1.8 (κ = 51) to 3.6 (κ = 12) per step near the fixed point,
// and the iterate reversal (eq. (59)/(60)) divides by b_i = −(ω_i − 1) with
// growth ≈ (ω_i − 1)^(−1/2) per step. So entries that reverse compare
// error / G_r ≤ 2^(48−bits), with G_r = Π_{i=1}^r 4/(ρ²ω_i²) the first-order
// amplification of the weight reversal (which dominates the iterate reversal's);
// G_r reaches ~1e16 at κ = 12, r = 30 (Remark 2's "numerically stable" reversal
// loses that many digits: reported in each entry's detail).
#include <algorithm>
#include <map>
#include <memory>

#include "proofs-checks/gka/gka.hpp"
#include "proofs-checks/gka/gradients_ad.hpp"
#include "proofs-checks/support/dense.hpp"
#include "reference/solvers/chebyshev.hpp"
#include "reference/solvers/iterative.hpp"

namespace ttr::proofs {
namespace {

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

System random_system(std::mt19937_64& rng, int n, int keys) {
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

Recorded record(const System& s, const Vec<mp>& q, int r_max, bool cg) {
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

AutoGrad sweep(Recorded& rec, const Vec<mp>& dxi_r, int r) {
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

auto applier(const System& s) {
  return [&s](const mp* x, mp* y) {
    for (int i = 0; i < s.n; ++i) y[i] = dot(s.A.row_data(i), x, s.n);
  };
}

// Weights ω_0..ω_r of Alg. 1's schedule from ω_0 = 2.
Vec<mp> omegas(const System& s, int r) {
  const mp rho = (s.L - s.mu) / (s.L + s.mu);
  Vec<mp> w{mp(2)};
  for (int i = 1; i <= r; ++i) w.push_back(4 / (4 - rho * rho * w.back()));
  return w;
}

// G_r = Π_{i=1}^r 4/(ρ²ω_i²): first-order amplification of rounding by the
// weight reversal of eq. (57)/(62) over r steps (≥ that of the iterate reversal).
double growth(const System& s, int r) {
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
const char* kScaled = "max over (system, r) of (relative error vs reverse mode of unrolled Alg. 1) / G_r";

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

Alg2 alg2(const System& s, const Vec<mp>& q, const std::vector<Vec<mp>>& stored, const mp& omega_r,
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
std::vector<Vec<mp>> dxi_eq56(const Case& c, int r) {
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

std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int r = lo; r <= hi; ++r) v.push_back(r);
  return v;
}
// r values for the App. C.1 entries (every r in the full run).
std::vector<int> alg2_rs(const ProofOptions& opt) {
  return opt.full ? range(1, 30) : std::vector<int>{1, 2, 3, 4, 5, 7, 10, 15, 20, 30};
}
std::vector<int> few_rs(const ProofOptions& opt) { return opt.full ? range(1, 30) : std::vector<int>{1, 2, 5, 30}; }
int alg2_systems(const ProofOptions& opt) { return opt.full ? 12 : 3; }

std::string seed_str(const ProofOptions& opt) { return "seed " + std::to_string(opt.seed); }

// P = [Alg. 1 on e_1, …, e_n], so that ξ_r = P q (eq. (52)).
Mat<mp> alg1_matrix(const System& s, int r) {
  Mat<mp> P(s.n, s.n);
  for (int j = 0; j < s.n; ++j) {
    Vec<mp> ej(s.n, mp(0));
    ej[j] = 1;
    const Vec<mp> col = chebyshev_alg1(s.A.values(), ej, s.n, s.L, s.mu, r).back();
    for (int i = 0; i < s.n; ++i) P(i, j) = col[i];
  }
  return P;
}

const char* kVsReverse = "max |formula − reverse mode of unrolled Alg. 1| / max |reverse mode|";

// ---------------------------------------------------------------------------
std::vector<Entry> lemma2_entries() {
  std::vector<Entry> v;
  v.push_back(gka_entry(
      "gka.lemma2.chebyshev_implicit_equals_autograd", "Lemma 2",
      "for CH, the implicit gradient dq̂ = CH(H+λI, dx̂, r) (Table 1) equals the exact gradient dq of the unrolled "
      "iteration (CH auto)",
      Method::reverse_mode,
      "reverse mode of Alg. 1 unrolled (all A, q entries inputs) vs reference chebyshev_forward run on dξ_r (and Alg. 1 "
      "here on dξ_r), every r = 1..30 on 3 random SPD systems n 8-10 (full: r = 1..60, 12 systems n 8-16), opt.bits",
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        const std::string id = "gka.lemma2.chebyshev_implicit_equals_autograd";
        RelErr worst;
        double worst_v = -1, dH_gap = 0;
        std::string wit;
        int pairs = 0;
        over_cases(opt, id, 8, opt.full ? 16 : 10, opt.full ? 12 : 3, range(1, opt.full ? 60 : 30), false,
                   [&](const Case& c, Recorded& rec, int r, int k) {
                     const AutoGrad g = sweep(rec, c.dxi, r);
                     const ChebyshevParams<mp> p{c.s.L, c.s.mu, r, mp(2)};
                     const ChebyshevResult<mp> impl = chebyshev_forward(applier(c.s), c.dxi.data(), c.s.n, p);
                     const Vec<mp> mine = chebyshev_alg1(c.s.A.values(), c.dxi, c.s.n, c.s.L, c.s.mu, r).back();
                     RelErr e;
                     e.add(impl.xi, g.dq);
                     e.add(mine, g.dq);
                     if (e.value() > worst_v) worst_v = e.value(), wit = "system " + std::to_string(k) + ", n " + std::to_string(c.s.n) + ", r " + std::to_string(r);
                     ++pairs;
                     // Not claimed by Lemma 2: the implicit dH = −dq̂ ξ_rᵀ vs the unrolled dA.
                     Vec<mp> xr;
                     for (const Var& x : rec.xi[r + 1]) xr.push_back(x.v);
                     RelErr eh;
                     eh.add(outer(mp(-1) * impl.xi, xr).values(), g.dA);
                     dH_gap = std::max(dH_gap, eh.value());
                   });
        return holds_if(worst_v, exact_tolerance(opt.bits), "max |dq̂ − dq_auto| / max |dq_auto| over all (system, r)",
                        seed_str(opt) + ", " + wit,
                        std::to_string(pairs) + " (system, r) pairs; not claimed, for contrast: the implicit dH = "
                        "−dq̂ξ_rᵀ differs from the unrolled iteration's dA by up to " + fmt(dH_gap) + " (relative)");
      }));
  v.push_back(gka_entry(
      "gka.lemma2.cg_implicit_differs", "Lemma 2",
      "for CG (unlike CH) the implicit gradient CG(H+λI, dx̂, r) is not the reverse-mode gradient of the unrolled CG "
      "(GKA §4.2.3, Fig. 1b: the reason GKA uses CH)",
      Method::inequality_search,  // a lower bound on a difference: the tolerance is the 1e-8 floor
      "reverse mode of CG unrolled (written here) vs reference conjugate_gradient on dξ_r, r = 1..n on 4 random SPD "
      "systems n 8-12 with n distinct eigenvalues (full: 12 systems n 8-16); holds if, for every r ≤ n/2 (GKA's "
      "regime r ≪ D), they differ by ≥ 1e-8 on some system, and at r = n (CG is then the exact solve) both are A⁻¹dξ",
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        const std::string id = "gka.lemma2.cg_implicit_differs";
        std::vector<double> diffs;                 // relative differences at r < n
        std::map<int, double> per_r_max;           // largest over systems, per r < n
        double at_n = 0, largest = 0;
        std::string wit;
        const int systems = opt.full ? 12 : 4;
        over_cases(opt, id, 8, opt.full ? 16 : 12, systems, range(1, opt.full ? 16 : 12), true,
                   [&](const Case& c, Recorded& rec, int r, int k) {
                     if (r > c.s.n) return;
                     const AutoGrad g = sweep(rec, c.dxi, r);
                     const Vec<mp> impl = conjugate_gradient(applier(c.s), c.dxi.data(), c.s.n, r);
                     RelErr e;
                     e.add(impl, g.dq);
                     const double d = e.value();
                     if (r == c.s.n) {
                       at_n = std::max(at_n, d);
                       return;
                     }
                     diffs.push_back(d);
                     if (2 * r <= c.s.n) per_r_max[r] = std::max(per_r_max[r], d);
                     if (d > largest) largest = d, wit = "system " + std::to_string(k) + ", n " + std::to_string(c.s.n) + ", r " + std::to_string(r);
                   });
        std::sort(diffs.begin(), diffs.end());
        double smallest_r = 1e300;
        for (const auto& [r, d] : per_r_max) smallest_r = std::min(smallest_r, d);
        Evidence e;
        e.discrepancy = largest;
        e.tolerance = kPrintedFailure;
        e.reproduced = !diffs.empty() && smallest_r >= kPrintedFailure && at_n <= exact_tolerance(opt.bits);
        e.measure = "max |CG_impl − CG_auto| / max |CG_auto| (a difference, not a violation)";
        e.witness = seed_str(opt) + ", " + wit;
        e.detail = std::to_string(diffs.size()) + " (system, r<n) pairs: largest " + fmt(largest) + ", median " +
                   fmt(diffs.empty() ? 0 : diffs[diffs.size() / 2]) + ", smallest " + fmt(diffs.empty() ? 0 : diffs.front()) +
                   "; for r ≤ n/2 the per-r largest is ≥ " + fmt(smallest_r) + "; at r = n both equal A⁻¹dξ to " + fmt(at_n) +
                   " (must be ≤ 2^(48−bits))";
        return e;
      }));
  // Proof of Lemma 2, App. C.
  v.push_back(gka_entry(
      "gka.eq52.polynomial", "eq. (52)", "ξ_r = p_r(H) q with p_r a polynomial in H (so p_r(H) commutes with H)",
      Method::exact_identity,
      "P = [Alg. 1 on e_1..e_n]; checks Alg. 1(q) = Pq for random q and HP = PH, r in {1,2,5,30} (full: 1..30), 3 "
      "systems n 6-10 (full: 12)",
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr e;
        over_cases(opt, "gka.eq52.polynomial", 6, 10, alg2_systems(opt), few_rs(opt), false,
                   [&](const Case& c, Recorded&, int r, int) {
                     const int n = c.s.n;
                     const Mat<mp> P = alg1_matrix(c.s, r);
                     e.add(P * c.q, chebyshev_alg1(c.s.A.values(), c.q, n, c.s.L, c.s.mu, r).back());
                     e.add((c.s.A * P).values(), (P * c.s.A).values());
                   });
        return holds_if(e.value(), exact_tolerance(opt.bits), "max |Pq − ξ_r|, |HP − PH| relative", seed_str(opt));
      }));
  v.push_back(gka_entry(
      "gka.eq53.symmetric", "eq. (53)", "dq = p_r(H)ᵀdξ_r = p_r(H)dξ_r (p_r(H) symmetric since H is)",
      Method::reverse_mode,
      "P from Alg. 1 on unit vectors: P − Pᵀ, and Pᵀdξ_r vs reverse mode of the unrolled Alg. 1; r in {1,2,5,30} "
      "(full: 1..30), 3 systems n 6-10 (full: 12)", Status::holds, "",
      [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr e;
        over_cases(opt, "gka.eq53.symmetric", 6, 10, alg2_systems(opt), few_rs(opt), false,
                   [&](const Case& c, Recorded& rec, int r, int) {
                     const Mat<mp> P = alg1_matrix(c.s, r), PT = P.transpose();
                     e.add(P.values(), PT.values());
                     e.add(PT * c.dxi, sweep(rec, c.dxi, r).dq);
                   });
        return holds_if(e.value(), exact_tolerance(opt.bits), "max |P − Pᵀ|, |Pᵀdξ − dq_auto| relative", seed_str(opt));
      }));
  return v;
}

// ---------------------------------------------------------------------------
// App. C.1: eqs. (54)-(64), Alg. 2.
std::vector<Entry> appendix_c1_entries() {
  std::vector<Entry> v;
  const std::string sys = "3 random SPD systems n 6-10 (full: 12), r in {1,2,3,4,5,7,10,15,20,30} (full: 1..30)";
  v.push_back(gka_entry(
      "gka.eq54.three_term", "eq. (54)", "ξ_i = A_iξ_{i−1} + b_iξ_{i−2} + c_iq (with eq. (55)) reproduces Alg. 1",
      Method::exact_identity, "residual of eq. (54) on Alg. 1's iterates (as printed, ω_0 = 2), every i ≤ r; " + sys,
      Status::holds, "", [sys](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr e;
        over_cases(opt, "gka.eq54.three_term", 6, 10, alg2_systems(opt), {30}, false,
                   [&](const Case& c, Recorded&, int r, int) {
                     const auto xi = chebyshev_alg1(c.s.A.values(), c.q, c.s.n, c.s.L, c.s.mu, r);
                     const Vec<mp> w = omegas(c.s, r);
                     for (int i = 1; i <= r; ++i) {
                       const mp ci = 2 * w[i] / (c.s.L + c.s.mu), bi = -(w[i] - 1);
                       const Vec<mp> Ax = c.s.A * xi[i];
                       Vec<mp> rhs(c.s.n);
                       for (int j = 0; j < c.s.n; ++j) rhs[j] = w[i] * xi[i][j] - ci * Ax[j] + bi * xi[i - 1][j] + ci * c.q[j];
                       e.add(rhs, xi[i + 1]);
                     }
                   });
        return holds_if(e.value(), exact_tolerance(opt.bits), "max |eq. (54) − Alg. 1 iterate| / max |iterate|",
                        seed_str(opt));
      }));
  v.push_back(gka_entry(
      "gka.eq55.coefficients", "eq. (55)",
      "A_i = ω_iI − (2ω_i/(L+μ))H (symmetric), b_i = −(ω_i − 1), c_i = 2ω_i/(L+μ)", Method::reverse_mode,
      "the Jacobians of one Alg. 1 step (grad descent + momentum) w.r.t. ξ_{i−1}, ξ_{i−2}, q by reverse mode (one sweep "
      "per output component), every i ≤ 30, vs eq. (55)",
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr e;
        auto rng = entry_rng(opt, "gka.eq55.coefficients");
        for (int k = 0; k < alg2_systems(opt); ++k) {
          const int n = 4 + static_cast<int>(rng() % 4);
          const System s = random_system(rng, n, 1 + static_cast<int>(rng() % (2 * n)));
          const Vec<mp> w = omegas(s, 30);
          const mp LM = s.L + s.mu;
          for (int i = 1; i <= 30; ++i) {
            Tape tape;
            TapeScope scope(tape);
            Vec<Var> x1, x2, q;
            const Mat<Var> A = s.A.cast<Var>();
            for (int j = 0; j < n; ++j)
              x1.push_back(Var::input(uniform(rng, -1, 1))), x2.push_back(Var::input(uniform(rng, -1, 1))),
                  q.push_back(Var::input(uniform(rng, -1, 1)));
            // Alg. 1, one step with weight ω_i (grad descent, then momentum).
            const Vec<Var> Hx = A * x1;
            Vec<Var> next(n);
            for (int j = 0; j < n; ++j)
              next[j] = x1[j] - Var(2 * w[i] / LM) * (Hx[j] - q[j]) + Var(w[i] - 1) * (x1[j] - x2[j]);
            for (int a = 0; a < n; ++a) {
              const auto adj = tape.adjoints(next[a].id);
              for (int b = 0; b < n; ++b) {
                const mp Ai = (a == b ? w[i] : mp(0)) - 2 * w[i] / LM * s.A(a, b);
                e.add(Ai, adjoint(adj, x1[b]));
                e.add(Ai, (a == b ? w[i] : mp(0)) - 2 * w[i] / LM * s.A(b, a));  // A_i symmetric
                e.add(a == b ? -(w[i] - 1) : mp(0), adjoint(adj, x2[b]));
                e.add(a == b ? 2 * w[i] / LM : mp(0), adjoint(adj, q[b]));
              }
            }
          }
        }
        return holds_if(e.value(), exact_tolerance(opt.bits), "max |eq. (55) − step Jacobian| / max |Jacobian|",
                        seed_str(opt), std::to_string(alg2_systems(opt)) + " systems n 4-7, i = 1..30");
      }));
  v.push_back(gka_entry(
      "gka.eq56.dxi_recursion", "eq. (56)",
      "dξ_{r−1} = A_rdξ_r; dξ_{i−2} = A_{i−1}dξ_{i−1} + b_idξ_i (i = r..2); dq = Σ_{i=0}^r c_idξ_i with c_0 = 2/(L+μ)",
      Method::reverse_mode, "recursion as printed vs the adjoints of ξ_0..ξ_r and q in the reverse sweep; " + sys,
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr e;
        over_cases(opt, "gka.eq56.dxi_recursion", 6, 10, alg2_systems(opt), alg2_rs(opt), false,
                   [&](const Case& c, Recorded& rec, int r, int) {
                     const AutoGrad g = sweep(rec, c.dxi, r);
                     const Vec<mp> w = omegas(c.s, r);
                     const mp LM = c.s.L + c.s.mu;
                     const int n = c.s.n;
                     const auto d = dxi_eq56(c, r);
                     Vec<mp> dq(n, mp(0));
                     for (int i = 0; i <= r; ++i) {
                       const mp ci = i == 0 ? 2 / LM : 2 * w[i] / LM;
                       for (int j = 0; j < n; ++j) dq[j] += ci * d[i][j];
                       e.add(d[i], g.dxi[i]);
                     }
                     e.add(dq, g.dq);
                   });
        return holds_if(e.value(), exact_tolerance(opt.bits), kVsReverse, seed_str(opt));
      }));
  v.push_back(gka_entry(
      "gka.eq57.weights_reversed", "eq. (57)", "ν_r = ω_r, ν_{i−1} = (4/ρ²)(1 − 1/ν_i) recovers ω_{i−1}, i = r..1",
      Method::exact_identity, "ν_i vs the forward schedule ω_i (ω_0 = 2) for every i; " + sys, Status::holds, "",
      [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        Scaled sc;
        over_cases(opt, "gka.eq57.weights_reversed", 6, 10, alg2_systems(opt), alg2_rs(opt), false,
                   [&](const Case& c, Recorded&, int r, int) {
                     const Vec<mp> w = omegas(c.s, r);
                     const mp rho = (c.s.L - c.s.mu) / (c.s.L + c.s.mu);
                     mp nu = w[r];
                     RelErr e;
                     for (int i = r; i >= 1; --i) {
                       nu = 4 / (rho * rho) * (1 - 1 / nu);
                       e.add(nu, w[i - 1]);
                     }
                     sc.add(e, growth(c.s, r));
                   });
        return holds_if(sc.worst, exact_tolerance(opt.bits), "max (|ν_i − ω_i| / max ω_i) / G_r", seed_str(opt),
                        sc.detail());
      }));
  v.push_back(gka_entry(
      "gka.eq58.dH", "eq. (58)", "dA_i = dξ_i ⊗ ξ_{i−1}ᵀ, dH = −(2ω_i/(L+μ)) dA_i (accumulated over i = 1..r)",
      Method::reverse_mode,
      "Σ_i −c_i dξ_iξ_{i−1}ᵀ with dξ_i from eq. (56) and stored iterates vs reverse mode w.r.t. all n² entries of H; " +
          sys,
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr e;
        over_cases(opt, "gka.eq58.dH", 6, 10, alg2_systems(opt), alg2_rs(opt), false,
                   [&](const Case& c, Recorded& rec, int r, int) {
                     const AutoGrad g = sweep(rec, c.dxi, r);
                     const auto xi = chebyshev_alg1(c.s.A.values(), c.q, c.s.n, c.s.L, c.s.mu, r);
                     // dξ_i by eq. (56) (its entry checks it against the sweep).
                     const auto dxi = dxi_eq56(c, r);
                     const Vec<mp> w = omegas(c.s, r);
                     Mat<mp> dH(c.s.n, c.s.n);
                     for (int i = 1; i <= r; ++i) dH -= outer(mp(2 * w[i] / (c.s.L + c.s.mu)) * dxi[i], xi[i]);
                     e.add(dH.values(), g.dA);
                   });
        return holds_if(e.value(), exact_tolerance(opt.bits), kVsReverse, seed_str(opt));
      }));
  // eqs. (59), (60): reversing the iteration.
  for (const bool in_alg2 : {false, true}) {
    const std::string id = in_alg2 ? "gka.eq60.reverse_iterate_alg2" : "gka.eq59.reverse_iterate";
    v.push_back(gka_entry(
        id, in_alg2 ? "eq. (60)" : "eq. (59)",
        in_alg2 ? "ξ_{i−2} ← −(1/(ν_i−1))(ξ_i − (ν_iI − (2ν_i/(L+μ))H)ξ_{i−1} + (2ν_i/(L+μ))q)"
                : "ξ_{i−2} = (1/b_i)(ξ_i − A_iξ_{i−1} + c_iq)",
        Method::exact_identity,
        in_alg2 ? "Alg. 2's reversal loop from ξ_r, ξ_{r−1} (printed sign vs corrected) against the stored iterates "
                  "ξ_{r−2}..ξ_{−1}; " + sys
                : "one reversal step at every i from the stored exact iterates ξ_i, ξ_{i−1}, printed sign vs corrected, "
                  "against the stored ξ_{i−2}; " + sys,
        Status::fails_as_printed,
        in_alg2 ? "ξ_{i−2} ← −(1/(ν_i−1))(ξ_i − (ν_iI − (2ν_i/(L+μ))H)ξ_{i−1} − (2ν_i/(L+μ))q)"
                : "ξ_{i−2} = (1/b_i)(ξ_i − A_iξ_{i−1} − c_iq) (solving eq. (54) for ξ_{i−2})",
        [id, in_alg2](const ProofOptions& opt) {
          MpPrecision prec(opt.bits);
          RelErr ep, ec;
          Scaled sc;
          over_cases(opt, id, 6, 10, alg2_systems(opt), alg2_rs(opt), false, [&](const Case& c, Recorded&, int r, int) {
            const auto xi = chebyshev_alg1(c.s.A.values(), c.q, c.s.n, c.s.L, c.s.mu, r);
            const Vec<mp> w = omegas(c.s, r);
            const int n = c.s.n;
            if (in_alg2) {
              const Alg2 p = alg2(c.s, c.q, xi, w[r], c.dxi, r, false, true), k = alg2(c.s, c.q, xi, w[r], c.dxi, r, true, true);
              RelErr e;
              for (int i = r; i >= 1; --i) {
                ep.add(p.xi_rec[i - 1], xi[i - 1]);
                e.add(k.xi_rec[i - 1], xi[i - 1]);
              }
              sc.add(e, growth(c.s, r));
              return;
            }
            const mp LM = c.s.L + c.s.mu;
            for (int i = 1; i <= r; ++i) {
              const mp ci = 2 * w[i] / LM, bi = -(w[i] - 1);
              const Vec<mp> Ax = c.s.A * xi[i];
              Vec<mp> pr(n), co(n);
              for (int j = 0; j < n; ++j) {
                const mp base = xi[i + 1][j] - (w[i] * xi[i][j] - ci * Ax[j]);
                pr[j] = (base + ci * c.q[j]) / bi;
                co[j] = (base - ci * c.q[j]) / bi;
              }
              ep.add(pr, xi[i - 1]);
              ec.add(co, xi[i - 1]);
            }
          });
          if (in_alg2)
            return printed_fails(ep.value(), sc.worst, exact_tolerance(opt.bits),
                                 "printed: max |recovered ξ_{i−2} − stored| / max |ξ|; corrected: the same / G_r",
                                 seed_str(opt), "printed sign misses by " + fmt(ep.value()) + "; corrected " + sc.detail());
          return printed_fails(ep.value(), ec.value(), exact_tolerance(opt.bits),
                               "max |recovered ξ_{i−2} − stored| / max |ξ| (one step from exact iterates)", seed_str(opt),
                               "printed sign misses by " + fmt(ep.value()));
        }));
  }
  v.push_back(gka_entry(
      "gka.eq61.dxi_alg2", "eq. (61)", "dξ_{i−1} ← (ν_idξ_i − (2ν_i/(L+μ))Hdξ_i) − (ν_{i+1} − 1)dξ_{i+1}",
      Method::reverse_mode, "Alg. 2's dξ_{i−1} (ν from eq. (62)) vs the adjoints of ξ_0..ξ_r in the reverse sweep; " + sys,
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        Scaled sc;
        over_cases(opt, "gka.eq61.dxi_alg2", 6, 10, alg2_systems(opt), alg2_rs(opt), false,
                   [&](const Case& c, Recorded& rec, int r, int) {
                     const AutoGrad g = sweep(rec, c.dxi, r);
                     const auto xi = chebyshev_alg1(c.s.A.values(), c.q, c.s.n, c.s.L, c.s.mu, r);
                     const Alg2 b = alg2(c.s, c.q, xi, omegas(c.s, r)[r], c.dxi, r, false, false);
                     RelErr e;
                     for (int i = 0; i <= r; ++i) e.add(b.dxi[i], g.dxi[i]);
                     sc.add(e, growth(c.s, r));
                   });
        return holds_if(sc.worst, exact_tolerance(opt.bits), kScaled, seed_str(opt), sc.detail());
      }));
  v.push_back(gka_entry(
      "gka.eq62.nu_alg2", "eq. (62)", "ν_{i−1} ← (4/ρ²)(1 − 1/ν_i) (i = r..1, after Alg. 2's ν_r ← ω_r)",
      Method::exact_identity,
      "ν_0..ν_r as Alg. 2 leaves them vs ω_0..ω_r of Alg. 1 (ω_0 = 2); note: at i = 1 it overwrites Alg. 2's "
      "initialisation ν_0 ← 1 with ν_0 = ω_0 = 2 (the cause of eq. (63)'s failure); " + sys,
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        Scaled sc;
        double nu0_max = 0;
        over_cases(opt, "gka.eq62.nu_alg2", 6, 10, alg2_systems(opt), alg2_rs(opt), false,
                   [&](const Case& c, Recorded&, int r, int) {
                     const auto xi = chebyshev_alg1(c.s.A.values(), c.q, c.s.n, c.s.L, c.s.mu, r);
                     const Vec<mp> w = omegas(c.s, r);
                     const Alg2 b = alg2(c.s, c.q, xi, w[r], c.dxi, r, true, false);
                     RelErr e;
                     for (int i = 0; i <= r; ++i) e.add(b.nu[i], w[i]);
                     sc.add(e, growth(c.s, r));
                     nu0_max = std::max(nu0_max, to_d(b.nu[0]));
                   });
        return holds_if(sc.worst, exact_tolerance(opt.bits), "max (|ν_i − ω_i| / max ω_i) / G_r", seed_str(opt),
                        "ν_0 after the loop: " + fmt(nu0_max) + " (= ω_0 = 2, not the initialised 1); " + sc.detail());
      }));
  v.push_back(gka_entry(
      "gka.eq63.dq_alg2", "eq. (63)", "dq ← dq + (2ν_{i−1}/(L+μ)) dξ_{i−1} (i = r..1, ν_{i−1} from eq. (62))",
      Method::reverse_mode,
      "Alg. 2's dq (with eq. (60) corrected, to isolate eq. (63)) vs reverse mode of the unrolled Alg. 1; corrected: "
      "the i = 1 term weighted by 2/(L+μ); " + sys,
      Status::fails_as_printed,
      "at i = 1 the weight of dξ_0 is c_0 = 2/(L+μ) (ξ_0 = 2q/(L+μ), i.e. ν_0 = 1 as initialised), not 2ν_0/(L+μ) = "
      "2ω_0/(L+μ) = 4/(L+μ) as eq. (62) makes it",
      [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr ep;
        Scaled sc;
        over_cases(opt, "gka.eq63.dq_alg2", 6, 10, alg2_systems(opt), alg2_rs(opt), false,
                   [&](const Case& c, Recorded& rec, int r, int) {
                     const AutoGrad g = sweep(rec, c.dxi, r);
                     const auto xi = chebyshev_alg1(c.s.A.values(), c.q, c.s.n, c.s.L, c.s.mu, r);
                     const mp wr = omegas(c.s, r)[r];
                     ep.add(alg2(c.s, c.q, xi, wr, c.dxi, r, true, false).dq, g.dq);
                     RelErr e;
                     e.add(alg2(c.s, c.q, xi, wr, c.dxi, r, true, true).dq, g.dq);
                     sc.add(e, growth(c.s, r));
                   });
        return printed_fails(ep.value(), sc.worst, exact_tolerance(opt.bits),
                             "printed: relative error vs reverse mode; corrected: the same / G_r", seed_str(opt),
                             "printed weight misses by " + fmt(ep.value()) + "; corrected " + sc.detail());
      }));
  v.push_back(gka_entry(
      "gka.eq64.dH_alg2", "eq. (64)", "dH ← dH − (2ν_{i−1}/(L+μ)) dξ_{i−1} ⊗ ξ_{i−2}ᵀ (i = r..1)",
      Method::reverse_mode,
      "Alg. 2's dH with the iterates recovered by the corrected eq. (60) vs reverse mode w.r.t. all n² entries of H "
      "(the i = 1 term vanishes since ξ_{−1} = 0, so eq. (62)'s ν_0 does no harm here); " + sys,
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr with_printed60;
        Scaled sc;
        over_cases(opt, "gka.eq64.dH_alg2", 6, 10, alg2_systems(opt), alg2_rs(opt), false,
                   [&](const Case& c, Recorded& rec, int r, int) {
                     const AutoGrad g = sweep(rec, c.dxi, r);
                     const auto xi = chebyshev_alg1(c.s.A.values(), c.q, c.s.n, c.s.L, c.s.mu, r);
                     const mp wr = omegas(c.s, r)[r];
                     RelErr e;
                     e.add(alg2(c.s, c.q, xi, wr, c.dxi, r, true, false).dH.values(), g.dA);
                     sc.add(e, growth(c.s, r));
                     with_printed60.add(alg2(c.s, c.q, xi, wr, c.dxi, r, false, false).dH.values(), g.dA);
                   });
        return holds_if(sc.worst, exact_tolerance(opt.bits), kScaled, seed_str(opt),
                        "fed by the printed eq. (60) instead, dH misses by " + fmt(with_printed60.value()) + "; " +
                            sc.detail());
      }));
  v.push_back(gka_entry(
      "gka.alg2.backward", "Alg. 2",
      "Alg. 2 (from ξ_r, ξ_{r−1}, ω_r only) returns the exact dq and dH of Alg. 1 for the output gradient dξ_r",
      Method::reverse_mode,
      "Alg. 2 as printed, Alg. 2 with eqs. (60), (63) corrected, and the reference chebyshev_backward_reversed and "
      "chebyshev_backward_stored, all vs reverse mode of the unrolled Alg. 1 (dq and all n² entries of dH); " + sys,
      Status::fails_as_printed,
      "Alg. 2 with eq. (60)'s q term negated (−(2ν_i/(L+μ))q) and the final dq term weighted by 2/(L+μ) (ν_0 = 1, not "
      "eq. (62)'s ν_0 = ω_0); as printed dq is wrong by the c_0 term and dH by the mis-recovered iterates",
      [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        RelErr ep;
        Scaled sc, sref;
        over_cases(opt, "gka.alg2.backward", 6, 10, alg2_systems(opt), alg2_rs(opt), false,
                   [&](const Case& c, Recorded& rec, int r, int) {
                     const AutoGrad g = sweep(rec, c.dxi, r);
                     const auto xi = chebyshev_alg1(c.s.A.values(), c.q, c.s.n, c.s.L, c.s.mu, r);
                     const mp wr = omegas(c.s, r)[r];
                     const Alg2 p = alg2(c.s, c.q, xi, wr, c.dxi, r, false, false);
                     const Alg2 k = alg2(c.s, c.q, xi, wr, c.dxi, r, true, true);
                     ep.add(p.dq, g.dq);
                     ep.add(p.dH.values(), g.dA);
                     RelErr ec, eref;
                     ec.add(k.dq, g.dq);
                     ec.add(k.dH.values(), g.dA);
                     // The reference implementations (the code under test).
                     const int n = c.s.n;
                     const ChebyshevParams<mp> prm{c.s.L, c.s.mu, r, mp(2)};
                     const auto fwd = chebyshev_forward(applier(c.s), c.q.data(), n, prm, true);
                     Vec<mp> dq(n), dA(static_cast<std::size_t>(n) * n, mp(0));
                     chebyshev_backward_reversed(applier(c.s), c.q.data(), n, prm, fwd.xi.data(), fwd.xi_prev.data(),
                                                 fwd.omega.back(), c.dxi.data(), dq.data(), dA.data());
                     eref.add(dq, g.dq);
                     eref.add(dA, g.dA);
                     std::fill(dA.begin(), dA.end(), mp(0));
                     chebyshev_backward_stored(applier(c.s), n, prm, fwd, c.dxi.data(), dq.data(), dA.data());
                     eref.add(dq, g.dq);
                     eref.add(dA, g.dA);
                     const double G = growth(c.s, r);
                     sc.add(ec, G);
                     sref.add(eref, G);
                   });
        return printed_fails(ep.value(), std::max(sc.worst, sref.worst), exact_tolerance(opt.bits),
                             "printed: relative error vs reverse mode; corrected and reference: the same / G_r",
                             seed_str(opt),
                             "printed misses by " + fmt(ep.value()) + "; corrected here: " + sc.detail() +
                                 "; reference backward_reversed/stored: " + sref.detail());
      }));
  return v;
}

}  // namespace

std::vector<Entry> gka_solver_gradient_entries() {
  std::vector<Entry> v = lemma2_entries();
  for (auto& e : appendix_c1_entries()) v.push_back(std::move(e));
  return v;
}

}  // namespace ttr::proofs
