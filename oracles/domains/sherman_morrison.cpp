// The guaranteed domain of the Sherman–Morrison family (pdn_exact, PDN eq. (5);
// kalman_filter, GKA eq. (KF)): sequential form, forward and backward;
// docs/domains.md, "Ridge regression".
//
// Φ_t = (λI + Σ_{s≤t} η_s k_s k_sᵀ)⁻¹ (PDN Thm 3.1, GKA eq. (3)) is symmetric
// positive definite with ‖Φ_t‖₂ ≤ 1/λ at every t, and Φ_t⁻¹S_t = λh0 + Σ η k vᵀ,
// so without any norm recursion
//
//   ‖S_t‖_F ≤ ‖h0‖_F + (1/λ) Σ_{s≤t} η_s ‖k_s‖ ‖v_s‖                       (state)
//   ‖k̃_t‖ = ‖Φk‖/(1/η + kᵀΦk) ≤ min(√(η/λ), η‖k‖/λ)                       (gain)
//
// (kᵀΦk ≥ λ‖Φk‖² since Φ ≼ I/λ). The adjoint dS obeys Φ_{t−1}dS_{t−1} = Φ_t dS′_t,
// so ‖dS_{t−1}‖_F ≤ (1 + Σ_{s<t} η_s‖k_s‖²/λ)(‖dht‖_F + Σ_{t′≥t} scale‖q‖‖do‖).
#include <algorithm>
#include <cmath>
#include <vector>

#include "oracles/domains/sequences.hpp"

