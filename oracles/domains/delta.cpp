// The guaranteed domain of the delta family (delta_rule, gated_delta_rule, kda,
// kaczmarz_delta_rule, precond_gated_delta_rule, precond_kda): sequential and
// chunk forms, forward and backward; docs/domains.md, "Delta rule".
// The state is bounded in norm, not by majorants: the write I − β_t k_t k_tᵀ has
// spectral norm ρ_t = max(1, β_t‖k_t‖² − 1) (eigenvalues 1 and 1 − β‖k‖²; β ≥ 0),
// the decay Diag(e^{g}) norm ≤ 1, so
//
//   ‖S_t‖_F ≤ ρ_t ‖S_{t−1}‖_F + β_t ‖k_t‖ ‖v_t‖,   B_0 = ‖h0‖_F              (state)
//   ‖δ_t‖   ≤ β_t (‖v_t‖ + ‖k_t‖ B_{t−1})                                  (residual)
//
// and the chunk form's WY/UT quantities follow from the same propagators
// (entries of (I + A)⁻¹ are −β_t k_tᵀ Γ Φ k_s, rows of W are β_t Φᵀ Γ k_t).
// The chunk backward (reference/family/delta_chunk_backward.hpp) is bounded chunk
// by chunk from the sequential adjoint's bound D at the chunk's end and the state
// bound at its start (docs/domains.md, "Delta rule, chunk backward").
// The preconditioned layers write along w = B_t ⊙ k (PDN eq. (9)): the write
// I − β w kᵀ is not symmetric, and ρ_t is its exact spectral norm (a rank-one
// perturbation of I: its nontrivial σ² are the roots of λ² − (2 − 2c + ab)λ + (1 − c)²,
// c = βwᵀk, ab = β²‖w‖²‖k‖²); every key norm above is max(‖k‖, ‖w‖)
// (docs/domains.md, "Preconditioned delta rule").
#include <algorithm>
#include <cmath>
#include <vector>

#include "oracles/domains/sequences.hpp"

