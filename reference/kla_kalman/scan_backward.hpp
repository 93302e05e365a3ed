// Kalman linear attention (KLA-K), backward of the scaled scan forms `scan` and
// `chunk` (scaled_scan.hpp): reverse mode of the two associative scans, as a
// production kernel computes it. The exact adjoint it reproduces is backward.hpp's
// (moment coordinates P = 1/Λ, μ = η/Λ; its header derives every partial below).
//
// 1. States from the forward's prefix compositions. The forward scans, by the
//    forward's own code (kla_scaled_scan_sequence, same plan, same narrowing),
//    give Λ_t = P_t(Λ_0) (Möbius prefixes, KLA-K Cor. 1.1) and η_t = A_{1:t} η_0 +
//    B_{1:t} (affine prefixes, Cor. 2.1) for every t, as Scaled numbers. From them,
//    per token t and slot (n, d):
//      c_t = ā² + p̄Λ_{t−1},  r_t = (Λ_{t−1}/c_t)/Λ_t = P_t/P⁻_t ∈ (0, 1]   (eqs. (16)-(18))
//      P_t = 1/Λ_t,  μ_t = η_t/Λ_t,  ν_t = v_d − k_n ā μ_{t−1}             (eq. (20), innovation form)
//    r_t is the quotient, not 1 − φP_t (which cancels where φP⁻ is large).
//
// 2. The adjoint of the states is itself a pair of scans over the reversed
//    sequence. In moment coordinates one step is (backward.hpp)
//      P_t = P⁻_t/(1 + φ_t P⁻_t),  P⁻_t = ā²P_{t−1} + p̄,  μ_t = ā r_t μ_{t−1} + w_t ν_t,
//    whose Jacobian with respect to (μ_{t−1}, P_{t−1}) is lower triangular:
//      ∂μ_t/∂μ_{t−1} = ā r_t,   ∂μ_t/∂P_{t−1} = ā² r_t² k λv ν_t,   ∂P_t/∂P_{t−1} = ā² r_t².
//    (The last is the linearised Möbius map: d/dΛ (aΛ + b)/(cΛ + d) = det M/(cΛ + d)²,
//    det M_t = ā², i.e. ∂Λ_t/∂Λ_{t−1} = ā²/c_t², which is ā² r_t² in P = 1/Λ.) Its
//    transpose gives the totals G^μ_t = ∂L/∂μ_t, G^P_t = ∂L/∂P_t (through o_t, o_var_t
//    and every later state), with g_t = scale·do_{t,d}, h_t = scale²·do_var_{t,d}:
//      G^μ_t = ā r_{t+1} G^μ_{t+1} + g_t q_{t,n}                                 (mean adjoint)
//      G^P_t = ā² r_{t+1}² G^P_{t+1} + (ā² r_{t+1}² k λv ν_{t+1} G^μ_{t+1} + h_t q_{t,n}²)   (precision adjoint)
//    and at t = T the final-state cotangents in moment coordinates,
//      G^μ_{T+} = Λ_T dη_T,   G^P_{T+} = −Λ_T(Λ_T dΛ_T + η_T dη_T).
//    Each is a diagonal affine recurrence run backwards in time, so each is the same
//    prefix scan as the forward mean track (compose_scaled_affine, the same
//    ScanPlan) over the reversed sequence of pairs, applied to its terminal value:
//    the element of token t (0-based; index T−1−t, after the padding below) is
//    (ā r_{t+1}, g_t q_t) resp.
//    (ā² r_{t+1}², ā² r_{t+1}² k λv ν_{t+1} G^μ_{t+1} + h_t q_t²), with the factor 1
//    for the last token. The precision adjoint's leaves need G^μ, so the mean
//    adjoint runs first: the forward runs precision then mean, the backward mean
//    then precision. In the chunked plan the reversed sequence is preceded by
//    identity pairs so that its chunks are the forward's (tokens [cC, (c+1)C), the
//    partial chunk last in time): the backward runs over the forward's chunks.
//
// 3. Per token, the local partials of backward.hpp's header with these totals:
//      dq_n += g μ_t + 2 h q_n P_t,   dv_d += k λv P_t G^μ,
//      dk_n += λv P_t (v (2r−1) − 2 r k ā μ_{t−1}) G^μ − 2 k λv P_t² G^P,
//      dλv_d += k P_t r ν G^μ − k² P_t² G^P,
//      dP⁻_t = r² (G^P + k λv ν G^μ),   dā += r μ_{t−1} G^μ + 2 ā P_{t−1} dP⁻_t,   dp̄ += dP⁻_t,
//    and at t = 0, G^μ_0 = ā r_1 G^μ_1, G^P_0 = ā² dP⁻_1:
//      dlambda_init = −P_0 (P_0 G^P_0 + μ_0 G^μ_0),   deta_init = P_0 G^μ_0.
//    In exact arithmetic this equals the sequential adjoint: the scans only
//    re-bracket the same products and sums.
//
// Why the backward is scaled too. With p̄ = 0, Λ_t ~ ā^{−2t} and P_t ~ ā^{2t}: the
// adjoint's cumulative gates Π ā r (~ ā^{T−t}) and Π ā² r² underflow fp32 within a
// few tokens at small ā, the terminal values Λ_T η_T dη_T and Λ_T² dΛ_T overflow it
// while Λ_T is still an fp32 number, and the gradients they combine into are
// ordinary numbers: dk_T = 2 k λv (dΛ_T + μ_T dη_T) (from P_T² G^P_{T+}) is O(1)
// while P_T² underflows and G^P_{T+} overflows, 0·inf = NaN in plain fp32.
// tests/backward/kla_scan_backward_test.cpp measures it (p̄ = 0, ā = 2^-8, T = 7,
// Λ_T ≈ 2^112, Λ_T² ≈ 2^224): the sequential adjoint in fp32 returns non-finite
// dk, dλv, dā, dlambda_init where the exact values are fp32 numbers. So every
// quantity of both adjoint scans (gates, additive parts, G^μ, G^P), P_t, P_{t−1}
// and dP⁻ is a Scaled number (reference/core/pow2.hpp: mantissa in acc, integer
// exponent), each gradient term a Scaled product, and every gradient element but
// dq a Scaled sum of its terms over n, d (for dā, dp̄ also over tokens and the
// batch: terms beyond fp32 of either sign then give the faithful ±inf, never
// inf − inf) rounded into acc once; r_t ∈ (0, 1], μ_t, ν_t and dq (whose terms
// g μ_t, h q P_t are bounded) are acc numbers. Without final-state cotangents G^μ
// and G^P are sums of readout cotangents under gates ≤ 1 and stay within the
// inputs' range; the scaling then only keeps P_t, the gates' products and the
// tiny terms faithful (gradual underflow, never 0·inf).
//
// Arithmetic policy P (reference/core/policy.hpp), as the forward scan: narrowed
// to the 16-bit format are the inputs q, k, v and the cotangents do, do_var
// (16-bit inputs, as in the other backward forms), the mantissa of the additive
// part of every composition either adjoint scan writes to memory
// (StoreScaledAffine; the forward scans narrow as the forward does), and the
// gradients dq, dk, dv as written. In acc (fp32): λv, ā, p̄, the initial states
// and the final-state cotangents dlambda_T, deta_T (fp32 like the final states
// themselves), the gates' mantissas, the per-token quantities r, μ, ν, the
// mantissas of every Scaled product and sum (the gradients' reductions: dq's in
// plain acc), and dlambda_v, da_bar, dp_bar, dlambda_init, deta_init as written.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "reference/kla_kalman/backward.hpp"  // KlaCotangents, KlaGrads
#include "reference/kla_kalman/scaled_scan.hpp"