namespace ttr::domains {

namespace {

struct Bounds {
  double inputs = 0.0;  // max |q|, |k|, |v|, |h0|, η (and do, dht backward), as received
  double energy = 0.0;  // ‖x‖² + 1e-6 of the L2 norm
  double gain = 0.0;    // Φ's entries and updates, p = Φk, c = 1/η + kᵀp, k̃ = p/c
  double S = 0.0;       // max_t B_t
  double R = 0.0;       // the read-back and residual r = v − Sᵀk, the write k̃ rᵀ
  double out = 0.0;     // scale·q, o's partial sums
  double adjoint = 0.0; // ‖dS‖_F through every step, dh0
  double dphi = 0.0;    // dΦ, dp, dk̃, dc and their partial sums
  double grads = 0.0;   // dq, dk, dv, dη and their partial sums; the L2 norm's backward
};

struct Token {
  double B_prev, B, R, kappa, q, do_norm, eta, gain, lq, lk, gram_prev;
};

Bounds bounds(const DomainInputs& in, const DomainContext& c) {
  const TensorMap<double>& x = in.tensors;
  const Tensor<double>&q = x.at("q"), &k = x.at("k"), &v = x.at("v");
  const Tensor<double>*eta = optional(x, "eta"), *h0 = optional(x, "h0"), *d_o = optional(x, "do"),
                     *dht = optional(x, "dht");
  const bool l2 = l2norm_on(in);
  constexpr double kL2Eps = 1e-6;  // FLA's, inside the sqrt (reference/family/l2norm.hpp)
  // λ and scale as the form holds them (in the dtype: a tiny λ may round to a smaller one).
  const double lambda = received_number(in.cfg.number("lambda"), c), s = received_number(scale_of(in), c);
  const double s1 = std::max(1.0, s);
  const bool backward = c.direction == Direction::backward && d_o;
  Bounds b;
  b.inputs = std::max({max_abs(q), max_abs(k), max_abs(v), h0 ? max_abs(*h0) : 0.0, eta ? max_abs(*eta) : 0.0});
  if (backward) b.inputs = std::max({b.inputs, max_abs(*d_o), dht ? max_abs(*dht) : 0.0});
  // Φ_0 = I/λ, and Φ's entries (≤ ‖Φ‖₂ ≤ 1/λ) plus the update p_i k̃_j = p_i p_j/c ≤ ‖p‖²/(λ‖p‖²).
  b.gain = 2.0 / lambda;
  std::vector<Token> tokens;
  for (const Problem& p : problems(x)) {
    tokens.clear();
    double B = h0 ? block(*h0, p.n, p.h).l2() : 0.0;
    double gram = 1.0;  // 1 + Σ_{s≤t} η_s‖k_s‖²/λ ≥ λ‖Φ_t⁻¹‖₂
    b.S = std::max(b.S, B);
    for (std::int64_t t = p.bos; t < p.eos; ++t) {
      double kk = row(k, p.b, t, p.h).l2sq(), qq = row(q, p.b, t, p.h).l2sq();
      const double lq = l2 ? 1.0 / std::sqrt(qq + kL2Eps) : 1.0, lk = l2 ? 1.0 / std::sqrt(kk + kL2Eps) : 1.0;
      if (l2) {
        b.energy = std::max({b.energy, kk + kL2Eps, qq + kL2Eps});
        kk /= kk + kL2Eps;
        qq /= qq + kL2Eps;
      }
      const double kappa = std::sqrt(kk), qn = std::sqrt(qq), nu = row(v, p.b, t, p.h).l2();
      const double e = eta ? row(*eta, p.b, t, p.h).p[0] : 1.0;
      const double gain = std::min(std::sqrt(e / lambda), e * kappa / lambda);
      // p = Φk and its partial sums ≤ ‖k‖/λ; 1/η; kᵀp's partial sums ≤ ‖k‖²/λ; k̃.
      b.gain = std::max({b.gain, kappa / lambda, 1.0 / e + kk / lambda, gain});
      const double R = nu + kappa * B;  // |Σ k_i S_ij| ≤ ‖k‖B, |r_j| ≤ ‖v‖ + ‖k‖B
      b.R = std::max({b.R, R, gain * R});
      const double B_prev = B, gram_prev = gram;
      B += e * kappa * nu / lambda;
      gram += e * kk / lambda;
      b.S = std::max(b.S, B);
      b.out = std::max(b.out, s * qn * std::max(1.0, B));
      if (backward)
        tokens.push_back({B_prev, B, R, kappa, qn, row(*d_o, p.b, t, p.h).l2(), e, gain, lq, lk, gram_prev});
    }
    if (!backward) continue;
    // The adjoint, t = T..1 (reference/family/sherman_morrison_backward.hpp).
    // D: ‖dS‖_F before the read at t; E: ‖dht‖_F + Σ_{t′≥t} scale‖q‖‖do‖; F: ‖dΦ‖_F.
    double D = dht ? block(*dht, p.n, p.h).l2() : 0.0, E = D, F = 0.0;
    b.adjoint = std::max(b.adjoint, D);
    for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) {
      const Token& tk = *it;
      const double read = s * tk.q * tk.do_norm;
      const double Dp = D + read;  // dS += scale·q doᵀ
      E += read;
      const double dr = tk.gain * Dp;                                // dr = dSᵀk̃ = dv
      const double X = Dp * tk.R + F * tk.kappa / lambda;            // dk̃ = dS r − dΦᵀp
      const double Y = tk.eta * X * tk.gain;                         // dc = −⟨dk̃, k̃⟩/c, 1/c ≤ η
      const double Z = F * tk.gain + tk.eta * X + Y * tk.kappa;      // dp = −dΦk̃ + dk̃/c + dc k
      const double dk = tk.B_prev * dr + Y * tk.kappa / lambda + Z / lambda;  // −S dr + dc p + Φᵀdp
      const double D_prev = std::min(tk.gram_prev * E, (1.0 + tk.kappa * tk.gain) * Dp);
      b.adjoint = std::max({b.adjoint, Dp, D_prev, tk.kappa * dr, s * tk.q});
      b.dphi = std::max({b.dphi, F, X, Dp * tk.R, tk.eta * X, Y, X * tk.gain, Z, F * tk.kappa / lambda, Z * tk.kappa,
                         F + Z * tk.kappa});
      b.grads = std::max({b.grads, s1 * tk.B * tk.do_norm, dr, dk, X * tk.gain / tk.eta, tk.eta * tk.eta,
                          2.0 * tk.lq * s * tk.B * tk.do_norm, 2.0 * tk.lk * dk});
      F += Z * tk.kappa;  // dΦ_{t−1} = dΦ + dp kᵀ
      D = D_prev;
    }
  }
  return b;
}

using Measure = double (*)(const Bounds&);

}  // namespace

