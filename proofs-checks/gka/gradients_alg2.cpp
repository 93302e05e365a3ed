// GKA App. C.1 at the solver level: eqs. (54)-(64) and Alg. 2 (the reverse
// Chebyshev iteration), against reverse mode of the unrolled Alg. 1. Tolerances and
// the reversal's amplification G_r: gradients_solver.cpp's header comment.
#include "proofs-checks/gka/gka.hpp"
#include "proofs-checks/gka/gradients_solver_support.hpp"

namespace ttr::proofs {
namespace {

using namespace gka_solver;  // with gka_grad's names and dense's dot, Mat, outer, operator*

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

std::vector<Entry> gka_alg2_gradient_entries() { return appendix_c1_entries(); }

}  // namespace ttr::proofs