namespace ttr::domains {

namespace {

struct Bounds {
  double inputs = 0.0;   // max |q|, |k|, |v|, |h0|, the step β̃ as stored
  double energy = 0.0;   // the sums of squares the form computes (l2norm, Kaczmarz)
  double S = 0.0;        // Ŝ = max_t B_t
  double R = 0.0;        // max_t max(1, β_t) max(1, κ_t) (ν_t + κ_t B_{t−1})
  double Delta = 0.0;    // Δ̂ = max_t β_t (ν_t + κ_t B_{t−1})
  double q2 = 0.0, kappa = 0.0, bk = 0.0, bv = 0.0;  // max ‖q̃_t‖, ‖k̃_t‖, β_t‖k̃_t‖, β_t‖v_t‖
  double pi = 1.0;       // max over chunks of Π ρ_t
  double C = 0.0;        // the longest chunk (0: sequential)
  double g = 0.0;        // max |g|
  double s = 1.0;        // scale
  // Backward (sequential adjoint), docs/domains.md "Delta rule, backward".
  double adjoint = 0.0;  // max_t max((1 + β_t‖k_t‖²) D'_t, scale‖q_t‖)
  double grads = 0.0;    // the largest gradient term
  // Chunk backward, docs/domains.md "Delta rule, chunk backward" (maxima over chunks).
  double chunk_adjoint = 0.0;  // stored: dΔ, dWy, the dS_end operand
  double ut_adjoint = 0.0;     // compute: the dS pass, dT, TᵀdT, dA, dX = TᵀdWy, dY = TᵀdΔ
  double chunk_grads = 0.0;    // stored: dq, dk, dw, dv, dβ of the core, partial sums and products
  double chunk_dg = 0.0;       // compute: db, its products, and dg's reverse running sums
  // Preconditioned layers (reference/family/atk.hpp, atk_backward.hpp).
  double precond = 0.0;        // A_t + eps, its update's products, 1 + |r_t|
  double precond_grads = 0.0;  // the preconditioner's adjoint: dr, dA, dg_atk, dβ_atk, dk_atk, dc
};

// The preconditioner of one token, channel by channel (reference/family/atk.hpp):
// A_t = e^{g_atk}A_{t−1} + β_atk k², r = log(A_t + eps) − c, s = r/(1 + |r|),
// B = e^{−log(x)s} ∈ [1/x, x], the write key w = B ⊙ k.
struct AtkToken {
  double decay = 1.0, wa = 0.0;
  std::vector<double> A_prev, A, r, B, k;
};

// One token of the backward's reverse pass (norms, and the forward bounds at t).
struct Token {
  double B_prev, B, r, delta, kappa, nu, beta, rho, q, do_norm, lq, lk, den;
};

// The chunk backward of one chunk (tokens [first, last]), given the sequential
// adjoint's bound D_end at its end (‖dS_end‖_F). Every line is derived in
// docs/domains.md, "Delta rule, chunk backward"; (F1)–(F3) as there.
void chunk_backward_bounds(const std::vector<Token>& tk, std::size_t first, std::size_t last, double D_end,
                           double s, bool gated, Bounds& b) {
  const double s1 = std::max(1.0, s);
  const double Bst = tk[first].B_prev;  // ‖S_0‖_F, the chunk-initial state
  double C = 0.0, kap = 0.0, qbar = 0.0, obar = 0.0, Dbar = 0.0, bk = 0.0, pi = 1.0;
  double sum_qdo = 0.0, sum_dk = 0.0, sum_bkk = 0.0;
  for (std::size_t i = first; i <= last; ++i) {
    const Token& t = tk[i];
    C += 1.0;
    kap = std::max(kap, t.kappa);
    qbar = std::max(qbar, t.q);
    obar = std::max(obar, t.do_norm);
    Dbar = std::max(Dbar, t.delta);
    bk = std::max(bk, t.beta * t.kappa);
    pi *= t.rho;
    sum_qdo += t.q * t.do_norm;
    sum_dk += t.delta * t.kappa;
    sum_bkk += t.beta * t.kappa * t.kappa;
  }
  const double k1 = std::max(1.0, kap), q1 = std::max(1.0, qbar);
  // E: ‖dΔ_t‖ ≤ ‖k_t‖E (the rows of dΔ = scale·MᵀdO + (W_k ⊙ e^{b_last − b})dS_end, and
  // their partial sums before scale); Θ: row and column sums of T = (I + A)⁻¹.
  const double E = D_end + s1 * sum_qdo;
  const double Theta = 1.0 + C * bk * kap * pi;
  // dY = TᵀdΔ is the gradient of the chunk's right-hand side y_t = β_t v_t, which is
  // the sequential adjoint's dδ_t = dS′_tᵀk_t: ‖dY_t‖ ≤ y_t = ‖k_t‖D′_t (D′ run over the
  // chunk from D_end). Then dX = −dY S_0ᵀ (rows ≤ y_t B_0) and dA = −(TᵀdΔΔᵀ) on s < t
  // (the gradient of Δ = (I + A)⁻¹R with respect to A): |dA_ts| ≤ y_t Δ_s.
  double D = D_end, ymax = 0.0, by_max = 0.0, sum_byk = 0.0, dk = 0.0, dbeta = 0.0;
  for (std::size_t i = last + 1; i-- > first;) {
    const Token& t = tk[i];
    const double Dp = D + s * t.q * t.do_norm, y = t.kappa * Dp;
    ymax = std::max(ymax, y);
    by_max = std::max(by_max, t.beta * y);
    sum_byk += t.beta * y * t.kappa;
    dk = std::max(dk, t.beta * y * (Bst + sum_dk));                     // β e dX_t + Σ_s β_t dA_ts w_s
    dbeta = std::max(dbeta, y * (Bst * t.kappa + t.nu + t.kappa * sum_dk));  // dXᵀk, dYᵀv, Σ dA G
    D = t.rho * Dp;
  }
  const double a1 = std::max(1.0, by_max) * Dbar;  // an entry of dA or Diag(β) dA, times max(1, β)
  b.chunk_adjoint = std::max({b.chunk_adjoint, kap * E, kap * E * Bst, E});
  // The UT transform's partial sums (F1): TᵀdT ≤ ΘκEΔ̂, (TᵀdT)Tᵀ ≤ Θ²κEΔ̂, TᵀdWy ≤ ΘκEB_0, TᵀdΔ ≤ ΘκE.
  b.ut_adjoint = std::max({b.ut_adjoint, E + pi * E * sum_bkk, Theta * kap * E * Dbar, Theta * Theta * kap * E * Dbar,
                           Theta * kap * E * std::max(1.0, Bst), ymax * Dbar, a1});
  b.chunk_grads = std::max({b.chunk_grads,
                            s1 * obar * std::max({Bst + sum_dk, Dbar * k1, Dbar * q1}),  // dq; dO S_0ᵀ, dO Δᵀ
                            Dbar * (s1 * sum_qdo + D_end + sum_byk),                     // dw
                            dk, by_max, dbeta,                                           // dk, dv, dβ
                            a1 * k1 * k1});
  if (!gated) return;
  // db's terms, each counted where it is added and where it is subtracted (F1),
  // summed over the channels: dg = the chunk's reverse cumulative sum of db.
  const double db = D_end * Bst + 2.0 * s1 * sum_qdo * sum_dk + s1 * Bst * sum_qdo + 2.0 * D_end * sum_dk +
                    Bst * sum_byk + 2.0 * sum_byk * sum_dk;
  b.chunk_dg = std::max({b.chunk_dg, db, s1 * obar * Dbar * q1 * k1, s1 * obar * Bst * qbar, Dbar * D_end * kap,
                         by_max * Bst * kap, a1 * k1 * k1});
}

Bounds bounds(const DomainInputs& in, const DomainContext& c, DeltaStep step) {
  const TensorMap<double>& x = in.tensors;
  const Tensor<double>&q = x.at("q"), &k = x.at("k"), &v = x.at("v"), &beta = x.at("beta");
  const Tensor<double>*g = optional(x, "g"), *h0 = optional(x, "h0");
  const bool l2 = l2norm_on(in);
  const double eps = step.key_energy_step ? in.cfg.number("eps") : 0.0;
  constexpr double kL2Eps = 1e-6;  // FLA's, inside the sqrt (reference/family/l2norm.hpp)
  Bounds b;
  b.s = scale_of(in);
  b.g = g ? max_abs(*g) : 0.0;
  b.inputs = std::max({max_abs(q), max_abs(k), max_abs(v), h0 ? max_abs(*h0) : 0.0});
  const Tensor<double>*d_o = optional(x, "do"), *dht = optional(x, "dht");
  const bool backward = c.direction == Direction::backward && d_o;
  if (backward) b.inputs = std::max({b.inputs, max_abs(*d_o), dht ? max_abs(*dht) : 0.0});
  // The preconditioner's inputs (precond_*): decay, write strength, A_0, the centre c per head.
  const Tensor<double>*g_atk = step.preconditioned ? &x.at("g_atk") : nullptr,
                     *b_atk = step.preconditioned ? &x.at("beta_atk") : nullptr,
                     *A0 = optional(x, "initial_A_state"), *center = optional(x, "log_atk_scale"),
                     *dA_T = optional(x, "dfinal_A_state");
  const double log_x = step.preconditioned ? std::log(in.cfg.number("x")) : 0.0;
  const double atk_eps = step.preconditioned ? in.cfg.number("eps") : 0.0;
  const std::int64_t K = k.dim(3);
  std::vector<Token> tokens;
  std::vector<AtkToken> atk;
  std::vector<double> A(static_cast<std::size_t>(K)), w(A.size());
  double dc = 0.0;  // the centre's gradient, summed over everything (≥ any per-head sum)
  for (const Problem& p : problems(x)) {
    tokens.clear();
    atk.clear();
    const double ctr = !step.preconditioned ? 0.0 : center ? center->data[static_cast<std::size_t>(p.h)]
                                                            : in.cfg.number("log_atk_scale");
    if (step.preconditioned)
      for (std::int64_t i = 0; i < K; ++i)
        A[static_cast<std::size_t>(i)] = A0 ? A0->data[static_cast<std::size_t>((p.n * A0->dim(1) + p.h) * K + i)] : 0.0;
    double B = h0 ? block(*h0, p.n, p.h).l2() : 0.0;
    b.S = std::max(b.S, B);
    const std::int64_t C = chunk_tokens(c, p.eos - p.bos);
    b.C = std::max(b.C, static_cast<double>(C));
    double chunk_rho = 1.0;
    for (std::int64_t t = p.bos; t < p.eos; ++t) {
      const Row qt = row(q, p.b, t, p.h), kt = row(k, p.b, t, p.h), vt = row(v, p.b, t, p.h);
      double kk = kt.l2sq(), qq = qt.l2sq();
      // The L2 norm's backward scales by 1/√(‖x‖² + 1e-6) (reference/family/l2norm_backward.hpp).
      const double lq = l2 ? 1.0 / std::sqrt(qq + kL2Eps) : 1.0, lk = l2 ? 1.0 / std::sqrt(kk + kL2Eps) : 1.0;
      if (l2) {
        b.energy = std::max({b.energy, kk + kL2Eps, qq + kL2Eps});
        kk /= kk + kL2Eps;
        qq /= qq + kL2Eps;
      }
      double kappa = std::sqrt(kk);
      const double nu = vt.l2();
      double bt = row(beta, p.b, t, p.h).p[0];
      if (step.key_energy_step) {
        b.energy = std::max(b.energy, kk + eps);
        bt /= kk + eps;
      }
      b.inputs = std::max(b.inputs, bt);
      double rho = std::max(1.0, bt * kk - 1.0);
      if (step.preconditioned) {
        // The write key w = B ⊙ k̂ (k̂ the normalised key) and ρ_t = ‖I − β w k̂ᵀ‖₂ exactly.
        AtkToken a;
        a.decay = std::exp(row(*g_atk, p.b, t, p.h).p[0]);
        a.wa = row(*b_atk, p.b, t, p.h).p[0];
        const double norm = l2 ? 1.0 / std::sqrt(kt.l2sq() + kL2Eps) : 1.0;
        double ww = 0.0, wk = 0.0;
        for (std::int64_t i = 0; i < K; ++i) {
          const std::size_t j = static_cast<std::size_t>(i);
          const double ki = kt.p[i] * norm;
          a.A_prev.push_back(A[j]);
          A[j] = a.decay * A[j] + a.wa * (ki * ki);
          const double r = std::log(A[j] + atk_eps) - ctr, Bi = std::exp(-log_x * (r / (1.0 + std::abs(r))));
          a.A.push_back(A[j]), a.r.push_back(r), a.B.push_back(Bi), a.k.push_back(ki);
          w[j] = Bi * ki;
          ww += w[j] * w[j];
          wk += w[j] * ki;
          b.precond = std::max({b.precond, a.A_prev.back(), A[j] + atk_eps, 1.0 + std::abs(r), ki * ki});
          b.inputs = std::max(b.inputs, std::abs(w[j]));  // the write key, narrowed as an operand
        }
        const double cc = bt * wk, ab = bt * bt * ww * kk, tr = 2.0 - 2.0 * cc + ab;
        const double sigma2 = 0.5 * (tr + std::sqrt(std::max(0.0, tr * tr - 4.0 * (1.0 - cc) * (1.0 - cc))));
        rho = std::max(1.0, std::sqrt(sigma2) * (1.0 + 1e-12));
        kappa = std::max(kappa, std::sqrt(ww));  // one norm for the read and the write key
        if (backward) atk.push_back(std::move(a));
      }
      const double r = nu + kappa * B;
      b.R = std::max(b.R, std::max(1.0, bt) * std::max(1.0, kappa) * r);
      b.Delta = std::max(b.Delta, bt * r);
      const double B_prev = B;
      B = rho * B + bt * kappa * nu;
      if (backward)
        tokens.push_back({B_prev, B, r, bt * r, kappa, nu, bt, rho, std::sqrt(qq), row(*d_o, p.b, t, p.h).l2(), lq,
                          lk, kk + eps});
      b.S = std::max(b.S, B);
      b.q2 = std::max(b.q2, std::sqrt(qq));
      b.kappa = std::max(b.kappa, kappa);
      b.bk = std::max(b.bk, bt * kappa);
      b.bv = std::max(b.bv, bt * nu);
      if (C > 0) {
        if ((t - p.bos) % C == 0) chunk_rho = 1.0;
        chunk_rho *= rho;
        b.pi = std::max(b.pi, chunk_rho);
      }
    }
    if (!backward) continue;
    // The adjoint, t = T..1: D'_t = D_t + scale‖q_t‖‖do_t‖ bounds ‖dS‖_F after the
    // read, (1 + β‖k‖²)D'_t its entries through the read-back, D_{t−1} = ρ_t D'_t.
    double D = dht ? block(*dht, p.n, p.h).l2() : 0.0;
    b.adjoint = std::max(b.adjoint, D);
    std::vector<double> dA(static_cast<std::size_t>(K), 0.0);  // |∂L/∂A_t| per channel
    if (step.preconditioned && dA_T)
      for (std::int64_t i = 0; i < K; ++i)
        dA[static_cast<std::size_t>(i)] = std::abs(dA_T->data[static_cast<std::size_t>((p.n * dA_T->dim(1) + p.h) * K + i)]);
    for (std::size_t i = tokens.size(); i-- > 0;) {
      const Token& k = tokens[i];
      // The chunk backward meets the chunk [first, i] at its last token with dS_end, ‖dS_end‖_F ≤ D.
      if (C > 0 && (i + 1 == tokens.size() || (i + 1) % static_cast<std::size_t>(C) == 0))
        chunk_backward_bounds(tokens, i - i % static_cast<std::size_t>(C), i, D, b.s, g != nullptr, b);
      const double Dp = D + b.s * k.q * k.do_norm;
      const double ddelta = k.kappa * Dp;                 // ‖dδ‖ = ‖dSᵀk‖
      const double dbeta = ddelta * k.r;                  // ⟨dδ, v − S̄ᵀk⟩
      const double dk = k.B_prev * k.beta * ddelta + Dp * k.delta;  // S̄ du + dS δ (read and write key)
      double key_step = 0.0, dbeta_raw = dbeta;
      if (step.key_energy_step) {
        // η's gradient dβ̃/(‖k‖² + eps) and the key term 2β̃ dβ̃ k/(‖k‖² + eps), formed as
        // (2β̃ · dβ̃)/(‖k‖² + eps), then times k_i (reference/kaczmarz_delta_rule/backward.hpp).
        dbeta_raw = dbeta / k.den;
        key_step = std::max(2.0 * k.beta, 2.0 * k.beta * dbeta * std::max(1.0, 1.0 / k.den) * std::max(1.0, k.kappa));
      }
      double dk_total = dk + key_step;
      if (step.preconditioned) {
        // The preconditioner's adjoint (reference/family/atk_backward.hpp) from the write
        // key's gradient dw = dS δ, ‖dw‖ ≤ D′Δ: dr = −log(x)B k dw_i/(1 + |r|)², dA += dr/(A + eps),
        // dg_atk += dA e^{g_atk}A_{t−1}, dβ_atk += dA k², dk = B dw + 2β_atk k dA, dA ← e^{g_atk}dA.
        const AtkToken& a = atk[i];
        const double dw = Dp * k.delta;
        double dg_atk = 0.0, db_atk = 0.0, dk_atk2 = 0.0;
        for (std::size_t j = 0; j < dA.size(); ++j) {
          const double ki = std::abs(a.k[j]), ar = 1.0 + std::abs(a.r[j]);
          const double dr = log_x * a.B[j] * ki * dw / (ar * ar);
          dc += dr;
          dA[j] += dr / (a.A[j] + atk_eps);
          dg_atk += dA[j] * a.decay * a.A_prev[j];
          db_atk += dA[j] * ki * ki;
          const double dk_atk = a.B[j] * dw + 2.0 * a.wa * ki * dA[j];
          dk_atk2 += dk_atk * dk_atk;
          b.precond_grads = std::max({b.precond_grads, log_x * a.B[j] * ki, log_x * a.B[j] * ki * dw, ar * ar, dr, dA[j], a.decay * a.A_prev[j],
                                      dg_atk, db_atk, a.B[j] * dw, 2.0 * a.wa * ki, dk_atk, dc});
          dA[j] *= a.decay;
        }
        // The read key's part of the core (S̄ du) plus the preconditioner's (the write key's).
        dk_total = k.B_prev * k.beta * ddelta + std::sqrt(dk_atk2);
      }
      b.adjoint = std::max({b.adjoint, (1.0 + k.beta * k.kappa * k.kappa) * Dp, b.s * k.q});
      b.grads = std::max({b.grads, std::max(1.0, b.s) * k.B * k.do_norm,  // dq = scale·S_t do_t
                          Dp * k.delta, ddelta, dbeta, dbeta_raw, k.beta * ddelta, dk_total, key_step,
                          k.rho * Dp * k.B_prev,  // dg = Σ dS̄ ⊙ S̄
                          // the L2 norm's backward: r(dy − y⟨y, dy⟩), ≤ 2r‖dy‖
                          2.0 * k.lq * b.s * k.B * k.do_norm, 2.0 * k.lk * dk_total});
      D = k.rho * Dp;
    }
    b.adjoint = std::max(b.adjoint, D);
  }
  return b;
}

using Measure = double (*)(const Bounds&);

}  // namespace

LayerDomain delta(const LayerSpec& s, DeltaStep step) {
  const bool gated = s.input("g") != nullptr;
  const std::vector<Form> all = {}, chunk = {Form::chunk};
  const std::vector<Direction> fwd = {Direction::forward}, both = {}, bwd = {Direction::backward};
  LayerDomain d;
  d.derivation = "docs/domains.md#delta-rule";
  // The backward's forward sweep recomputes the states and residuals: those
  // conditions hold in both directions; the output's only forward.
  std::vector<Direction> dirs = both;
  const auto add = [&](std::string name, std::string bound, std::string covers, std::vector<Form> forms, Held held,
                       Measure f) {
    d.conditions.push_back({std::move(name), std::move(bound), std::move(covers), std::move(forms), dirs, held,
                            [f, step](const DomainInputs& in, const DomainContext& c) { return f(bounds(in, c, step)); }});
  };
  add("inputs",
      step.key_energy_step  ? "max |q|, |k|, |v|, |h0|, β̃_t = β_t/(‖k_t‖² + eps)"
      : step.preconditioned ? "max |q|, |k|, |v|, |h0|, β, |w| (the write key w = B_t ⊙ k)"
                            : "max |q|, |k|, |v|, |h0|, β",
      "the inputs and the write step as the form receives them (narrowed to the storage format)", all, Held::stored,
      [](const Bounds& b) { return b.inputs; });
  if (step.key_energy_step || s.key("use_qk_l2norm_in_kernel"))
    add("key energy",
        step.key_energy_step ? "max_t ‖k_t‖² + eps (and ‖q_t‖², ‖k_t‖² + 1e-6 with use_qk_l2norm_in_kernel)"
                             : "max_t ‖q_t‖², ‖k_t‖² + 1e-6 with use_qk_l2norm_in_kernel (0 without)",
        "the sums of squares of the L2 norm (and of Kaczmarz's step)", all, Held::stored,
        [](const Bounds& b) { return b.energy; });
  if (step.preconditioned)
    add("preconditioner",
        "max over t, i of A_t,i + eps, 1 + |r_t,i|, k_t,i²;  A_t = e^{g_atk}A_{t−1} + β_atk k ⊙ k, r = log(A_t + eps) − c",
        "the preconditioner's state A_t (its decay, write and, in the chunk form, the masked prefix sums), "
        "log(A_t + eps) − c and 1 + |r| (PDN eq. (9); B_t = e^{−log(x) r/(1 + |r|)} ∈ [1/x, x])",
        all, Held::compute, [](const Bounds& b) { return b.precond; });
  add("state",
      step.preconditioned
          ? "Ŝ = max_t B_t,  B_t = ρ_t B_{t−1} + β_t‖w_t‖‖v_t‖,  B_0 = ‖h0‖_F,  ρ_t = ‖I − β_t w_t k_tᵀ‖₂ (exact; "
            "here and below ‖k_t‖ stands for max(‖k_t‖, ‖w_t‖))"
          : "Ŝ = max_t B_t,  B_t = ρ_t B_{t−1} + β_t‖k_t‖‖v_t‖,  B_0 = ‖h0‖_F,  ρ_t = max(1, β_t‖k_t‖² − 1)",
      "every state S_t and S̄_t (entries ≤ ‖S‖_F): the sequential state, the chunk's running state and its "
      "narrowed operand S_0",
      all, Held::stored, [](const Bounds& b) { return b.S; });
  add("residual", "max_t max(1, β_t) · max(1, ‖k_t‖) · (‖v_t‖ + ‖k_t‖ B_{t−1})",
      "S̄ᵀk and its partial sums, v − S̄ᵀk, δ_t = β_t(v_t − S̄ᵀk_t), the write k_t δ_tᵀ (sequential); Δ = U − W S_0 "
      "(chunk)",
      all, Held::stored, [](const Bounds& b) { return b.R; });
  dirs = fwd;
  const char* output_bound =
      "scale · max_t ‖q_t‖ · max(1, Ŝ + C · max‖k‖ · Δ̂),  Δ̂ = max_t β_t(‖v_t‖ + ‖k_t‖ B_{t−1})";
  const char* unscaled_bound = "max_t ‖q_t‖ · (Ŝ + C · max‖k‖ · Δ̂)";
  const Measure output = [](const Bounds& b) { return b.s * b.q2 * std::max(1.0, b.S + b.C * b.kappa * b.Delta); };
  const Measure unscaled = [](const Bounds& b) { return b.q2 * (b.S + b.C * b.kappa * b.Delta); };
  add("output", output_bound,
      "scale·q, o and its partial sums Sᵀ(scale·q) (sequential), the chunk's o after scale (C: the chunk's tokens; "
      "0 for sequential)",
      all, Held::stored, output);
  add("unscaled output", unscaled_bound,
      "the chunk's output sums (Q ⊙ e^{b})S_0 + [QKᵀ ⊙ Γ]Δ before scale (held in the compute format)", chunk,
      Held::compute, unscaled);
  // The chunk backward recomputes the forward's chunks (their outputs too, all but
  // the last chunk's): the chunk form's forward conditions hold in both directions.
  dirs = both;
  add("scores", "max(max_t ‖q_t‖, max_t β_t‖k_t‖) · max_t ‖k_t‖",
      "the chunk's A = tril(Diag(β)[KKᵀ ⊙ Γ]) and the narrowed score matrix QKᵀ ⊙ Γ", chunk, Held::stored,
      [](const Bounds& b) { return std::max(b.q2, b.bk) * b.kappa; });
  add("WY",
      "max(1 + C·βκ·κ·τ, Θ·βκ, Θ·βν, βκ·π·Ŝ, Ŝ + C·κ·Δ̂) with κ = max‖k_t‖, βκ = max β_t‖k_t‖, βν = max β_t‖v_t‖, "
      "π = max over chunks of Π ρ_t, τ = max(1, βκ·κ·π), Θ = 1 + C·βκ·κ·π",
      "the chunk's triangular solve (I + A)⁻¹ and its partial sums, W = (I + A)⁻¹(β ⊙ K ⊙ e^{b}), U = (I + A)⁻¹(β ⊙ V), "
      "W S_0 and the state passing Diag(e^{b_last})S_0 + (K ⊙ e^{b_last − b})ᵀΔ with its partial sums",
      chunk, Held::stored, [](const Bounds& b) {
        const double kk = b.bk * b.kappa * b.pi, tau = std::max(1.0, kk), theta = 1.0 + b.C * kk;
        return std::max({1.0 + b.C * b.bk * b.kappa * tau, theta * b.bk, theta * b.bv, b.bk * b.pi * b.S,
                         b.S + b.C * b.kappa * b.Delta});
      });
  if (gated)
    add("gate sum", "C · max|g| (C: the chunk's tokens)",
        "the chunk form's cumulative log decay b_t = Σ g over the chunk, held in fp32 (beyond it b = −inf and "
        "b_t − b_s = NaN)",
        chunk, Held::compute, [](const Bounds& b) { return b.C * b.g; });
  dirs = bwd;
  add("recomputed output", output_bound, "the chunk backward's recomputed chunk outputs o (as the forward's output)",
      chunk, Held::stored, output);
  add("recomputed unscaled output", unscaled_bound,
      "the chunk backward's recomputed output sums before scale (as the forward's unscaled output)", chunk,
      Held::compute, unscaled);
  add("state adjoint",
      "max_t max((1 + β_t‖k_t‖²) D′_t, scale‖q_t‖),  D′_t = D_t + scale‖q_t‖‖do_t‖,  D_{t−1} = ρ_t D′_t,  "
      "D_T = ‖dht‖_F",
      "the sequential adjoint dS after the read (dS += scale·q doᵀ) and through the read-back (dS + k duᵀ), dh0",
      {Form::sequential}, Held::stored, [](const Bounds& b) { return b.adjoint; });
  add("gradients",
      std::string("max_t of max(1, scale)B_t‖do_t‖ (dq), D′_tΔ_t (dw), ‖k_t‖D′_t (dδ), ‖k_t‖D′_t(‖v_t‖ + "
                  "‖k_t‖B_{t−1}) (dβ), B_{t−1}β_t‖k_t‖D′_t + D′_tΔ_t (dk), ρ_t D′_t B_{t−1} (dg); ") +
          (step.key_energy_step ? "Kaczmarz: dβ/(‖k‖² + eps), 2β̃ max(1, dβ max(1, 1/(‖k‖² + eps)) max(1, ‖k‖)); "
           : step.preconditioned ? "the read and preconditioner parts of dk: B_{t−1}β_t‖k_t‖D′_t + ‖B dw + 2β_atk k dA‖; "
                                 : "") +
          "use_qk_l2norm: 2/√(‖x‖² + 1e-6) times dq, dk",
      "every gradient of the sequential adjoint and its partial sums, and the layer's chain rules (read + write "
      "key, Kaczmarz's step, the L2 norm), which run on the gradients the core returns in both forms",
      {Form::sequential, Form::chunk}, Held::stored, [](const Bounds& b) { return b.grads; });
  if (step.preconditioned)
    add("preconditioner adjoint",
        "max over t, i of the terms of dr = −log(x)B k dw/(1 + |r|)², dA += dr/(A_t + eps) (carried, ×e^{g_atk}), "
        "dg_atk = Σ dA e^{g_atk}A_{t−1} (chunk form: the reverse running sum of Σ ρA − β_atk k² dA, ρ = dr/(A_t + eps), "
        "with the same partial sums), dβ_atk = Σ dA k², dk = B dw + 2β_atk k dA, dc = Σ dr; ‖dw_t‖ ≤ D′_tΔ_t",
        "the preconditioner's backward (reference/family/atk_backward.hpp), run on the write key's gradient in both "
        "forms", {Form::sequential, Form::chunk}, Held::compute, [](const Bounds& b) { return b.precond_grads; });
  // Chunk backward, per chunk from D_end (the adjoint bound at the chunk's end) and
  // S_0 = the state bound at its start: E = D_end + max(1, scale) Σ ‖q_t‖‖do_t‖,
  // Θ = 1 + C·βκ·κ·π (docs/domains.md, "Delta rule, chunk backward").
  add("chunk adjoint", "max over chunks of κE · max(1, B_0), E  (κ = max‖k_t‖, B_0 = ‖S_0‖ bound)",
      "dΔ = scale·MᵀdO + (W ⊙ e^{b_last − b})dS_end and its partial sums, dWy = −dΔ S_0ᵀ (both stored), the "
      "narrowed dS_end operand",
      chunk, Held::stored, [](const Bounds& b) { return b.chunk_adjoint; });
  add("UT adjoint",
      "max over chunks of E(1 + π Σβ_t‖k_t‖²), Θ²κEΔ̂_c, ΘκE max(1, B_0), max(1, β_t y_t)Δ̂_c;  y_t = ‖k_t‖D′_t "
      "(D′ from D_end), Δ̂_c = the chunk's max Δ_t",
      "the backward state pass dS_0 = Diag(e^{b_last})dS_end + scale(Q ⊙ e^{b})ᵀdO − Wyᵀ dΔ, dT, TᵀdT, "
      "dA = −TᵀdT Tᵀ and Diag(β)dA, dX = TᵀdWy, dY = TᵀdΔ, and their partial sums; dh0",
      chunk, Held::compute, [](const Bounds& b) { return b.ut_adjoint; });
  add("chunk gradients",
      "max over chunks and t of max(1, s)‖do_t‖(B_0 + ΣΔ_s‖k_s‖) (dq), Δ_t(max(1, s)Σ‖q‖‖do‖ + D_end + "
      "Σβ_s y_s‖k_s‖) (dw), β_t y_t(B_0 + ΣΔ_s‖k_s‖) (dk), β_t y_t (dv), y_t(B_0‖k_t‖ + ‖v_t‖ + ‖k_t‖ΣΔ_s‖k_s‖) "
      "(dβ), and their products",
      "the chunk backward's dq, dk, dw, dv, dβ (written in the storage format), their partial sums and products",
      chunk, Held::stored, [](const Bounds& b) { return b.chunk_grads; });
  if (gated)
    add("chunk dg",
        "max over chunks of D_end B_0 + max(1, s)Σ‖q‖‖do‖(2ΣΔ_s‖k_s‖ + B_0) + 2D_endΣΔ_s‖k_s‖ + "
        "Σβ_t y_t‖k_t‖(B_0 + 2ΣΔ_s‖k_s‖), and db's products",
        "the chunk backward's gate gradients db, their products and dg = the chunk-local reverse cumulative sum",
        chunk, Held::compute, [](const Bounds& b) { return b.chunk_dg; });
  return d;
}

}  // namespace ttr::domains