namespace ttr {

template <class T>
Scaled<T> negated(Scaled<T> x) {
  x.m = -x.m;
  return x;
}

template <class P>
struct KlaScanBackwardWork {
  using A = typename P::acc;
  using S = Scaled<A>;
  KlaScaledScanWork<P> fwd;                 // the forward's prefixes (precision, mean, Λ_t)
  ScaledAffine<A> identity;                 // of the adjoint scans
  std::vector<ScaledAffine<A>> mean, prec;  // the reversed adjoint pairs, then their prefixes
  ScanWorkspace<ScaledAffine<A>> scan;
  std::vector<S> r, Pt, Pp;                 // per token and slot: r_t, P_t, P_{t−1}
  std::vector<A> mu, mu_p, nu, r_acc;       // μ_t, μ_{t−1}, ν_t, r_t rounded into acc
  std::vector<S> Gmu, GP;                   // G^μ_t, G^P_t
  std::vector<A> o, ov, lam, eta;           // the forward's outputs (unused) and final states

  void reserve(std::int64_t len, std::size_t slots, int D) {
    fwd.reserve(len, slots);
    identity = ScaledAffine<A>::identity(slots);
    mean.resize(static_cast<std::size_t>(len), identity);
    prec.resize(static_cast<std::size_t>(len), identity);
    const std::size_t n = static_cast<std::size_t>(len) * slots;
    for (auto* x : {&r, &Pt, &Pp, &Gmu, &GP}) x->assign(n, S{from_double<A>(0.0), 0});
    for (auto* x : {&mu, &mu_p, &nu, &r_acc}) x->assign(n, from_double<A>(0.0));
    o.assign(static_cast<std::size_t>(len) * D, from_double<A>(0.0));
    ov.assign(static_cast<std::size_t>(len) * D, from_double<A>(0.0));
    lam.assign(slots, from_double<A>(0.0));
    eta.assign(slots, from_double<A>(0.0));
  }
};

// One (batch, head) sequence (w reserved for len, N·D slots, D). Lam0, Eta0: Λ_0, η_0;
// dLamT, dEtaT: the final-state cotangents (nullptr: zero); do_, dvar: the readout
// cotangents (dvar may have no data: zero). dā, dp̄ are accumulated into the Scaled
// sums da, dp (over tokens and the batch), the other gradients written.
template <class P>
void kla_scan_sequence_backward(SeqView<const typename P::acc> q, SeqView<const typename P::acc> k,
                                SeqView<const typename P::acc> v, SeqView<const typename P::acc> lv,
                                const typename P::acc* a, const typename P::acc* p, std::int64_t len, int N, int D,
                                const typename P::acc& scale, const typename P::acc* Lam0,
                                const typename P::acc* Eta0, const typename P::acc* dLamT,
                                const typename P::acc* dEtaT, SeqView<const typename P::acc> do_,
                                SeqView<const typename P::acc> dvar, SeqView<typename P::acc> dq,
                                SeqView<typename P::acc> dk, SeqView<typename P::acc> dv,
                                SeqView<typename P::acc> dlv, Scaled<typename P::acc>* da,
                                Scaled<typename P::acc>* dp,
                                typename P::acc* dLam0, typename P::acc* dEta0, const ScanPlan& plan,
                                KlaScanBackwardWork<P>& w) {
  using A = typename P::acc;
  using S = Scaled<A>;
  const std::size_t slots = static_cast<std::size_t>(N) * D;
  const auto slot = [D](int n, int d) { return static_cast<std::size_t>(n) * D + d; };
  const A zero = from_double<A>(0.0), two = from_double<A>(2.0);
  const S one = normalised(from_double<A>(1.0)), szero{zero, 0};
  const A scale2 = scale * scale;
  const bool has_var = dvar.base != nullptr;

  // 1. The forward scans, by the forward's own code: w.fwd.lam[t·S + s] = Λ_t
  // (t = 0 … len), w.fwd.mean[t] = (A_{1:t+1}, B_{1:t+1}); its outputs are not needed.
  std::copy(Lam0, Lam0 + slots, w.lam.begin());
  std::copy(Eta0, Eta0 + slots, w.eta.begin());
  kla_scaled_scan_sequence<P>(q, k, v, lv, a, p, len, N, D, scale, w.lam.data(), w.eta.data(),
                              SeqView<A>{w.o.data(), D, D}, SeqView<A>{w.ov.data(), D, D}, plan, w.fwd);
  const auto eta_after = [&](std::int64_t t, std::size_t s) {  // η_{t+1} (t = −1: η_0)
    if (t < 0) return w.fwd.eta0[s];
    const ScaledAffine<A>& e = w.fwd.mean[static_cast<std::size_t>(t)];
    return e.A[s] * w.fwd.eta0[s] + e.B[s];
  };
  const auto at = [slots](std::int64_t t, std::size_t s) { return static_cast<std::size_t>(t) * slots + s; };

  std::optional<NamedIntermediate> phase;
  phase.emplace("backward: r_t = (Λ_{t-1}/c_t)/Λ_t, P_t = 1/Λ_t, μ_t = η_t/Λ_t, innovation ν_t (scaled)");
  for (std::int64_t t = 0; t < len; ++t)
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d) {
        const std::size_t s = slot(n, d), i = at(t, s);
        const S& Lp = w.fwd.lam[at(t, s)];
        const S& Lt = w.fwd.lam[at(t + 1, s)];
        const S c = w.fwd.a2[s] + normalised(p[s]) * Lp;
        w.r[i] = (Lp / c) / Lt;
        w.r_acc[i] = value_of(w.r[i]);
        w.Pt[i] = one / Lt;
        w.Pp[i] = one / Lp;
        w.mu[i] = value_of(eta_after(t, s) / Lt);
        w.mu_p[i] = value_of(eta_after(t - 1, s) / Lp);
        A kam = k.row(t)[n];  // k ā μ_{t−1}, the prediction of v
        scale_by(kam, a[s]);
        scale_by(kam, w.mu_p[i]);
        w.nu[i] = v.row(t)[d];
        w.nu[i] -= kam;
      }

