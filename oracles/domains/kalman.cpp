// The guaranteed domain of KLA-K (kla_kalman), forward: docs/domains.md, "KLA-K".
// Per state slot (n, d) the precision follows the Möbius map (KLA-K Thm 1,
// eq. (18)) Λ_t = g(Λ_{t−1}) + φ_t, g(x) = x/(ā² + p̄x), which is increasing in x,
// so the recursion itself, evaluated on an upper (lower) bound of Λ_{t−1} and
// rounded outward, gives an upper (lower) bound L_t (ℓ_t) of Λ_t — at p̄ = 0 the
// closed form Λ_t = ā^{−2t}(Λ_0 + Σ_s ā^{2s}φ_s), attained. The information mean
// (Thm 2, eq. (19)) has the gate f_t = ā/(ā² + p̄Λ_{t−1}) ≤ F_t = ā/(ā² + p̄ℓ_{t−1}),
// so |η_t| ≤ H_t = F_t H_{t−1} + |k λv v|, and the posterior mean μ_t = η_t/Λ_t is
// the convex combination (g·ā μ_{t−1} + φ·v/k)/(g + φ), so |μ_t| ≤ m_t =
// max(ā m_{t−1}, |v_t/k_t|) (and ≤ H_t/ℓ_t).
// The scaled forms (`chunk`, `scan`) hold nothing as a plain number but the
// readout and the final states (docs/kla-scaled.md): only conditions on the
// inputs and on those outputs apply to them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "oracles/domains/sequences.hpp"

