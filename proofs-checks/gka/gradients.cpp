// GKA gradient statements about the exact solve (Lemma 1 and its restatements
// eqs. (7), (23)-(25), (42), (50), (51)) and the chunk backward. Each printed
// formula is evaluated as printed in mp and compared with reverse-mode differentiation (gradients_ad.hpp) of the forward definition
// (matrices and solves from support/dense.hpp, the same code for mp and the tape):
//   H_t = γ_t H_{t-1} + k_t k_tᵀ (eq. (CH)),  λ_t = a‖H_t‖_F (eq. (4)),
//   x_t = (H_t + λ_t I)⁻¹ q_t (dense solve),  loss = Σ_t ⟨dx_t, x_t⟩
// with random upstream gradients dx_t. The gating derivatives (eqs. (26)-(34)) and
// Table 1 are in gradients_gating.cpp, the solver-level statements (Lemma 2, Alg. 2,
// eqs. (52)-(64)) in gradients_solver.cpp.
#include <algorithm>
#include <memory>

#include "proofs-checks/gka/gka.hpp"
#include "proofs-checks/gka/gradients_ad.hpp"
#include "proofs-checks/support/dense.hpp"
#include "reference/solvers/chebyshev.hpp"
#include "reference/solvers/iterative.hpp"

namespace ttr::proofs {
namespace {

using namespace gka_grad;
using boost::multiprecision::abs;
using dense::dot;
using dense::inner;
using dense::Mat;
using dense::outer;
using dense::plus_identity;
using dense::solve_unpivoted;
using dense::operator*;  // scalar × std::vector

// ---------------------------------------------------------------------------
// One GKA sequence: K-dim keys/queries, T tokens, gates γ_1..γ_T ∈ [0.5, 1)
// (varying, so off-by-one gate indices show), ridge a ∈ [0.02, 0.5].
struct Seq {
  int K = 0, T = 0;
  mp a;
  Mat<mp> H0;
  Vec<mp> gamma;                        // gamma[t] = γ_{t+1}
  std::vector<Vec<mp>> k, q, dx;        // row t = token t+1
};

Seq random_seq(std::mt19937_64& rng, int K, int T, bool with_h0) {
  Seq s;
  s.K = K;
  s.T = T;
  s.a = uniform(rng, 0.02, 0.5);
  s.H0 = with_h0 ? Mat<mp>(K, K, random_gram(rng, K, K)) : Mat<mp>(K, K);
  for (int t = 0; t < T; ++t) {
    s.gamma.push_back(uniform(rng, 0.5, 1.0));
    s.k.push_back(random_vec(rng, K));
    s.q.push_back(random_vec(rng, K));
    s.dx.push_back(random_vec(rng, K));
  }
  return s;
}

template <class S>
struct Fwd {
  std::vector<Mat<S>> H;  // H_t for t = 1..T (index t-1)
  std::vector<Vec<S>> x;  // x_t
  std::vector<S> fro;
};

// The forward definition. `shifted` uses eq. (42)'s unrolling instead,
// H_t = γ_{t-1} H_{t-1} + k_t k_tᵀ (with H_0 = 0), to locate the index shift.
template <class S>
Fwd<S> forward(const Mat<S>& H0, const std::vector<Vec<S>>& k, const std::vector<Vec<S>>& q, const Vec<S>& gamma,
               const mp& a, bool shifted = false) {
  Fwd<S> f;
  Mat<S> H = H0;
  const int T = static_cast<int>(k.size());
  for (int t = 0; t < T; ++t) {
    const S g = shifted ? (t == 0 ? S(mp(0)) : gamma[t - 1]) : gamma[t];
    H = g * H + outer(k[t], k[t]);
    const S fro = H.norm();
    const S lam = S(a) * fro;
    f.x.push_back(solve_unpivoted(plus_identity(H, lam), q[t]));
    f.H.push_back(H);
    f.fro.push_back(fro);
  }
  return f;
}

// Reverse mode of loss = Σ_t ⟨dx_t, x_t⟩ with respect to keys, queries and gates.
struct Grad {
  std::vector<Vec<mp>> dk, dq;
  Vec<mp> dgamma;
};

Grad reverse_mode(const Seq& s, bool shifted = false) {
  Tape tape;
  TapeScope scope(tape);
  auto inputs = [](const Vec<mp>& v) {
    Vec<Var> r;
    for (const mp& x : v) r.push_back(Var::input(x));
    return r;
  };
  std::vector<Vec<Var>> k, q;
  for (int t = 0; t < s.T; ++t) {
    k.push_back(inputs(s.k[t]));
    q.push_back(inputs(s.q[t]));
  }
  const Vec<Var> gamma = inputs(s.gamma);
  const Fwd<Var> f = forward(s.H0.cast<Var>(), k, q, gamma, s.a, shifted);
  Var loss(mp(0));
  for (int t = 0; t < s.T; ++t) {
    const Vec<Var> d(s.dx[t].begin(), s.dx[t].end());
    loss = loss + dot(d.data(), f.x[t].data(), s.K);
  }
  const std::vector<mp> adj = tape.adjoints(loss.id);
  Grad g;
  for (int t = 0; t < s.T; ++t) {
    Vec<mp> a(s.K), b(s.K);
    for (int j = 0; j < s.K; ++j) {
      a[j] = adjoint(adj, k[t][j]);
      b[j] = adjoint(adj, q[t][j]);
    }
    g.dk.push_back(a);
    g.dq.push_back(b);
    g.dgamma.push_back(adjoint(adj, gamma[t]));
  }
  return g;
}

// The quantities the printed formulas use, in plain mp: H_t, x*_t, ‖H_t‖_F,
// dq_t = (H_t + λ_t I)⁻¹ dx_t (Table 1, exact row; eq. (6)), ζ_t = Π_{s≤t} γ_s.
struct Plain {
  Fwd<mp> f;
  std::vector<Vec<mp>> dq;
  Vec<mp> zeta;  // zeta[t] = ζ_{t+1}
};

Plain plain(const Seq& s) {
  Plain p;
  p.f = forward(s.H0, s.k, s.q, s.gamma, s.a);
  mp z = 1;
  for (int t = 0; t < s.T; ++t) {
    p.dq.push_back(solve_unpivoted(plus_identity(p.f.H[t], mp(s.a * p.f.fro[t])), s.dx[t]));
    z *= s.gamma[t];
    p.zeta.push_back(z);
  }
  return p;
}

// How a printed dk formula weights token t's term for key i (0-based i ≤ t).
enum class Weight { M, eq50_printed, eq50_corrected };
mp weight(const Seq& s, const Plain& p, int i, int t, Weight w) {
  if (w == Weight::M) return p.zeta[t] / p.zeta[i];  // M_{i,t} = ζ_t/ζ_i (§4.2.1, eq. (26))
  mp prod = 1;
  // 1-based l = i+1, t' = t+1: printed Π_{j=l}^{t'-1} γ_j, corrected Π_{j=l+1}^{t'} γ_j.
  const int lo = w == Weight::eq50_printed ? i : i + 1, hi = w == Weight::eq50_printed ? t - 1 : t;
  for (int j = lo; j <= hi; ++j) prod *= s.gamma[j];
  return prod;
}

// Σ_{t≥i} weight · (−dq_t x_tᵀ − x_t dq_tᵀ + sign_w · w_t H_t) k_i   (eqs. (7), (25), (50)/(51)).
std::vector<Vec<mp>> dk_formula(const Seq& s, const Plain& p, Weight wt, int sign_w, bool grouped_51 = false) {
  std::vector<Vec<mp>> dk;
  const int K = s.K;
  for (int i = 0; i < s.T; ++i) {
    Vec<mp> acc(K, mp(0));
    for (int t = i; t < s.T; ++t) {
      const Vec<mp>& x = p.f.x[t];
      const Vec<mp>& dq = p.dq[t];
      const Vec<mp> Hk = p.f.H[t] * s.k[i];
      const mp kx = dot(s.k[i], x), kdq = dot(s.k[i], dq), xdq = dot(x, dq);
      // GKA Lemma 1: w_t = 2a x_tᵀdq_t/‖H_t‖_F; eq. (51) groups 2a⟨x,dq⟩/‖H‖ as one factor.
      const mp w = grouped_51 ? (2 * s.a * xdq) / p.f.fro[t] : (2 * s.a / p.f.fro[t]) * xdq;
      const mp c = weight(s, p, i, t, wt);
      for (int j = 0; j < K; ++j) acc[j] += c * (-dq[j] * kx - x[j] * kdq + sign_w * w * Hk[j]);
    }
    dk.push_back(acc);
  }
  return dk;
}

// eq. (23) as printed: dH_t = −dq_t x_tᵀ − a (H_t/‖H_t‖_F) (x_tᵀ dq_t).
Mat<mp> dH_eq23(const Mat<mp>& H, const Vec<mp>& x, const Vec<mp>& dq, const mp& a, const mp& fro) {
  const int K = H.rows();
  Mat<mp> dH(K, K);
  const mp xdq = dot(x, dq);
  for (int i = 0; i < K; ++i)
    for (int j = 0; j < K; ++j) dH(i, j) = -dq[i] * x[j] - a * H(i, j) / fro * xdq;
  return dH;
}

// eq. (24): Σ_{t≥i} (dH_t + dH_tᵀ) k_i ζ_t/ζ_i with dH_t from eq. (23).
std::vector<Vec<mp>> dk_eq24(const Seq& s, const Plain& p) {
  const int K = s.K;
  std::vector<Vec<mp>> dk;
  for (int i = 0; i < s.T; ++i) {
    Vec<mp> acc(K, mp(0));
    for (int t = i; t < s.T; ++t) {
      const Mat<mp> dH = dH_eq23(p.f.H[t], p.f.x[t], p.dq[t], s.a, p.f.fro[t]);
      const mp c = p.zeta[t] / p.zeta[i];
      for (int r = 0; r < K; ++r)
        for (int j = 0; j < K; ++j) acc[r] += c * (dH(r, j) + dH(j, r)) * s.k[i][j];
    }
    dk.push_back(acc);
  }
  return dk;
}


// Runs `fn(seq, plain, grad, RelErr& printed, RelErr& corrected)` over random sequences.
template <class Fn>
Evidence over_sequences(const ProofOptions& opt, const std::string& id, bool with_h0, bool fails, Fn fn,
                        std::string measure) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  RelErr worst_p, worst_c;
  double wp = -1, wc = -1;
  int wp_at = 0, wc_at = 0;
  const int n = points(opt);
  for (int pt = 0; pt < n; ++pt) {
    const int K = 3 + static_cast<int>(rng() % 3), T = 4 + static_cast<int>(rng() % 4);
    const Seq s = random_seq(rng, K, T, with_h0 && pt % 2 == 0);
    const Plain p = plain(s);
    const Grad g = reverse_mode(s);
    RelErr ep, ec;
    fn(s, p, g, ep, ec);
    if (ep.value() > wp) wp = ep.value(), wp_at = pt;
    if (ec.value() > wc) wc = ec.value(), wc_at = pt;
  }
  const double tol = exact_tolerance(opt.bits);
  const std::string how = std::to_string(n) + " random sequences (K 3-5, T 4-7, γ in [0.5,1), a in [0.02,0.5])";
  if (!fails)
    return holds_if(wc, tol, measure, "seed " + std::to_string(opt.seed) + ", point " + std::to_string(wc_at), how);
  return printed_fails(wp, wc, tol, measure,
                       "seed " + std::to_string(opt.seed) + ", point " + std::to_string(wp_at) + " (printed worst)",
                       how + "; printed form worst " + fmt(wp));
}


// ---------------------------------------------------------------------------
std::vector<Entry> lemma1_entries() {
  std::vector<Entry> v;
  v.push_back(gka_entry(
      "gka.lemma1.dk_dq_exact", "Lemma 1",
      "with λ_t = a‖H_t‖_F, w_t = 2a x_tᵀdq_t/‖H_t‖_F: dk_i = Σ_{t≥i} M_{i,t}(−dq_t x_tᵀ − x_t dq_tᵀ − w_t H_t)k_i, "
      "dq_t = (H_t+λ_tI)⁻¹dx_t",
      Method::reverse_mode,
      "reverse mode (Wengert list in MPFR, opt.bits) of H_t recursion + adaptive ridge + dense solve, loss Σ⟨dx_t,x_t⟩; "
      "both dq_t and dk_i compared; H_0 = 0 as in §4.2.2",
      Status::holds, "",
      [](const ProofOptions& opt) {
        return over_sequences(
            opt, "gka.lemma1.dk_dq_exact", false, false,
            [](const Seq& s, const Plain& p, const Grad& g, RelErr&, RelErr& ec) {
              const auto dk = dk_formula(s, p, Weight::M, -1);
              for (int t = 0; t < s.T; ++t) {
                ec.add(dk[t], g.dk[t]);
                ec.add(p.dq[t], g.dq[t]);
              }
            },
            kFormulaVsReverse);
      }));
  v.push_back(gka_entry(
      "gka.eq7.dk", "eq. (7)", "dk_i = Σ_{t≥i} M_{i,t}(−dq_t(x*_t)ᵀ − x*_t dq_tᵀ − w_t H_t) k_i", Method::reverse_mode,
      "as printed in mp vs reverse mode of the exact forward; half the points start from a random PSD H_0 (a chunk's "
      "initial state)",
      Status::holds, "",
      [](const ProofOptions& opt) {
        return over_sequences(
            opt, "gka.eq7.dk", true, false,
            [](const Seq& s, const Plain& p, const Grad& g, RelErr&, RelErr& ec) {
              const auto dk = dk_formula(s, p, Weight::M, -1);
              for (int t = 0; t < s.T; ++t) ec.add(dk[t], g.dk[t]);
            },
            kFormulaVsReverse);
      }));
  v.push_back(gka_entry(
      "gka.eq23.dH", "eq. (23)", "dH_t = −dq_t(x*_t)ᵀ − a (H_t/‖H_t‖_F) ((x*_t)ᵀdq_t)  (gradient from dq_t only)",
      Method::reverse_mode,
      "per point one solve: reverse mode of ⟨dx, (H+a‖H‖_F I)⁻¹q⟩ w.r.t. all K² entries of H (no symmetry imposed), "
      "H a random Gram matrix",
      Status::holds, "", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        auto rng = entry_rng(opt, "gka.eq23.dH");
        RelErr e;
        const int n = points(opt) * 2;
        for (int pt = 0; pt < n; ++pt) {
          const int K = 3 + static_cast<int>(rng() % 4);
          const Mat<mp> H(K, K, random_gram(rng, K, 1 + static_cast<int>(rng() % (K + 1))));
          const Vec<mp> q = random_vec(rng, K), dx = random_vec(rng, K);
          const mp a = uniform(rng, 0.02, 0.5);
          Tape tape;
          TapeScope scope(tape);
          Mat<Var> Hv(K, K);
          for (std::size_t j = 0; j < Hv.values().size(); ++j) Hv.values()[j] = Var::input(H.values()[j]);
          const Var fro = Hv.norm();
          Mat<Var> A = Hv;
          for (int i = 0; i < K; ++i) A(i, i) = A(i, i) + Var(a) * fro;  // one product a‖H‖_F per diagonal entry
          const Vec<Var> x = solve_unpivoted(A, Vec<Var>(q.begin(), q.end()));
          const Vec<Var> dxv(dx.begin(), dx.end());
          const Var loss = dot(dxv.data(), x.data(), K);
          const auto adj = tape.adjoints(loss.id);
          // printed side in plain mp
          const mp f = H.norm();
          const Mat<mp> Ap = plus_identity(H, mp(a * f));
          const Vec<mp> xs = solve_unpivoted(Ap, q), dq = solve_unpivoted(Ap, dx);
          const Mat<mp> dH = dH_eq23(H, xs, dq, a, f);
          for (std::size_t j = 0; j < dH.values().size(); ++j) e.add(dH.values()[j], adjoint(adj, Hv.values()[j]));
        }
        return holds_if(e.value(), exact_tolerance(opt.bits), kFormulaVsReverse, "seed " + std::to_string(opt.seed),
                        std::to_string(n) + " random (H, q, dx, a), K 3-6");
      }));
  v.push_back(gka_entry(
      "gka.eq24.dk_from_dH", "eq. (24)", "dk_i = Σ_{t≥i} (dH_t + dH_tᵀ) k_i ζ_t/ζ_i  (dH_t from eq. (23))",
      Method::reverse_mode, "eq. (23) then eq. (24) as printed vs reverse mode of the exact forward", Status::holds,
      "", [](const ProofOptions& opt) {
        return over_sequences(
            opt, "gka.eq24.dk_from_dH", true, false,
            [](const Seq& s, const Plain& p, const Grad& g, RelErr&, RelErr& ec) {
              const auto dk = dk_eq24(s, p);
              for (int t = 0; t < s.T; ++t) ec.add(dk[t], g.dk[t]);
            },
            kFormulaVsReverse);
      }));
  v.push_back(gka_entry(
      "gka.eq25.dk_sign_of_w", "eq. (25)",
      "dk_i = Σ_{t≥i} (ζ_t/ζ_i)(−dq_t⊗(x*_t)ᵀ − x*_t⊗dq_tᵀ + w_t H_t) k_i", Method::reverse_mode,
      "as printed (+w_tH_t) and corrected (−w_tH_t) vs reverse mode of the exact forward", Status::fails_as_printed,
      "dk_i = Σ_{t≥i} (ζ_t/ζ_i)(−dq_t(x*_t)ᵀ − x*_t dq_tᵀ − w_t H_t) k_i: the w_t term enters with a minus sign, as "
      "in eqs. (7), (23), (24) and (50)",
      [](const ProofOptions& opt) {
        return over_sequences(
            opt, "gka.eq25.dk_sign_of_w", true, true,
            [](const Seq& s, const Plain& p, const Grad& g, RelErr& ep, RelErr& ec) {
              const auto printed = dk_formula(s, p, Weight::M, +1), fixed = dk_formula(s, p, Weight::M, -1);
              for (int t = 0; t < s.T; ++t) {
                ep.add(printed[t], g.dk[t]);
                ec.add(fixed[t], g.dk[t]);
              }
            },
            kFormulaVsReverse);
      }));
  // eqs. (50), (51): the printed gate product Π_{i=l}^{t-1} γ_i comes from eq. (42).
  for (const bool grouped : {false, true}) {
    const std::string id = grouped ? "gka.eq51.dk_gate_product" : "gka.eq50.dk_gate_product";
    v.push_back(gka_entry(
        id, grouped ? "eq. (51)" : "eq. (50)",
        std::string("dL/dk_l = −Σ_{t≥l} (Π_{i=l}^{t−1} γ_i)[⟨k_l,x_t⟩dL/dq_t + ⟨k_l,dL/dq_t⟩x_t + ") +
            (grouped ? "(2a⟨x_t,dL/dq_t⟩/‖H_t‖_F) H_t k_l]" : "(2a/‖H_t‖_F)⟨x_t,dL/dq_t⟩ H_t k_l]"),
        Method::reverse_mode,
        "as printed vs reverse mode of the forward with eq. (CH)'s H_t = γ_tH_{t−1} + k_tk_tᵀ (gates varying in "
        "[0.5,1)); also vs reverse mode of eq. (42)'s shifted recursion, where the printed product is right",
        Status::fails_as_printed,
        "the gate product is Π_{i=l+1}^{t} γ_i (= ζ_t/ζ_l = M_{l,t}) for GKA's recursion H_t = γ_tH_{t−1} + k_tk_tᵀ; "
        "the printed Π_{i=l}^{t−1} γ_i inherits eq. (42)'s unrolling, which is off by one gate index",
        [id, grouped](const ProofOptions& opt) {
          auto shifted_worst = std::make_shared<double>(0);
          Evidence e = over_sequences(
              opt, id, false, true,
              [grouped, shifted_worst](const Seq& s, const Plain& p, const Grad& g, RelErr& ep, RelErr& ec) {
                const auto printed = dk_formula(s, p, Weight::eq50_printed, -1, grouped);
                const auto fixed = dk_formula(s, p, Weight::eq50_corrected, -1, grouped);
                // Under eq. (42)'s recursion (H_0 = 0 here) the printed product is the right one.
                Plain ps = p;
                ps.f = forward(s.H0, s.k, s.q, s.gamma, s.a, true);
                for (int t = 0; t < s.T; ++t)
                  ps.dq[t] = solve_unpivoted(plus_identity(ps.f.H[t], mp(s.a * ps.f.fro[t])), s.dx[t]);
                const auto printed_shifted = dk_formula(s, ps, Weight::eq50_printed, -1, grouped);
                const Grad gs = reverse_mode(s, true);
                RelErr esh;
                for (int t = 0; t < s.T; ++t) {
                  ep.add(printed[t], g.dk[t]);
                  ec.add(fixed[t], g.dk[t]);
                  esh.add(printed_shifted[t], gs.dk[t]);
                }
                *shifted_worst = std::max(*shifted_worst, esh.value());
              },
              kFormulaVsReverse);
          e.detail += "; printed form vs reverse mode of eq. (42)'s recursion H_t = γ_{t−1}H_{t−1} + k_tk_tᵀ: " +
                      fmt(*shifted_worst);
          e.reproduced = e.reproduced && *shifted_worst <= e.tolerance;
          return e;
        }));
  }
  v.push_back(gka_entry(
      "gka.eq42.unrolling", "eq. (42)", "H_t = γ_tH_{t−1} + k_tk_tᵀ unrolls as H_l = Σ_{i=0}^{l} (Π_{k=i}^{l−1} γ_k) k_ik_iᵀ",
      Method::exact_identity, "printed closed form vs the recursion run token by token (H_0 = k_0k_0ᵀ-free start: H_{−1} = 0)",
      Status::fails_as_printed, "H_l = Σ_{i=0}^{l} (Π_{k=i+1}^{l} γ_k) k_ik_iᵀ", [](const ProofOptions& opt) {
        MpPrecision prec(opt.bits);
        auto rng = entry_rng(opt, "gka.eq42.unrolling");
        RelErr ep, ec;
        for (int pt = 0; pt < points(opt); ++pt) {
          const int K = 3, T = 6;
          std::vector<Vec<mp>> k;
          Vec<mp> gamma;
          for (int t = 0; t < T; ++t) k.push_back(random_vec(rng, K)), gamma.push_back(uniform(rng, 0.5, 1.0));
          Mat<mp> H(K, K);
          for (int l = 0; l < T; ++l) {
            H = gamma[l] * H + outer(k[l], k[l]);
            Mat<mp> P(K, K), C(K, K);
            for (int i = 0; i <= l; ++i) {
              mp pp = 1, pc = 1;
              for (int m = i; m <= l - 1; ++m) pp *= gamma[m];
              for (int m = i + 1; m <= l; ++m) pc *= gamma[m];
              P += outer(pp * k[i], k[i]);
              C += outer(pc * k[i], k[i]);
            }
            ep.add(P.values(), H.values());
            ec.add(C.values(), H.values());
          }
        }
        return printed_fails(ep.value(), ec.value(), exact_tolerance(opt.bits), "max |closed form − recursion| / max |H|",
                             "seed " + std::to_string(opt.seed), std::to_string(points(opt)) + " gate/key draws, K 3, T 6");
      }));
  return v;
}

