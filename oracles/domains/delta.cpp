// The guaranteed domain of the delta family (delta_rule, gated_delta_rule, kda,
// kaczmarz_delta_rule): sequential and chunk forward, sequential backward;
// docs/domains.md, "Delta rule".
// The state is bounded in norm, not by majorants: the write I − β_t k_t k_tᵀ has
// spectral norm ρ_t = max(1, β_t‖k_t‖² − 1) (eigenvalues 1 and 1 − β‖k‖²; β ≥ 0),
// the decay Diag(e^{g}) norm ≤ 1, so
//
//   ‖S_t‖_F ≤ ρ_t ‖S_{t−1}‖_F + β_t ‖k_t‖ ‖v_t‖,   B_0 = ‖h0‖_F              (state)
//   ‖δ_t‖   ≤ β_t (‖v_t‖ + ‖k_t‖ B_{t−1})                                  (residual)
//
// and the chunk form's WY/UT quantities follow from the same propagators
// (entries of (I + A)⁻¹ are −β_t k_tᵀ Γ Φ k_s, rows of W are β_t Φᵀ Γ k_t).
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
};

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
  // Per token, for the backward's reverse pass.
  struct Token {
    double B_prev, B, r, delta, kappa, beta, rho, q, do_norm, lq, lk, den;
  };
  std::vector<Token> tokens;
  for (const Problem& p : problems(x)) {
    tokens.clear();
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
      const double kappa = std::sqrt(kk), nu = vt.l2();
      double bt = row(beta, p.b, t, p.h).p[0];
      if (step.key_energy_step) {
        b.energy = std::max(b.energy, kk + eps);
        bt /= kk + eps;
      }
      b.inputs = std::max(b.inputs, bt);
      const double rho = std::max(1.0, bt * kk - 1.0);
      const double r = nu + kappa * B;
      b.R = std::max(b.R, std::max(1.0, bt) * std::max(1.0, kappa) * r);
      b.Delta = std::max(b.Delta, bt * r);
      const double B_prev = B;
      B = rho * B + bt * kappa * nu;
      if (backward)
        tokens.push_back({B_prev, B, r, bt * r, kappa, bt, rho, std::sqrt(qq), row(*d_o, p.b, t, p.h).l2(), lq, lk,
                          kk + eps});
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
    for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) {
      const Token& k = *it;
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
      const double dk_total = dk + key_step;
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
      step.key_energy_step ? "max |q|, |k|, |v|, |h0|, β̃_t = β_t/(‖k_t‖² + eps)" : "max |q|, |k|, |v|, |h0|, β",
      "the inputs and the write step as the form receives them (narrowed to the storage format)", all, Held::stored,
      [](const Bounds& b) { return b.inputs; });
  if (step.key_energy_step || s.key("use_qk_l2norm_in_kernel"))
    add("key energy",
        step.key_energy_step ? "max_t ‖k_t‖² + eps (and ‖q_t‖², ‖k_t‖² + 1e-6 with use_qk_l2norm_in_kernel)"
                             : "max_t ‖q_t‖², ‖k_t‖² + 1e-6 with use_qk_l2norm_in_kernel (0 without)",
        "the sums of squares of the L2 norm (and of Kaczmarz's step)", all, Held::stored,
        [](const Bounds& b) { return b.energy; });
  add("state", "Ŝ = max_t B_t,  B_t = ρ_t B_{t−1} + β_t‖k_t‖‖v_t‖,  B_0 = ‖h0‖_F,  ρ_t = max(1, β_t‖k_t‖² − 1)",
      "every state S_t and S̄_t (entries ≤ ‖S‖_F): the sequential state, the chunk's running state and its "
      "narrowed operand S_0",
      all, Held::stored, [](const Bounds& b) { return b.S; });
  add("residual", "max_t max(1, β_t) · max(1, ‖k_t‖) · (‖v_t‖ + ‖k_t‖ B_{t−1})",
      "S̄ᵀk and its partial sums, v − S̄ᵀk, δ_t = β_t(v_t − S̄ᵀk_t), the write k_t δ_tᵀ (sequential); Δ = U − W S_0 "
      "(chunk)",
      all, Held::stored, [](const Bounds& b) { return b.R; });
  dirs = fwd;
  add("output", "scale · max_t ‖q_t‖ · max(1, Ŝ + C · max‖k‖ · Δ̂),  Δ̂ = max_t β_t(‖v_t‖ + ‖k_t‖ B_{t−1})",
      "scale·q, o and its partial sums Sᵀ(scale·q) (sequential), the chunk's o after scale (C: the chunk's tokens; "
      "0 for sequential)",
      all, Held::stored, [](const Bounds& b) { return b.s * b.q2 * std::max(1.0, b.S + b.C * b.kappa * b.Delta); });
  add("unscaled output", "max_t ‖q_t‖ · (Ŝ + C · max‖k‖ · Δ̂)",
      "the chunk's output sums (Q ⊙ e^{b})S_0 + [QKᵀ ⊙ Γ]Δ before scale (held in the compute format)", chunk,
      Held::compute, [](const Bounds& b) { return b.q2 * (b.S + b.C * b.kappa * b.Delta); });
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
  add("state adjoint",
      "max_t max((1 + β_t‖k_t‖²) D′_t, scale‖q_t‖),  D′_t = D_t + scale‖q_t‖‖do_t‖,  D_{t−1} = ρ_t D′_t,  "
      "D_T = ‖dht‖_F",
      "the sequential adjoint dS after the read (dS += scale·q doᵀ) and through the read-back (dS + k duᵀ), dh0",
      {Form::sequential}, Held::stored, [](const Bounds& b) { return b.adjoint; });
  add("gradients",
      "max_t of max(1, scale)B_t‖do_t‖ (dq), D′_tΔ_t (dw), ‖k_t‖D′_t (dδ), ‖k_t‖D′_t(‖v_t‖ + ‖k_t‖B_{t−1}) (dβ), "
      "B_{t−1}β_t‖k_t‖D′_t + D′_tΔ_t (dk), ρ_t D′_t B_{t−1} (dg); Kaczmarz: dβ/(‖k‖² + eps), "
      "2β̃ max(1, dβ max(1, 1/(‖k‖² + eps)) max(1, ‖k‖)); use_qk_l2norm: 2/√(‖x‖² + 1e-6) times dq, dk",
      "every gradient of the sequential adjoint and its partial sums, and the layer's chain rules (read + write "
      "key, Kaczmarz's step, the L2 norm)",
      {Form::sequential}, Held::stored, [](const Bounds& b) { return b.grads; });
  d.gaps.push_back({{Form::chunk}, {Direction::backward},
                    "chunk backward not derived yet (its dT and dA = −Tᵀ dT Tᵀ are not bounded in docs/domains.md)"});
  return d;
}

}  // namespace ttr::domains