LayerDomain sherman_morrison(const LayerSpec& s) {
  const bool weighted = s.input("eta") != nullptr;
  const std::vector<Form> seq = {Form::sequential};
  const std::vector<Direction> both = {}, fwd = {Direction::forward}, bwd = {Direction::backward};
  LayerDomain d;
  d.derivation = "docs/domains.md#ridge-regression";
  const auto add = [&](std::string name, std::string bound, std::string covers, std::vector<Direction> dirs,
                       Measure f) {
    d.conditions.push_back({std::move(name), std::move(bound), std::move(covers), seq, std::move(dirs), Held::stored,
                            [f](const DomainInputs& in, const DomainContext& c) { return f(bounds(in, c)); }});
  };
  // η_t in the weighted layer; 1 in pdn_exact, written out of the formulas.
  const auto w = [weighted](const char* with, const char* without) { return std::string(weighted ? with : without); };
  add("inputs", weighted ? "max |q|, |k|, |v|, |h0|, η" : "max |q|, |k|, |v|, |h0|",
      "the inputs as the form receives them (in the dtype)", both, [](const Bounds& b) { return b.inputs; });
  if (s.key("use_qk_l2norm_in_kernel"))
    add("key energy", "max_t ‖q_t‖², ‖k_t‖² + 1e-6 with use_qk_l2norm_in_kernel (0 without)",
        "the sums of squares of the L2 norm", both, [](const Bounds& b) { return b.energy; });
  add("gain",
      w("max_t of 2/λ, ‖k_t‖/λ, 1/η_t + ‖k_t‖²/λ, min(√(η_t/λ), η_t‖k_t‖/λ)",
        "max_t of 2/λ, ‖k_t‖/λ, 1 + ‖k_t‖²/λ, min(√(1/λ), ‖k_t‖/λ)"),
      "Φ_0 = I/λ, Φ's entries and their update Φ − p k̃ᵀ, p = Φk, c = 1/η + kᵀp and their partial sums, the gain "
      "k̃ = p/c",
      both, [](const Bounds& b) { return b.gain; });
  add("state", w("max_t B_t,  B_t = ‖h0‖_F + (1/λ) Σ_{s≤t} η_s‖k_s‖‖v_s‖", "max_t B_t,  B_t = ‖h0‖_F + (1/λ) Σ_{s≤t} ‖k_s‖‖v_s‖"),
      "every state S_t (entries ≤ ‖S_t‖_F ≤ ‖Φ_t‖₂‖λh0 + Σ η k vᵀ‖_F)", both, [](const Bounds& b) { return b.S; });
  add("residual", "max_t max(1, ‖k̃_t‖) · (‖v_t‖ + ‖k_t‖ B_{t−1})",
      "Sᵀk and its partial sums, r = v − Sᵀk, the write k̃ rᵀ", both, [](const Bounds& b) { return b.R; });
  add("output", "scale · max_t ‖q_t‖ · max(1, B_t)", "scale·q, o and its partial sums S_tᵀ(scale·q)", fwd,
      [](const Bounds& b) { return b.out; });
  add("state adjoint",
      "max_t of D′_t = D_t + scale‖q_t‖‖do_t‖ and D_{t−1} = min(Γ_{t−1}E_t, (1 + ‖k_t‖‖k̃_t‖)D′_t), Γ_{t−1} = 1 + " +
          w("Σ_{s<t} η_s‖k_s‖²/λ", "Σ_{s<t} ‖k_s‖²/λ") + ", E_t = ‖dht‖_F + Σ_{t′≥t} scale‖q‖‖do‖",
      "the adjoint dS after the read and after the read-back (dS − k drᵀ), dh0", bwd,
      [](const Bounds& b) { return b.adjoint; });
  add("gain adjoint",
      "max_t of F_t, X_t = D′_t(‖v_t‖ + ‖k_t‖B_{t−1}) + F_t‖k_t‖/λ, " +
          w("η_tX_t‖k̃_t‖, Z_t = F_t‖k̃_t‖ + η_tX_t + η_tX_t‖k̃_t‖‖k_t‖", "X_t‖k̃_t‖, Z_t = F_t‖k̃_t‖ + X_t + X_t‖k̃_t‖‖k_t‖") +
          " and F_{t−1} = F_t + Z_t‖k_t‖ (F_T = 0)",
      "the adjoints dΦ, dp, dk̃, dc and their partial sums", bwd, [](const Bounds& b) { return b.dphi; });
  add("gradients",
      "max_t of max(1, scale)B_t‖do_t‖ (dq), ‖k̃_t‖D′_t (dv), B_{t−1}‖k̃_t‖D′_t + " +
          w("(η_tX_t‖k̃_t‖‖k_t‖ + Z_t)/λ (dk)", "(X_t‖k̃_t‖‖k_t‖ + Z_t)/λ (dk)") +
          std::string(weighted ? ", X_t‖k̃_t‖/η_t and η_t² (dη)" : "") +
          "; use_qk_l2norm: 2/√(‖x‖² + 1e-6) times dq, dk",
      "every gradient and its partial sums, and the L2 norm's backward", bwd,
      [](const Bounds& b) { return b.grads; });
  return d;
}

}  // namespace ttr::domains