namespace ttr::domains {

namespace {

// Outward rounding of the bounds' own double arithmetic (each step rounds a few
// times at 2^-53 relative: 2^-40 per step covers it with room).
double up(double x) { return x * (1.0 + 0x1p-40); }
double down(double x) { return x * (1.0 - 0x1p-40); }

struct Bounds {
  double inputs = 0.0;     // max |q|, |k|, |v|, as received (narrowed by the scan forms)
  double params = 0.0;     // max λv, ā, p̄, Λ_0, |η_0| (fp32 in the scan forms)
  double precision = 0.0;  // L_t, ā² + p̄L_{t−1}, g(L_{t−1}), k², φ
  double mobius = 0.0;     // unscaled scans: 2 max(1, m)², max(1, m)(1 + Λ_0)
  double leaf = 0.0;       // the largest Möbius leaf entry m (stored raw by a one-token chunk)
  double mean = 0.0;       // |λv v|, |k λv v|, F_t H_{t−1}, H_t
  double gate = 0.0;       // F_t
  double gates = 0.0;      // products of consecutive gates, max over windows of Π F
  double readout = 0.0;    // max(1, scale)Σ|q|m, max(1, scale²)Σ q²/ℓ, |q|m, q², q²/ℓ, scale²
  double final = 0.0;      // L_T, H_T: the final states lambda_T, eta_T
  // Backward (docs/domains.md, "KLA-K, backward"): the adjoint in moment coordinates.
  double adjoint = 0.0;    // the sequential adjoint's dμ, dP (after the reads), dP⁻, the terminal values
  double terms = 0.0;      // every term of every gradient, its factors and partial sums; dλv, dā, dp̄, dΛ_0, dη_0
  double grads = 0.0;      // dq, dk, dv as written (the storage format in the scan forms)
};

// The backward of one (sequence, head) problem (reference/kla_kalman/backward.hpp,
// scan_backward.hpp: the adjoint in moment coordinates P = 1/Λ, μ = η/Λ), from the
// forward's bounds: P_t ≤ 1/ℓ_t, |μ_t| ≤ m_t, r_t ∈ [0, 1], |ν_t| ≤ |v| + |k|m_{t−1}.
// Per slot, t = T..1: dμ′ = dμ + scale|do||q| (the read), dP′ = dP + scale²|do_var|q²,
// dP⁻ ≤ dP′ + |k|λv|ν|dμ′, then dμ ← ā r dμ′ ≤ ā dμ′ and dP ← ā² dP⁻ (r ≤ 1); the
// terminal values are dμ_T = Λ_T dη_T, dP_T = −Λ_T(Λ_T dΛ_T + η_T dη_T).
void adjoint_bounds(const DomainInputs& in, const Problem& p, const std::vector<double>& lam0,
                    const std::vector<double>& LT, const std::vector<double>& HT, const std::vector<double>& l_hist,
                    const std::vector<double>& m_hist, const std::vector<double>& r_hist, double s,
                    std::vector<double>& da, std::vector<double>& dp, Bounds& b) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const TensorMap<double>& x = in.tensors;
  const Tensor<double>&q = x.at("q"), &k = x.at("k"), &v = x.at("v"), &lv = x.at("lambda_v"), &abar = x.at("a_bar"),
                     &d_o = x.at("do");
  const Tensor<double>*dvar = optional(x, "do_var"), *dlam = optional(x, "dlambda_T"), *deta = optional(x, "deta_T"),
                     *eta_init = optional(x, "eta_init");
  const std::int64_t N = q.dim(3), D = v.dim(3), len = p.eos - p.bos;
  const std::size_t slots = static_cast<std::size_t>(N * D);
  const double s2 = s * s;
  // Per-token sums over the contracted index: dq_{t,n}, dk_{t,n} over d; dv_{t,d}, dλv_{t,d} over n.
  std::vector<double> dq(static_cast<std::size_t>(len * N)), dk(dq.size()), dv(static_cast<std::size_t>(len * D)),
      dl(dv.size());
  b.terms = std::max(b.terms, s2);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t d = 0; d < D; ++d) {
      const std::size_t i = static_cast<std::size_t>(n * D + d), h = static_cast<std::size_t>(p.h) * slots + i;
      const double a = abar.data[h];
      const double dL = dlam ? std::abs(block(*dlam, p.n, p.h).p[i]) : 0.0;
      const double dE = deta ? std::abs(block(*deta, p.n, p.h).p[i]) : 0.0;
      double M = up(LT[i] * dE), Pd = up(LT[i] * up(LT[i] * dL + HT[i] * dE));
      b.adjoint = std::max({b.adjoint, up(LT[i] * dL), up(HT[i] * dE), up(LT[i] * dL + HT[i] * dE), Pd, M});
      for (std::int64_t t = len - 1; t >= 0; --t) {
        const std::int64_t tt = p.bos + t;
        const std::size_t now = static_cast<std::size_t>(t + 1) * slots + i, before = now - slots;
        const double Pb = 1.0 / l_hist[now], Ppb = 1.0 / l_hist[before], mt = m_hist[now], mp = m_hist[before];
        const double rb = r_hist[now];  // r_t ≤ r̄_t ≤ 1
        const double qn = std::abs(row(q, p.b, tt, p.h).p[n]), kn = std::abs(row(k, p.b, tt, p.h).p[n]);
        const double lam = row(lv, p.b, tt, p.h).p[d], vv = std::abs(row(v, p.b, tt, p.h).p[d]);
        const double go = s * std::abs(row(d_o, p.b, tt, p.h).p[d]);
        const double gv = dvar ? s2 * std::abs(row(*dvar, p.b, tt, p.h).p[d]) : 0.0;
        const double kl = kn * lam, nu = up(vv + kn * mp);  // k λv; |ν| ≤ |v| + |k ā μ_{t−1}|
        // k λv P_t ≤ 1/|k|, λv P_t ≤ 1/k², k P_t ≤ 1/(|k|λv): Λ_t ≥ φ_t = k²λv.
        const double wv = up(std::min(kl * Pb, kn > 0.0 ? 1.0 / kn : inf));
        const double lvP = up(std::min(lam * Pb, kn > 0.0 ? 1.0 / (kn * kn) : inf));
        const double kP = up(std::min(kn * Pb, kl > 0.0 ? 1.0 / kl : inf));
        const double Mr = up(M + go * qn), Pr = up(Pd + gv * qn * qn);  // after the reads
        const double dPm = up(rb * rb * (Pr + kl * nu * Mr));  // r² (dP′ + k λv ν dμ′)
        const double bracket = up(vv + 2.0 * kn * mp);  // v(2r − 1) − 2r k ā μ_{t−1}
        b.adjoint = std::max({b.adjoint, Mr, Pr, dPm});
        // Factors and products as the forms form them (left to right), each term.
        b.terms = std::max({b.terms, mt, mp, Pb, Ppb, nu, up(kn * mp), go, gv, up(go * qn), up(gv * qn),
                            up(gv * qn * qn), up(go * mt), up(2.0 * gv * qn), up(2.0 * gv * qn * Pb), kl, up(kl * nu),
                            up(Pr + kl * nu * Mr),
                            up(kl * nu * Mr), up(kn * nu), wv, up(wv * Mr), lvP, bracket, up(bracket * lam), up(lvP * bracket),
                            up(lvP * bracket * Mr), up(2.0 * kn), up(2.0 * kl), Pb * Pb, up(Pb * Pb * Pr),
                            up(2.0 * wv * Pb * Pr), kP, up(kP * nu), up(kP * nu * Mr), kn * kn, up(kP * kP * Pr),
                            up(mp * Mr), 2.0 * a, up(2.0 * a * Ppb), up(2.0 * a * Ppb * dPm)});
        const std::size_t tn = static_cast<std::size_t>(t * N + n), td = static_cast<std::size_t>(t * D + d);
        dq[tn] = up(dq[tn] + go * mt + 2.0 * gv * qn * Pb);
        dk[tn] = up(dk[tn] + lvP * bracket * Mr + 2.0 * wv * Pb * Pr);
        dv[td] = up(dv[td] + wv * Mr);
        dl[td] = up(dl[td] + kP * rb * nu * Mr + kP * kP * Pr);
        da[h] = up(da[h] + rb * mp * Mr + 2.0 * a * Ppb * dPm);
        dp[h] = up(dp[h] + dPm);
        M = up(a * rb * Mr), Pd = up(a * a * dPm);  // dμ ← ā r dμ′, dP ← ā² dP⁻
      }
      // Back to (Λ_0, η_0): dη_0 = P_0 dμ_0, dΛ_0 = −P_0(P_0 dP_0 + μ_0 dμ_0).
      const double P0 = 1.0 / lam0[i], mu0 = up((eta_init ? std::abs(block(*eta_init, p.n, p.h).p[i]) : 0.0) * P0);
      b.adjoint = std::max({b.adjoint, M, Pd});
      b.terms = std::max({b.terms, P0, mu0, up(P0 * Pd), up(mu0 * M), up(P0 * up(P0 * Pd + mu0 * M)), up(P0 * M)});
    }
  for (double g : dq) b.grads = std::max(b.grads, g);
  for (double g : dk) b.grads = std::max(b.grads, g);
  for (double g : dv) b.grads = std::max(b.grads, g);
  for (double g : dl) b.terms = std::max(b.terms, g);
  b.terms = std::max(b.terms, b.grads);
}