// ---------------------------------------------------------------------------
// §4.2.2 backward recurrences: eqs. (8)-(10) and the intra-/cross-chunk forms of
// B_i. A_i := Σ_{t≥i} M_{i,t} dq_t x_tᵀ, B_i := Σ_{t≥i} M_{i,t} w_t H_t; by eq. (7)
// dk_i = −A_ik_i − A_iᵀk_i − B_ik_i, which is compared with reverse mode.
mp w_of(const Seq& s, const Plain& p, int t) {
  return 2 * s.a * dot(p.f.x[t], p.dq[t]) / p.f.fro[t];
}
// By definition (sums over t ≥ i with M_{i,t} = ζ_t/ζ_i), 0-based i.
Mat<mp> A_def(const Seq& s, const Plain& p, int i) {
  Mat<mp> A(s.K, s.K);
  for (int t = i; t < s.T; ++t) A += mp(p.zeta[t] / p.zeta[i]) * outer(p.dq[t], p.f.x[t]);
  return A;
}
Mat<mp> B_def(const Seq& s, const Plain& p, int i, int t_hi) {  // Σ_{t=i}^{t_hi}
  Mat<mp> B(s.K, s.K);
  for (int t = i; t <= t_hi; ++t) B += mp(p.zeta[t] / p.zeta[i] * w_of(s, p, t)) * p.f.H[t];
  return B;
}