  // Terminal values: the final-state cotangents in moment coordinates.
  std::vector<S> GmuT(slots, szero), GPT(slots, szero);
  for (std::size_t s = 0; s < slots; ++s) {
    const S& LT = w.fwd.lam[at(len, s)];
    const S dE = dEtaT ? normalised(dEtaT[s]) : szero;
    const S dL = dLamT ? normalised(dLamT[s]) : szero;
    GmuT[s] = LT * dE;
    GPT[s] = negated(LT * (LT * dL + eta_after(len - 1, s) * dE));
  }

  // 2a. Mean adjoint: pairs (ā r_{t+1}, g_t q_t) reversed, prefix scan, applied to G^μ_{T+}.
  phase.emplace("backward: mean adjoint pairs (ā r_{t+1}, scale·do_t q_t) (scaled)");
  // Chunked plan: `pad` identity pairs ahead of the reversed sequence (after the last
  // token in time) put the reversed chunks on the forward's grid, chunk c holding
  // tokens [cC, (c+1)C), the partial chunk the last tokens, as a kernel that runs
  // its backward over the forward's chunks does. Composing with the identity is
  // exact, so the padding changes no rounding.
  const std::size_t pad =
      plan.chunk > 0 ? static_cast<std::size_t>((plan.chunk - len % plan.chunk) % plan.chunk) : 0;
  const std::size_t n_rev = static_cast<std::size_t>(len) + pad;
  if (w.mean.size() < n_rev) w.mean.resize(n_rev, w.identity);
  if (w.prec.size() < n_rev) w.prec.resize(n_rev, w.identity);
  const std::span<ScaledAffine<A>> mean(w.mean.data(), n_rev);
  const std::span<ScaledAffine<A>> prec(w.prec.data(), n_rev);
  const auto rev = [&](std::int64_t t) { return pad + static_cast<std::size_t>(len - 1 - t); };
  for (std::size_t i = 0; i < pad; ++i) mean[i] = prec[i] = w.identity;
  for (std::int64_t t = 0; t < len; ++t) {
    ScaledAffine<A>& e = mean[rev(t)];
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d) {
        const std::size_t s = slot(n, d);
        e.A[s] = t + 1 < len ? w.fwd.abar[s] * w.r[at(t + 1, s)] : one;
        A leaf = scale;
        scale_by(leaf, do_.row(t)[d]);
        scale_by(leaf, q.row(t)[n]);
        e.B[s] = normalised(leaf);
      }
  }
  phase.emplace("backward: mean adjoint G^μ_t (reversed prefix compositions, scaled)");
  prefix_scan(mean, plan, w.identity, compose_scaled_affine<A>, StoreScaledAffine<P>{}, w.scan);
  for (std::int64_t t = 0; t < len; ++t) {
    const ScaledAffine<A>& e = mean[rev(t)];
    for (std::size_t s = 0; s < slots; ++s) w.Gmu[at(t, s)] = e.A[s] * GmuT[s] + e.B[s];
  }

  // 2b. Precision adjoint: pairs (ā² r_{t+1}², ā² r_{t+1}² kλvν_{t+1} G^μ_{t+1} + h_t q_t²) reversed.
  phase.emplace("backward: precision adjoint pairs (ā² r_{t+1}², ...) (scaled)");
  for (std::int64_t t = 0; t < len; ++t) {
    ScaledAffine<A>& e = prec[rev(t)];
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d) {
        const std::size_t s = slot(n, d);
        A leaf = zero;
        if (has_var) {
          leaf = scale2;
          scale_by(leaf, dvar.row(t)[d]);
          scale_by(leaf, q.row(t)[n]);
          scale_by(leaf, q.row(t)[n]);
        }
        e.B[s] = normalised(leaf);
        if (t + 1 < len) {
          const std::size_t j = at(t + 1, s);
          const S ar = w.fwd.abar[s] * w.r[j];
          e.A[s] = ar * ar;
          A kln = k.row(t + 1)[n];  // k λv ν of token t+1
          scale_by(kln, lv.row(t + 1)[d]);
          scale_by(kln, w.nu[j]);
          e.B[s] = e.B[s] + e.A[s] * (normalised(kln) * w.Gmu[j]);
        } else {
          e.A[s] = one;
        }
      }
  }
  phase.emplace("backward: precision adjoint G^P_t (reversed prefix compositions, scaled)");
  prefix_scan(prec, plan, w.identity, compose_scaled_affine<A>, StoreScaledAffine<P>{}, w.scan);
  for (std::int64_t t = 0; t < len; ++t) {
    const ScaledAffine<A>& e = prec[rev(t)];
    for (std::size_t s = 0; s < slots; ++s) w.GP[at(t, s)] = e.A[s] * GPT[s] + e.B[s];
  }

  // 3. Per-token gradients: each term a Scaled product, summed in Scaled arithmetic and
  // rounded into acc once (dq: its terms μ_t, P_t are bounded and rounded into acc).
  phase.emplace("backward: per-token gradients dq, dk, dv, dλv, dā, dp̄");
  for (std::int64_t t = 0; t < len; ++t) {
    for (int n = 0; n < N; ++n) {
      const A& qn = q.row(t)[n];
      const A& kn = k.row(t)[n];
      A dq_acc = zero;
      S dk_acc = szero;
      for (int d = 0; d < D; ++d) {
        const std::size_t s = slot(n, d), i = at(t, s);
        const A& lvd = lv.row(t)[d];
        const A& r = w.r_acc[i];
        // dq_n += g μ_t + 2 h q_n P_t
        A g = scale;
        scale_by(g, do_.row(t)[d]);
        mul_add_to(dq_acc, g, w.mu[i]);
        if (has_var) {
          A h = scale2;
          scale_by(h, dvar.row(t)[d]);
          A term = two * h * qn;
          scale_by(term, value_of(w.Pt[i]));
          dq_acc += term;
        }
        // dk_n += λv P_t (v (2r−1) − 2 r k ā μ_{t−1}) G^μ − 2 k λv P_t² G^P
        A kam = kn;
        scale_by(kam, a[s]);
        scale_by(kam, w.mu_p[i]);
        A bracket = v.row(t)[d] * (two * r - from_double<A>(1.0)) - two * r * kam;
        scale_by(bracket, lvd);
        const S PtPt = w.Pt[i] * w.Pt[i];
        A klv = kn;
        scale_by(klv, lvd);
        dk_acc = dk_acc + normalised(bracket) * (w.Pt[i] * w.Gmu[i]);
        dk_acc = dk_acc + negated(normalised(two * klv) * (PtPt * w.GP[i]));
        // dā, dp̄ from μ_t's ā and P⁻_t = ā² P_{t−1} + p̄
        A kln = klv;
        scale_by(kln, w.nu[i]);
        const S dPm = w.r[i] * w.r[i] * (w.GP[i] + normalised(kln) * w.Gmu[i]);
        A rmu = r;
        scale_by(rmu, w.mu_p[i]);
        da[s] = da[s] + normalised(rmu) * w.Gmu[i];
        da[s] = da[s] + normalised(two * a[s]) * (w.Pp[i] * dPm);
        dp[s] = dp[s] + dPm;
      }
      dq.row(t)[n] = P::narrow(dq_acc);
      dk.row(t)[n] = P::narrow(value_of(dk_acc));
    }
    for (int d = 0; d < D; ++d) {
      const A& lvd = lv.row(t)[d];
      S dv_acc = szero, dlv_acc = szero;
      for (int n = 0; n < N; ++n) {
        const std::size_t s = slot(n, d), i = at(t, s);
        const A& kn = k.row(t)[n];
        A klv = kn;  // dv_d += k λv P_t G^μ
        scale_by(klv, lvd);
        const S PG = w.Pt[i] * w.Gmu[i];
        dv_acc = dv_acc + normalised(klv) * PG;
        A krn = kn;  // dλv_d += k r ν P_t G^μ − k² P_t² G^P
        scale_by(krn, w.r_acc[i]);
        scale_by(krn, w.nu[i]);
        A k2 = kn;
        scale_by(k2, kn);
        dlv_acc = dlv_acc + normalised(krn) * PG;
        dlv_acc = dlv_acc + negated(normalised(k2) * (w.Pt[i] * w.Pt[i] * w.GP[i]));
      }
      dv.row(t)[d] = P::narrow(value_of(dv_acc));
      dlv.row(t)[d] = value_of(dlv_acc);
    }
  }

  // Back to (Λ_0, η_0): G^μ_0 = ā r_1 G^μ_1, G^P_0 = ā² dP⁻_1 (the terminal values when len = 0).
  phase.emplace("backward: dlambda_init, deta_init");
  for (int n = 0; n < N; ++n)
    for (int d = 0; d < D; ++d) {
      const std::size_t s = slot(n, d);
      S Gmu0 = GmuT[s], GP0 = GPT[s];
      if (len > 0) {
        const std::size_t i = at(0, s);
        A kln = k.row(0)[n];
        scale_by(kln, lv.row(0)[d]);
        scale_by(kln, w.nu[i]);
        const S dPm = w.r[i] * w.r[i] * (w.GP[i] + normalised(kln) * w.Gmu[i]);
        Gmu0 = w.fwd.abar[s] * w.r[i] * w.Gmu[i];
        GP0 = w.fwd.a2[s] * dPm;
      }
      const S L0 = normalised(Lam0[s]);
      const S P0 = one / L0, mu0 = normalised(Eta0[s]) / L0;
      if (dLam0) dLam0[s] = value_of(negated(P0 * (P0 * GP0 + mu0 * Gmu0)));
      if (dEta0) dEta0[s] = value_of(P0 * Gmu0);
    }
}