Bounds bounds(const DomainInputs& in, const DomainContext& c) {
  const TensorMap<double>& x = in.tensors;
  const Tensor<double>&q = x.at("q"), &k = x.at("k"), &v = x.at("v"), &lv = x.at("lambda_v"), &abar = x.at("a_bar"),
                     &pbar = x.at("p_bar");
  const Tensor<double>*lam_init = optional(x, "lambda_init"), *eta_init = optional(x, "eta_init");
  const double lambda0 = received_number(in.cfg.number("lambda0"), c);
  const double s = received_number(in.cfg.number("scale"), c), s1 = std::max(1.0, s);
  const double s2 = s * s, s21 = std::max(1.0, s2);
  const std::int64_t N = q.dim(3), D = v.dim(3);
  constexpr double inf = std::numeric_limits<double>::infinity();
  Bounds b;
  b.inputs = std::max({max_abs(q), max_abs(k), max_abs(v)});
  b.params = std::max({max_abs(lv), max_abs(abar), max_abs(pbar), lam_init ? max_abs(*lam_init) : lambda0,
                       eta_init ? max_abs(*eta_init) : 0.0});
  b.readout = s2;  // scale·scale
  const std::size_t slots = static_cast<std::size_t>(N * D);
  std::vector<double> L(slots), l(slots), H(slots), m(slots), best(slots), lam0(slots);
  const bool backward = c.direction == Direction::backward && x.count("do");
  std::vector<double> l_hist, m_hist, r_hist;  // ℓ_t, m_t for t = 0 … len, r̄_t for t = 1 … len (backward)
  std::vector<double> da(static_cast<std::size_t>(abar.numel())), dp(da.size());  // Σ over tokens and batch
  if (backward) {
    for (const char* name : {"do", "do_var"})
      if (const Tensor<double>* t = optional(x, name)) b.inputs = std::max(b.inputs, max_abs(*t));
    for (const char* name : {"dlambda_T", "deta_T"})
      if (const Tensor<double>* t = optional(x, name)) b.params = std::max(b.params, max_abs(*t));
  }
  for (const Problem& p : problems(x)) {
    const std::int64_t len = p.eos - p.bos;
    if (backward) {
      l_hist.assign(static_cast<std::size_t>(len + 1) * slots, 0.0);
      m_hist.assign(l_hist.size(), 0.0);
      r_hist.assign(l_hist.size(), 1.0);
    }
    // A chunk of one token stores its Möbius leaf as the chunk aggregate (reference/scan/blelloch.hpp).
    const bool raw_leaf_stored = c.form == Form::chunk_unscaled && (c.chunk_size == 1 || len % c.chunk_size == 1);
    for (std::size_t i = 0; i < slots; ++i) {
      lam0[i] = L[i] = l[i] = lam_init ? block(*lam_init, p.n, p.h).p[i] : lambda0;
      H[i] = eta_init ? std::abs(block(*eta_init, p.n, p.h).p[i]) : 0.0;
      m[i] = up(H[i] / l[i]);
      best[i] = 0.0;
      if (backward) l_hist[i] = l[i], m_hist[i] = m[i];
    }
    double leaf = 0.0;
    for (std::int64_t t = p.bos; t < p.eos; ++t) {
      const Row qt = row(q, p.b, t, p.h), kt = row(k, p.b, t, p.h), vt = row(v, p.b, t, p.h), lt = row(lv, p.b, t, p.h);
      for (std::int64_t d = 0; d < D; ++d) {
        double sum_o = 0.0, sum_v = 0.0;
        for (std::int64_t n = 0; n < N; ++n) {
          const std::size_t i = static_cast<std::size_t>(n * D + d);
          const double a = abar.data[static_cast<std::size_t>(p.h) * slots + i];
          const double pb = pbar.data[static_cast<std::size_t>(p.h) * slots + i];
          const double kn = std::abs(kt.p[n]), k2 = kn * kn, phi = up(k2 * lt.p[d]), a2 = a * a;
          // Λ_t ≤ L_t: g is increasing, and g(∞) = 1/p̄ (p̄ > 0).
          const double den_up = pb > 0.0 ? a2 + pb * L[i] : a2;
          const double gL = up(pb > 0.0 && std::isinf(L[i]) ? 1.0 / pb : L[i] / den_up);
          const double gl = down(pb > 0.0 && std::isinf(l[i]) ? 1.0 / pb : l[i] / (pb > 0.0 ? a2 + pb * l[i] : a2));
          const double F = up(a / (pb > 0.0 ? a2 + pb * l[i] : a2));  // f_t ≤ F_t (Λ_{t−1} ≥ ℓ_{t−1})
          const double e = std::abs(lt.p[d] * vt.p[d]), w = up(kn * e);
          const double Hn = up(F * H[i] + w);
          const double Ln = up(gL + phi), ln = down(gl + phi);
          leaf = std::max({leaf, k2, phi, up(pb * phi), up(1.0 + pb * phi), pb});
          b.precision = std::max({b.precision, L[i], den_up, gL, k2, phi, Ln});
          b.mean = std::max({b.mean, e, w, up(F * H[i]), Hn});
          b.gate = std::max(b.gate, F);
          best[i] = up(F * std::max(1.0, best[i]));
          b.gates = std::max(b.gates, best[i]);
          // |μ_t| ≤ max(ā|μ_{t−1}|, |v/k|) (a convex combination; k = 0: μ_t = ā μ_{t−1}), and ≤ H_t/ℓ_t.
          const double mv = kn > 0.0 ? up(std::abs(vt.p[d]) / kn) : 0.0;
          m[i] = std::min(std::max(a * m[i], mv), ln > 0.0 ? up(Hn / ln) : inf);
          const double qn = std::abs(qt.p[n]);
          const double qv = ln > 0.0 ? up(qn * qn / ln) : (qn > 0.0 ? inf : 0.0);
          sum_o = up(sum_o + qn * m[i]);
          sum_v = up(sum_v + qv);
          b.readout = std::max({b.readout, up(qn * m[i]), qn * qn, qv, m[i]});
          L[i] = Ln, l[i] = ln, H[i] = Hn;
          if (backward) {
            const std::size_t j = static_cast<std::size_t>(t - p.bos + 1) * slots + i;
            l_hist[j] = ln, m_hist[j] = m[i];
            // r_t = g(Λ_{t−1})/(g(Λ_{t−1}) + φ_t) is increasing in g ≤ g(L_{t−1}).
            r_hist[j] = phi > 0.0 ? std::min(1.0, up(gL / (gL + phi))) : 1.0;
          }
        }
        b.readout = std::max({b.readout, up(s1 * sum_o), up(s21 * sum_v)});
      }
    }
    for (std::size_t i = 0; i < slots; ++i) b.final = std::max({b.final, L[i], H[i]});
    const double m1 = std::max(1.0, leaf);
    double lam0_max = 0.0;
    for (double x0 : lam0) lam0_max = std::max(lam0_max, x0);
    b.mobius = std::max({b.mobius, up(2.0 * m1 * m1), up(m1 * (1.0 + lam0_max))});
    if (raw_leaf_stored) b.leaf = std::max(b.leaf, leaf);
    if (backward) adjoint_bounds(in, p, lam0, L, H, l_hist, m_hist, r_hist, s, da, dp, b);
  }
  for (std::size_t i = 0; i < da.size(); ++i) b.terms = std::max({b.terms, da[i], dp[i]});
  return b;
}