template <class Fn>
Entry chunk_entry(std::string id, std::string ref, std::string statement, std::string how, Fn fn) {
  return gka_entry(id, ref, statement, Method::reverse_mode, how, Status::holds, "",
                   [id, fn](const ProofOptions& opt) {
                     return over_sequences(opt, id, true, false, fn, kFormulaVsReverse);
                   });
}

std::vector<Entry> chunk_backward_entries() {
  std::vector<Entry> v;
  // The recursions run backwards from the last token: X_T = term_T, X_i = γ_{i+1}X_{i+1} + term_i.
  auto backward = [](const Seq& s, auto term) {
    std::vector<Mat<mp>> X(s.T);
    for (int i = s.T - 1; i >= 0; --i) {
      X[i] = term(i);
      if (i + 1 < s.T) X[i] += s.gamma[i + 1] * X[i + 1];
    }
    return X;
  };
  v.push_back(chunk_entry(
      "gka.eq8.A_recursion", "eq. (8)", "A_i = γ_{i+1}A_{i+1} + dq_i(x*_i)ᵀ for A_i := Σ_{t≥i} M_{i,t}dq_t(x*_t)ᵀ",
      "recursion vs the definition, and −A_ik_i − A_iᵀk_i (+ the w term) vs reverse mode of the exact forward",
      [backward](const Seq& s, const Plain& p, const Grad& g, RelErr&, RelErr& ec) {
        const auto A = backward(s, [&](int i) { return outer(p.dq[i], p.f.x[i]); });
        for (int i = 0; i < s.T; ++i) {
          ec.add(A[i].values(), A_def(s, p, i).values());
          const Mat<mp> B = B_def(s, p, i, s.T - 1);
          const Vec<mp> Ak = A[i] * s.k[i], ATk = A[i].transpose() * s.k[i], Bk = B * s.k[i];
          Vec<mp> dk(s.K);
          for (int a = 0; a < s.K; ++a) dk[a] = -Ak[a] - ATk[a] - Bk[a];
          ec.add(dk, g.dk[i]);
        }
      }));
  v.push_back(chunk_entry(
      "gka.eq9.B_recursion", "eq. (9)", "B_i = γ_{i+1}B_{i+1} + w_iH_i, o_i = B_ik_i, for B_i := Σ_{t≥i} M_{i,t}w_tH_t",
      "recursion vs the definition, and dk_i − (−A_ik_i − A_iᵀk_i) − (−o_i) = 0 with dk_i from reverse mode",
      [backward](const Seq& s, const Plain& p, const Grad& g, RelErr&, RelErr& ec) {
        const auto B = backward(s, [&](int i) { return w_of(s, p, i) * p.f.H[i]; });
        for (int i = 0; i < s.T; ++i) {
          ec.add(B[i].values(), B_def(s, p, i, s.T - 1).values());
          const Mat<mp> A = A_def(s, p, i);
          const Vec<mp> o = B[i] * s.k[i], Ak = A * s.k[i], ATk = A.transpose() * s.k[i];
          Vec<mp> dk(s.K);
          for (int a = 0; a < s.K; ++a) dk[a] = -Ak[a] - ATk[a] - o[a];
          ec.add(dk, g.dk[i]);
        }
      }));
  v.push_back(chunk_entry(
      "gka.eq10.B_intra_inter", "eq. (10)", "B_i = M_{i,C}γ_{C+1}B_{C+1} + B_i^intra, B_i^intra := Σ_{c=i}^{C} M_{i,c}w_cH_c",
      "chunk = tokens 1..C (C = T − 2), B_{C+1} the future's; vs B_i by definition, every i ≤ C",
      [](const Seq& s, const Plain& p, const Grad&, RelErr&, RelErr& ec) {
        const int C = s.T - 2;  // 1-based chunk 1..C is 0-based 0..C-1; token C+1 is index C
        const Mat<mp> Bnext = B_def(s, p, C, s.T - 1);
        for (int i = 0; i < C; ++i) {
          Mat<mp> B = B_def(s, p, i, C - 1);  // B_i^intra
          const mp f = p.zeta[C - 1] / p.zeta[i] * s.gamma[C];  // M_{i,C} γ_{C+1}
          B += f * Bnext;
          ec.add(B.values(), B_def(s, p, i, s.T - 1).values());
        }
      }));
  v.push_back(chunk_entry(
      "gka.sec422.B_intra_chunkwise", "§4.2.2 (B^intra)",
      "[B_1^intra k_1, …, B_C^intra k_C] = H_0(diag(b_1..b_C)K_C) + K_C((K_CᵀK_C) ⊙ M_w), b_i = Σ_c M_{i,c}w_cζ_c, "
      "M_w = M diag(w) Mᵀ",
      "chunk = all T tokens with a random PSD H_0; vs B_i^intra k_i = Σ_{c≥i} M_{i,c}w_cH_ck_i with H_c by the recursion",
      [](const Seq& s, const Plain& p, const Grad&, RelErr&, RelErr& ec) {
        const int C = s.T, K = s.K;
        auto M = [&](int i, int c) { return c >= i ? p.zeta[c] / p.zeta[i] : mp(0); };
        for (int i = 0; i < C; ++i) {
          mp b = 0;
          for (int c = 0; c < C; ++c) b += M(i, c) * w_of(s, p, c) * p.zeta[c];
          Vec<mp> col = s.H0 * s.k[i];
          for (auto& x : col) x *= b;
          for (int j = 0; j < C; ++j) {
            mp mw = 0;  // (M diag(w) Mᵀ)_{j,i}
            for (int c = 0; c < C; ++c) mw += M(j, c) * w_of(s, p, c) * M(i, c);
            const mp kk = dot(s.k[j], s.k[i]) * mw;
            for (int a = 0; a < K; ++a) col[a] += s.k[j][a] * kk;
          }
          ec.add(col, B_def(s, p, i, C - 1) * s.k[i]);
        }
      }));
  v.push_back(chunk_entry(
      "gka.sec422.B_cross_chunk", "§4.2.2 (B̃ cross-chunk)",
      "B̃_1 = ζ_C B̃_{C+1} + B̃_1^intra, B̃_1^intra := Σ_{c=1}^{C} ζ_c w_cH_c, with B̃_j := γ_jB_j (the sum is printed "
      "from c = i, read as c = 1: B̃_1 has no free index)",
      "chunk = tokens 1..C (C = T − 2); vs γ_1B_1 with B_1 by definition",
      [](const Seq& s, const Plain& p, const Grad&, RelErr&, RelErr& ec) {
        const int C = s.T - 2;
        const Mat<mp> Bnext = B_def(s, p, C, s.T - 1);
        Mat<mp> Bt(s.K, s.K);
        for (int c = 0; c < C; ++c) Bt += mp(p.zeta[c] * w_of(s, p, c)) * p.f.H[c];
        Bt += mp(p.zeta[C - 1] * s.gamma[C]) * Bnext;
        ec.add(Bt.values(), (s.gamma[0] * B_def(s, p, 0, s.T - 1)).values());
      }));
  return v;
}

}  // namespace

std::vector<Entry> gka_gradient_entries() {
  std::vector<Entry> v = lemma1_entries();
  for (auto& e : chunk_backward_entries()) v.push_back(std::move(e));
  for (auto& e : gka_gating_gradient_entries()) v.push_back(std::move(e));
  for (auto& e : gka_solver_gradient_entries()) v.push_back(std::move(e));
  return v;
}

}  // namespace ttr::proofs