// Both forms (scan: ScanPlan::whole_sequence(), chunk: ScanPlan::chunked(C)): inputs
// and cotangents as kla_kalman_backward; reads q, k, v, do, do_var as a kernel under P does.
template <class P>
void kla_kalman_scaled_backward(const KlaInputs<typename P::acc>& in, const typename P::acc& lambda0,
                                const typename P::acc& scale, const KlaCotangents<typename P::acc>& cot,
                                const ScanPlan& plan, KlaGrads<typename P::acc>& g) {
  using A = typename P::acc;
  Tensor<A> qn, kn, vn, don, dvn;
  const KlaInputs<A> kin{policy_operand<P>(in.q, qn), policy_operand<P>(in.k, kn), policy_operand<P>(in.v, vn),
                         in.lambda_v, in.a_bar, in.p_bar, in.lambda_init, in.eta_init};
  const Tensor<A>& do_ = policy_operand<P>(cot.o, don);
  const Tensor<A>* dvar = cot.o_var ? &policy_operand<P>(*cot.o_var, dvn) : nullptr;
  const std::int64_t B = kin.q.dim(0), len = kin.q.dim(1), H = kin.q.dim(2);
  const int N = static_cast<int>(kin.q.dim(3)), D = static_cast<int>(kin.v.dim(3));
  const A zero = from_double<A>(0.0);
  g.dq = Tensor<A>(kin.q.shape, zero);
  g.dk = Tensor<A>(kin.k.shape, zero);
  g.dv = Tensor<A>(kin.v.shape, zero);
  g.dlambda_v = Tensor<A>(kin.lambda_v.shape, zero);
  g.da_bar = Tensor<A>(kin.a_bar.shape, zero);
  g.dp_bar = Tensor<A>(kin.p_bar.shape, zero);
  Tensor<A> lam0, eta0;
  kla_initial_state(kin, lambda0, lam0, eta0);
  g.dlambda_init = Tensor<A>(lam0.shape, zero);
  g.deta_init = Tensor<A>(eta0.shape, zero);
  KlaScanBackwardWork<P> w;
  w.reserve(len, static_cast<std::size_t>(N) * D, D);
  // dā, dp̄ summed over tokens and the batch as Scaled numbers, rounded once: terms beyond
  // fp32 (dp̄ ~ Λ² with p̄ = 0) of either sign give the faithful ±inf, never inf − inf.
  std::vector<Scaled<A>> da(g.da_bar.data.size(), Scaled<A>{zero, 0}), dp(da);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      kla_scan_sequence_backward<P>(
          seq(kin.q, b, h), seq(kin.k, b, h), seq(kin.v, b, h), seq(kin.lambda_v, b, h),
          kin.a_bar.data.data() + h * N * D, kin.p_bar.data.data() + h * N * D, len, N, D, scale,
          state_block(lam0, b, h), state_block(eta0, b, h),
          cot.lambda_T ? state_block(*cot.lambda_T, b, h) : nullptr, cot.eta_T ? state_block(*cot.eta_T, b, h) : nullptr,
          seq(do_, b, h), dvar ? seq(*dvar, b, h) : SeqView<const A>{nullptr, 0, 0}, seq(g.dq, b, h),
          seq(g.dk, b, h), seq(g.dv, b, h), seq(g.dlambda_v, b, h), da.data() + h * N * D, dp.data() + h * N * D,
          state_block(g.dlambda_init, b, h), state_block(g.deta_init, b, h), plan, w);
  for (std::size_t s = 0; s < da.size(); ++s) {
    g.da_bar.data[s] = value_of(da[s]);
    g.dp_bar.data[s] = value_of(dp[s]);
  }
}

}  // namespace ttr