using Measure = double (*)(const Bounds&);

}  // namespace

LayerDomain kla_kalman(const LayerSpec&) {
  const std::vector<Form> all = {}, plain = {Form::sequential, Form::chunk_unscaled, Form::scan_unscaled},
                          unscaled = {Form::chunk_unscaled, Form::scan_unscaled};
  const std::vector<Direction> fwd = {Direction::forward}, both = {}, bwd = {Direction::backward};
  std::vector<Direction> dirs = both;
  LayerDomain d;
  d.derivation = "docs/domains.md#kla-k";
  const auto add = [&](std::string name, std::string bound, std::string covers, std::vector<Form> forms, Held held,
                       Measure f) {
    d.conditions.push_back({std::move(name), std::move(bound), std::move(covers), std::move(forms), dirs, held,
                            [f](const DomainInputs& in, const DomainContext& c) { return f(bounds(in, c)); }});
  };
  add("inputs", "max |q|, |k|, |v|", "the inputs the form narrows (the scan forms), or receives in the dtype",
      all, Held::stored, [](const Bounds& b) { return b.inputs; });
  add("parameters", "max λv, ā, p̄, Λ_0, |η_0|", "the inputs the scan forms receive in fp32 (the sequential form: in "
      "the dtype)", all, Held::compute, [](const Bounds& b) { return b.params; });
  add("precision",
      "max_t L_t, ā² + p̄L_{t−1}, k², φ_t;  L_t = L_{t−1}/(ā² + p̄L_{t−1}) + φ_t (KLA-K eq. (18) on the upper bound), "
      "L_0 = Λ_0; at p̄ = 0, L_t = ā^{−2t}(Λ_0 + Σ_s ā^{2s}φ_s)",
      "Λ_t, ā² + p̄Λ_{t−1} and Λ_{t−1}/(ā² + p̄Λ_{t−1}) (sequential), Λ_t = P_t(Λ_0) handed to the mean scan (unscaled "
      "scans)",
      plain, Held::compute, [](const Bounds& b) { return b.precision; });
  dirs = fwd;  // the unscaled scans have no backward form
  add("Möbius entries", "2·max(1, m)², max(1, m)(1 + Λ_0),  m = max over t of k², φ_t, 1 + p̄φ_t, p̄",
      "the unscaled scans' Möbius leaves M_t, each composition's entries before its power-of-two rescaling "
      "(operands rescaled into [1/2, 1) or leaves), and P_t(Λ_0)'s numerator and denominator",
      unscaled, Held::compute, [](const Bounds& b) { return b.mobius; });
  add("stored Möbius leaf", "m (when a chunk holds one token: chunk size 1, or T mod C = 1)",
      "a chunk aggregate that is a raw Möbius leaf, stored in the storage format", {Form::chunk_unscaled},
      Held::stored, [](const Bounds& b) { return b.leaf; });
  dirs = both;  // the sequential backward recomputes the recurrence
  add("mean",
      "max_t |λv v|, |k λv v|, F_t H_{t−1}, H_t;  H_t = F_t H_{t−1} + |k_t λv_t v_t|, H_0 = |η_0|, "
      "F_t = ā/(ā² + p̄ℓ_{t−1}), ℓ_t the lower bound of Λ_t by eq. (18)",
      "η_t and f_t η_{t−1}, k λv v (sequential); the mean scan's additive parts, their products and sums (stored)",
      plain, Held::stored, [](const Bounds& b) { return b.mean; });
  add("gate", "max_t F_t", "the mean gate f_t = ā/(ā² + p̄Λ_{t−1})", {Form::sequential}, Held::compute,
      [](const Bounds& b) { return b.gate; });
  dirs = fwd;
  add("gate products", "max over windows s ≤ t of Π_{r=s..t} F_r (≥ max_t F_t)",
      "the mean scan's gates f_t and their compositions Π f", unscaled, Held::compute,
      [](const Bounds& b) { return b.gates; });
  const char* readout_bound =
      "max_{t,d} of max(1, scale) Σ_n |q_n| m_t, max(1, scale²) Σ_n q_n²/ℓ_t, m_t, |q|m_t, q², q²/ℓ_t; scale²;  m_t "
      "= min(max(ā m_{t−1}, |v_t/k_t|), H_t/ℓ_t)";
  const Measure readout = [](const Bounds& b) { return b.readout; };
  dirs = fwd;
  add("readout", readout_bound,
      "μ = η/Λ, q μ, q²/Λ and the sums over n before and after scale, o and o_var (stored): every form, the scaled "
      "ones included (their only plain values besides the inputs)",
      all, Held::stored, readout);
  add("final states", "max over slots of L_T, H_T", "the outputs lambda_T = Λ_T and eta_T = η_T, each rounded into "
      "fp32 once from its scaled value (the other forms hold them as intermediates: `precision`, `mean`)",
      {Form::chunk, Form::scan}, Held::compute, [](const Bounds& b) { return b.final; });
  // Backward: the sequential adjoint recomputes the forward recurrence (precision,
  // mean, gate above hold in both directions); the scaled backward runs the scaled
  // forward, readout included.
  dirs = bwd;
  const std::vector<Form> scaled = {Form::chunk, Form::scan};
  add("recomputed readout", readout_bound, "the scaled backward's forward pass (its readout o, o_var)", scaled,
      Held::stored, readout);
  add("adjoint",
      "max over slots and t of dμ′_t, dP′_t, dP⁻_t, their terminal values and factors: dμ_T = L_T|dη_T|, dP_T = "
      "L_T(L_T|dΛ_T| + H_T|dη_T|); dμ′_t = dμ_t + scale|do||q|, dP′_t = dP_t + scale²|do_var|q², dP⁻_t = r̄_t²(dP′_t + "
      "|k|λv(|v| + |k|m_{t−1})dμ′_t), dμ_{t−1} = ā r̄_t dμ′_t, dP_{t−1} = ā² dP⁻_t;  r̄_t = g(L_{t−1})/(g(L_{t−1}) + φ_t) "
      "≥ r_t = Λ_{t−1}/(ā² + p̄Λ_{t−1})/Λ_t",
      "the sequential adjoint's dμ, dP (carried, after the reads) and dP⁻ (the scan forms carry them scaled)",
      {Form::sequential}, Held::compute, [](const Bounds& b) { return b.adjoint; });
  add("backward terms",
      "max of every gradient term's factors and products (P_t ≤ 1/ℓ_t, |μ_t| ≤ m_t, |ν_t| ≤ |v| + |k|m_{t−1}, "
      "kλvP_t ≤ min(|k|λv/ℓ_t, 1/|k|), ...) and of the sums of their bounds: dq, dk over d, dv, dλv over n, dā, dp̄ "
      "over tokens and the batch, dΛ_0, dη_0",
      "μ_t, μ_{t−1}, P_t, P_{t−1}, ν_t, the adjoint leaves, every gradient term and partial sum, and the gradients "
      "held in fp32 (dlambda_v, da_bar, dp_bar, dlambda_init, deta_init)",
      {Form::sequential, Form::chunk, Form::scan}, Held::compute, [](const Bounds& b) { return b.terms; });
  add("gradients", "max over t of the sums of the term bounds of dq_{t,n}, dk_{t,n} (over d) and dv_{t,d} (over n)",
      "dq, dk, dv as written (narrowed by the scan forms)", {Form::sequential, Form::chunk, Form::scan},
      Held::stored, [](const Bounds& b) { return b.grads; });
  return d;
}

}  // namespace ttr::domains
