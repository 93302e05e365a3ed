// The guaranteed domain of Gated KalmaNet (gka; GKA eqs. (3)-(5), (CH), Alg. 1,
// Alg. 2): sequential and chunk forms, forward and backward, for the solvers as
// the forms run them (chebyshev; exact; cg forward only); docs/domains/gka.md. This file: the forward bounds and the conditions; the
// backward's bounds are in gka_backward.cpp.
//
// The solve (H_t + λ_tI)x = scale·q_t has intermediates of size ‖scale·q‖/λ_t, so
// the domain needs a lower bound on λ_t = a‖H_t‖_F from the inputs. H_t = Γ_tH_0 +
// Σ_s Γ_{s,t}β_sk_sk_sᵀ is a sum of PSD terms when H_0 is PSD, and tr(AB) ≥ 0 for
// PSD A, B, so ‖H_t‖²_F ≥ the sum of the terms' squared norms:
//
//   ‖H_t‖_F ≥ h_t = √(γ_t²h⁺²_{t−1} + β_t²‖k_t‖⁴) − n_t,   n_t = γ_t n_{t−1}
//
// with h⁺_0 = ‖P_0‖_F, n_0 = ‖N_0‖_F for H_0 = P_0 − N_0 (its spectral split: hkk0
// need not be PSD), and λ_min(H_t) ≥ −n_t. The spectrum of A = H_t + λ_tI lies in
// [m_t, L], m_t = λ_t − n_t, L = ‖H_t‖_F + λ_t. Chebyshev's iterates are
// ξ_i = (I − p_i(A))x* with p_i = π_i(y/ρ)/π_i(1/ρ), π_i = T_{i+1} + (2/ω_0 − 1)zU_i
// (y = 1 − 2λ/(L + μ) per eigenvalue), so |p_i| ≤ ρ where H_t is PSD and ≤ 1
// otherwise (while m_t > 0), and ‖ξ_i‖ ≤ (1 + p̂)‖scale·q‖/m_t for every ω_0 ∈ [0, 2].
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "oracles/domains/gka_bounds.hpp"
#include "reference/solvers/spectrum.hpp"

namespace ttr::domains {

namespace gka_detail {

Cheb chebyshev_factors(double rho, double z, int r, double omega0) {
  Cheb c;
  c.omega.assign(static_cast<std::size_t>(r) + 1, omega0);
  for (int i = 1; i <= r; ++i) c.omega[i] = 4.0 / (4.0 - rho * rho * c.omega[i - 1]);  // GKA Alg. 1's schedule
  // U_m(z), m = 0..r: |U_m| ≤ U_m(z) on [−1, z] for z ≥ 1.
  std::vector<double> U(static_cast<std::size_t>(r) + 1, 1.0);
  if (r >= 1) U[1] = 2.0 * z;
  for (int m = 2; m <= r; ++m) U[m] = 2.0 * z * U[m - 1] - U[m - 2];
  c.F.assign(static_cast<std::size_t>(r) + 1, 0.0);
  double ratio = 1.0;  // Π_{n=j+1..r} ρω_n/2 = τ_{j+1}/τ_{r+1}
  for (int j = r; j >= 0; --j) {
    c.F[j] = mul(ratio, U[r - j]);
    ratio *= rho * c.omega[j] / 2.0;
  }
  for (int j = 0; j <= r; ++j) {
    up(c.Fmax, c.F[j]);
    c.sum_wF += (j == 0 ? 2.0 : 2.0 * c.omega[j]) * c.F[j];
  }
  // ε_i = π_i(z)/τ_{i+1}, with T_{i+1}(z) and zU_i(z) by their recurrences (z ≥ 1: no cancellation).
  c.eps.assign(static_cast<std::size_t>(r) + 1, 0.0);
  if (rho == 0.0) return c;  // y = 0 on the spectrum (H = 0): every p_i = 0
  const bool from_zero = omega0 == 0.0;
  const double cz = from_zero ? 0.0 : 2.0 / omega0 - 1.0;
  double T0 = 1.0, T1 = z, tau = from_zero ? 1.0 / rho : 2.0 / (rho * omega0);  // T_0, T_1, τ_1
  for (int i = 0; i <= r; ++i) {
    if (i > 0) tau *= 2.0 / (rho * c.omega[i]);  // τ_{i+1}
    const double num = from_zero ? z * U[i] : T1 + cz * z * U[i];
    const double e = num / tau;
    c.eps[i] = std::isfinite(e) ? e : kInf;
    const double T2 = 2.0 * z * T1 - T0;  // T_{i+2}
    T0 = T1, T1 = T2;
  }
  return c;
}

Cheb chebyshev_factors(const Params& P, double rho, double z) {
  Cheb c = chebyshev_factors(rho, z, P.iters, P.omega0);
  if (P.omega0_lo == P.omega0) return c;
  // ω_0 as given and as the form rounds it: the larger of each factor.
  const Cheb d = chebyshev_factors(rho, z, P.iters, P.omega0_lo);
  for (std::size_t i = 0; i < c.omega.size(); ++i)
    up(c.omega[i], d.omega[i]), up(c.F[i], d.F[i]), up(c.eps[i], d.eps[i]);
  up(c.Fmax, d.Fmax);
  up(c.sum_wF, d.sum_wF);
  return c;
}

}  // namespace gka_detail

namespace {

using namespace gka_detail;

constexpr double kL2Eps = 1e-6;  // FLA's, inside the sqrt (reference/family/l2norm.hpp)

Params params_of(const DomainInputs& in, const DomainContext& c) {
  Params P;
  const Config& cfg = in.cfg;
  const std::string& s = cfg.text("solver");
  P.solver = s == "exact" ? Solver::exact : s == "chebyshev" ? Solver::chebyshev : Solver::cg;
  P.adaptive = !cfg.has("lambda");
  const double a = cfg.number("a"), ar = received_number(a, c);
  P.a_lo = std::min(a, ar), P.a_hi = std::max(a, ar);
  if (!P.adaptive) {
    const double l = cfg.number("lambda"), lr = received_number(l, c);
    P.lam_lo = std::min(l, lr), P.lam_hi = std::max(l, lr);
  }
  P.s = std::max(scale_of(in), received_number(scale_of(in), c));
  P.iters = static_cast<int>(cfg.number("iters"));
  const double w0 = cfg.number("omega0"), w0r = received_number(w0, c);
  P.omega0 = std::max(w0, w0r), P.omega0_lo = std::min(w0, w0r);
  P.l2 = l2norm_on(in);
  P.alg2 = c.form == Form::sequential && cfg.text("chebyshev_backward") == "alg2";
  P.form = c.form;
  P.direction = c.direction;
  P.chunk = c.chunk_size;
  P.u_iterate = c.dtype == Tier::bf16 ? 0x1p-8 : c.dtype == Tier::fp16 ? 0x1p-11 : 0x1p-24;
  return P;
}

// H_0 = P_0 − N_0 by its eigenvalues (float64; the split's norms moved by 2^-40‖H_0‖_F,
// far above the eigensolver's error, towards the safe side).
struct Split {
  double norm = 0, pos = 0, neg = 0;
  bool zero = true;
};
Split split_of(const Tensor<double>* hkk0, const Problem& p, std::int64_t K) {
  Split s;
  if (!hkk0) return s;
  const Row blk = block(*hkk0, p.n, p.h);
  for (std::int64_t i = 0; i < blk.n; ++i) s.zero = s.zero && blk.p[i] == 0.0;
  if (s.zero) return s;
  s.norm = blk.l2();
  double pos = 0, neg = 0;
  for (const double e : symmetric_eigenvalues(blk.p, static_cast<int>(K))) (e > 0 ? pos : neg) += e * e;
  const double margin = std::ldexp(s.norm, -40);
  s.pos = std::max(0.0, std::sqrt(pos) - margin);
  s.neg = std::sqrt(neg) + margin;
  return s;
}

// The forward bounds of one token (docs/domains/gka.md, "The regulariser", "The
// Chebyshev solve", "The exact solve", "Conjugate gradient").
void solve_bounds(const Params& P, double hp2, Token& t) {
  // float64's rounding of the recursions (relative ~T·2^-53) moved to the safe side.
  t.h = std::max(0.0, std::sqrt(hp2) - t.n) * (1.0 - 1e-9);
  t.skip = P.adaptive && t.zero;
  if (t.skip) {
    t.Qt = t.alpha ? t.sig : 0.0;  // x = 0: q̃ = (1 − α)·scale·q
    return;
  }
  if (P.adaptive) {
    t.lam_lo = P.a_lo * t.h, t.lam_hi = P.a_hi * t.H;
    t.rho_hi = 1.0 / (1.0 + 2.0 * P.a_lo), t.rho_lo = 1.0 / (1.0 + 2.0 * P.a_hi);
  } else {
    t.lam_lo = P.lam_lo, t.lam_hi = P.lam_hi;
    t.rho_hi = t.H == 0.0 ? 0.0 : t.H / (t.H + 2.0 * t.lam_lo);
    t.rho_lo = t.h / (t.h + 2.0 * t.lam_hi);
  }
  t.m = t.lam_lo - t.n;
  t.lmu_lo = t.h + 2.0 * t.lam_lo, t.lmu_hi = t.H + 2.0 * t.lam_hi;
  t.phat = t.n == 0.0 ? t.rho_hi : 1.0;
  // ‖H_t‖_F/m_t and λ_t/m_t, at the feasible ‖H_t‖_F ≥ h_t, λ_t ≥ λ_lo where they are largest.
  t.theta = P.adaptive ? quot(t.h, t.m) : quot(t.H, t.m);
  t.phi = quot(t.lam_lo, t.m);
  t.xm = (P.solver == Solver::chebyshev ? 1.0 + t.phat : 1.0) * t.sig;
  t.X = quot(t.xm, t.m);
  t.rhat = P.solver == Solver::chebyshev ? t.phat * t.sig
           : P.solver == Solver::cg      ? mul(std::sqrt(t.theta + t.phi), t.sig)
                                         : t.sig;
  if (P.solver == Solver::chebyshev) {
    // ω_i ≤ ω_i(ρ_hi) (the schedule grows with ρ), c_i = 2ω_i/(L + μ).
    double w = P.omega0;
    for (int i = 1; i <= P.iters; ++i) w = 4.0 / (4.0 - t.rho_hi * t.rho_hi * w), up(t.omax, w);
    t.cbar = quot(2.0 * t.omax, t.lmu_lo);
  }
  t.Qt = t.alpha ? std::max(t.X, t.sig) : t.X;
}

// The forward's conditions on one token (solve, iterates, output, diagnostics,
// regulariser); `kbar` the largest key norm of its chunk and H0, S0 the bounds of its
// chunk-initial states (chunk form; the products with them come before the decay ζ_c).
void token_conditions(const Params& P, const Token& t, double kbar, double H0, double S0, std::int64_t K,
                      Bounds& b) {
  const bool chunk = P.form == Form::chunk;
  up(b.solve, t.sig);  // scale·q
  up(b.states, t.H);
  up(b.states, t.S);
  up(b.norm, t.H * t.H);  // ‖H_t‖²_F's partial sums (sequential), eq. (5)'s sum (chunk)
  up(b.iterates, t.Qt);
  if (t.alpha) up(b.solve, t.X + t.sig);  // x − scale·q, α(x − scale·q)
  if (chunk) up(b.iterates, mul(t.Qt, kbar));
  if (P.direction == Direction::forward) {
    up(b.output, mul(t.Qt, t.S));
    if (chunk) up(b.output, mul(t.Qt, S0));  // Q̃S_0
    up(b.diagnostics, t.sig * t.sig);  // Σ (scale·q)²
  }
  if (t.skip) return;
  const double A = t.H + t.lam_hi;
  up(b.scalars, t.lam_hi);
  up(b.scalars, t.lmu_hi);
  up(b.iterates, t.X);
  if (chunk) up(b.iterates, mul(t.X, kbar));  // (ξ_c·k_j)M̃_{j,c}, narrowed
  // (H + λI)ξ's partial sums: ‖H_t‖_F‖ξ‖ + λ‖ξ‖ (sequential, row by row), or the
  // chunk's ζ‖H_0‖_F‖ξ‖ + Σ_j M̃_{j,c}‖k_j‖²‖ξ‖ + λ‖ξ‖ ≤ (Ĥ_t + λ)‖ξ‖.
  const double Y = chunk ? mul(t.X, A) : mul(t.theta + t.phi, t.xm);
  up(b.solve, Y);
  if (chunk) up(b.solve, mul(t.X, H0));  // ΞH_0ᵀ
  if (P.solver == Solver::chebyshev) {
    up(b.scalars, t.cbar);
    up(b.solve, chebyshev_partials(t, t.sig));
  } else if (P.solver == Solver::exact) {
    up(b.solve, cholesky_bound(A, t.m, t.sig));
  } else {
    // CG (exact arithmetic, ≤ min(r, K) steps): ‖r_i‖ ≤ √κ_A‖q‖, ‖p_i‖ ≤ (i + 1)κ_A‖q‖; the
    // steps α_ip_i are A-orthogonal and sum to x_m, so ‖α_ip_i‖_A ≤ ‖x*‖_A: α_ip_i ≤ X, α_iAp_i ≤ r̂.
    const double kA = t.theta + t.phi;
    // p_i for i ≤ min(r, K) (p_K = 0: r_K = 0 in exact arithmetic).
    const double Phat = static_cast<double>(std::max<std::int64_t>(1, std::min<std::int64_t>(P.iters + 1, K))) *
                        mul(kA, t.sig);
    up(b.iterates, Phat);
    if (chunk) up(b.iterates, mul(Phat, kbar)), up(b.solve, mul(Phat, H0));
    up(b.solve, std::max({mul(A, Phat), mul(A, mul(Phat, Phat)), mul(kA, t.sig * t.sig), quot(1.0, t.m), kA,
                          t.X, t.rhat, Phat + t.rhat}));
  }
  if (P.direction == Direction::forward) {
    up(b.diagnostics, t.rhat * t.rhat);
    up(b.diagnostics, quot(t.rhat * t.rhat, t.sig * t.sig));
    up(b.diagnostics, t.theta + t.phi);  // κ = (λ_max + λ)/(λ_min + λ), the kappa output
    up(b.diagnostics, P.adaptive ? P.a_hi : t.zero ? 1.0 : quot(t.lam_hi, t.h));  // λ/‖H‖_F, H/‖H‖_F ≤ 1
  }
}

Bounds bounds_of(const TensorMap<double>& x, const DomainInputs& in, const DomainContext& c) {
  const Params P = params_of(in, c);
  const Tensor<double>&q = x.at("q"), &k = x.at("k"), &v = x.at("v"), &g = x.at("g");
  const Tensor<double>*beta = optional(x, "beta"), *alpha = optional(x, "alpha"), *h0 = optional(x, "h0"),
                     *hkk0 = optional(x, "hkk0"), *d_o = optional(x, "do"), *dht = optional(x, "dht"),
                     *dhkk = optional(x, "dhkk");
  const std::int64_t K = q.dim(3);
  const bool backward = c.direction == Direction::backward && d_o;
  Bounds b;
  b.inputs = std::max({max_abs(q), max_abs(k), max_abs(v), h0 ? max_abs(*h0) : 0.0, hkk0 ? max_abs(*hkk0) : 0.0});
  if (backward)
    b.inputs = std::max({b.inputs, max_abs(*d_o), dht ? max_abs(*dht) : 0.0, dhkk ? max_abs(*dhkk) : 0.0});
  for (const Problem& p : problems(x)) {
    ProblemBounds pr{p, {}, dhkk ? block(*dhkk, p.n, p.h).l2() : 0.0, dht ? block(*dht, p.n, p.h).l2() : 0.0};
    const Split sp = split_of(hkk0, p, K);
    double H = sp.norm, hp2 = sp.pos * sp.pos, n = sp.neg, S = h0 ? block(*h0, p.n, p.h).l2() : 0.0;
    bool zero = sp.zero;
    up(b.states, H);
    up(b.states, S);
    up(b.norm, H * H);
    const std::int64_t C = chunk_tokens(c, p.eos - p.bos);
    for (std::int64_t t = p.bos; t < p.eos; ++t) {
      Token tk;
      double kk = row(k, p.b, t, p.h).l2sq(), qq = row(q, p.b, t, p.h).l2sq();
      if (P.l2) {
        up(b.energy, kk + kL2Eps);
        up(b.energy, qq + kL2Eps);
        tk.lq = 1.0 / std::sqrt(qq + kL2Eps), tk.lk = 1.0 / std::sqrt(kk + kL2Eps);
        kk /= kk + kL2Eps;
        qq /= qq + kL2Eps;
      }
      const double gt = row(g, p.b, t, p.h).p[0];
      if (C > 0) up(b.gate, static_cast<double>(C) * std::abs(gt));  // |b_c| ≤ C·max|g|
      tk.kap = std::sqrt(kk), tk.nu = row(v, p.b, t, p.h).l2(), tk.sig = P.s * std::sqrt(qq);
      tk.beta = beta ? row(*beta, p.b, t, p.h).p[0] : 1.0;
      tk.gamma = std::exp(gt);
      tk.alpha = alpha != nullptr;
      if (backward) tk.dnorm = row(*d_o, p.b, t, p.h).l2();
      // The states (GKA eq. (CH)) and the bounds of ‖H_t‖_F from both sides.
      tk.H_prev = H * (1.0 + 1e-9), tk.S_prev = S * (1.0 + 1e-9);
      const double w = tk.beta * kk;
      H = tk.gamma * H + w;
      hp2 = tk.gamma * tk.gamma * hp2 + w * w;
      n *= tk.gamma;
      S = tk.gamma * S + tk.beta * tk.kap * tk.nu;
      zero = zero && w == 0.0;
      tk.H = H * (1.0 + 1e-9), tk.S = S * (1.0 + 1e-9), tk.n = n * (1.0 + 1e-9), tk.zero = zero;
      solve_bounds(P, hp2, tk);
      pr.tk.push_back(tk);
    }
    // Per chunk: the largest key norm and the chunk-initial state (GKA eq. (5)).
    const std::int64_t len = p.eos - p.bos, step = C > 0 ? C : std::max<std::int64_t>(len, 1);
    for (std::int64_t c0 = 0; c0 < len; c0 += step) {
      const std::int64_t c1 = std::min(len, c0 + step);
      double kbar = 0, Hmax = 0;
      for (std::int64_t i = c0; i < c1; ++i) up(kbar, pr.tk[i].kap), up(Hmax, pr.tk[i].H);
      if (C > 0) {
        const double H0 = pr.tk[c0].H_prev, k2 = kbar * kbar;
        up(b.gram, k2 * k2);  // G ⊙ G, narrowed
        // G, 4G (eq. (5)'s adjoint), KH_0ᵀ and KH_0 + KH_0ᵀ, k_jᵀH_0k_j, (G⊙G)M̃, ‖H_0‖²_F.
        up(b.norm, std::max({4.0 * k2, 2.0 * kbar * H0, k2 * H0, k2 * Hmax, H0 * H0}));
      }
      const double H0 = C > 0 ? pr.tk[c0].H_prev : 0.0, S0 = C > 0 ? pr.tk[c0].S_prev : 0.0;
      for (std::int64_t i = c0; i < c1; ++i) token_conditions(P, pr.tk[i], kbar, H0, S0, K, b);
    }
    if (backward) backward_bounds(P, pr, b);
  }
  return b;
}

// On the inputs as the form receives them and, where they differ, as given: rounding
// can turn a tiny key into 0 (nothing written, x = 0), while the range trace runs on
// the given one (λ_t tiny, x huge). Every value is the larger of the two.
Bounds bounds(const DomainInputs& in, const DomainContext& c) {
  Bounds b = bounds_of(in.tensors, in, c);
  if (!in.unrounded || in.unrounded == &in.tensors) return b;
  const Bounds r = bounds_of(*in.unrounded, in, c);
  for (auto [x, y] : {std::pair{&b.inputs, r.inputs}, {&b.energy, r.energy}, {&b.gate, r.gate}, {&b.states, r.states},
                      {&b.norm, r.norm}, {&b.gram, r.gram}, {&b.scalars, r.scalars}, {&b.iterates, r.iterates},
                      {&b.solve, r.solve}, {&b.output, r.output}, {&b.diagnostics, r.diagnostics},
                      {&b.adjoint, r.adjoint}, {&b.solve_adjoint, r.solve_adjoint}, {&b.gradients, r.gradients},
                      {&b.gate_gradients, r.gate_gradients}, {&b.chunk_adjoint, r.chunk_adjoint},
                      {&b.chunk_operands, r.chunk_operands}, {&b.reversal, r.reversal}})
    up(*x, y);
  return b;
}

using Measure = double (*)(const Bounds&);

}  // namespace

LayerDomain gka(const LayerSpec&) {
  const std::vector<Form> all = {}, chunk = {Form::chunk};
  const std::vector<Direction> both = {}, fwd = {Direction::forward}, bwd = {Direction::backward};
  LayerDomain d;
  d.derivation = "docs/domains.md#gated-kalmanet";
  const auto add = [&](std::string name, std::string bound, std::string covers, std::vector<Form> forms,
                       std::vector<Direction> dirs, Held held, Measure f) {
    d.conditions.push_back({std::move(name), std::move(bound), std::move(covers), std::move(forms), std::move(dirs),
                            held, [f](const DomainInputs& in, const DomainContext& c) { return f(bounds(in, c)); }});
  };
  add("inputs", "max |q|, |k|, |v|, |h0|, |hkk0| (backward: also |do|, |dht|, |dhkk|)",
      "the inputs as the form receives them; the chunk-initial states as narrowed operands", all, both, Held::stored,
      [](const Bounds& b) { return b.inputs; });
  add("key energy", "max_t ‖q_t‖², ‖k_t‖² + 1e-6 with use_qk_l2norm_in_kernel (0 without)",
      "the sums of squares of the L2 norm", all, both, Held::compute, [](const Bounds& b) { return b.energy; });
  add("gate sum", "C · max|g| (C: the chunk's tokens)",
      "the chunk form's cumulative log gate b_c = Σ g over the chunk, held in fp32", chunk, both, Held::compute,
      [](const Bounds& b) { return b.gate; });
  add("states",
      "max_t Ĥ_t, Ŝ_t:  Ĥ_t = γ_tĤ_{t−1} + β_t‖k_t‖², Ĥ_0 = ‖hkk0‖_F;  Ŝ_t = γ_tŜ_{t−1} + β_t‖k_t‖‖v_t‖, "
      "Ŝ_0 = ‖h0‖_F",
      "H_t, S_t and their updates' partial results (every entry ≤ the Frobenius norm); the chunk's running "
      "states, narrowed chunk-initial states, explicit H_c and state passing",
      all, both, Held::stored, [](const Bounds& b) { return b.states; });
  add("Frobenius norm",
      "max_t Ĥ_t² (chunk: also, per chunk, 4κ̄², 2κ̄Ĥ_0, κ̄²Ĥ_0, κ̄²·max Ĥ_t, Ĥ_0²; κ̄ = its largest ‖k_t‖, Ĥ_0 at its "
      "start)",
      "‖H_t‖²_F and its partial sums (sequential); GKA eq. (5)'s terms, K H_0ᵀ, k_jᵀH_0k_j, G = KKᵀ, (G⊙G)M̃ (chunk)",
      all, both, Held::compute, [](const Bounds& b) { return b.norm; });
  add("key Gram", "max over chunks of κ̄⁴", "the chunk's G ⊙ G (GKA eq. (5)), narrowed", chunk, both, Held::stored,
      [](const Bounds& b) { return b.gram; });
  add("regulariser",
      "max_t of λ_t ≤ aĤ_t (or λ), L + μ ≤ Ĥ_t + 2λ_t; chebyshev: 2ω̄_t/(h_t + 2λ_lo,t); sequential backward with "
      "chebyshev_backward=alg2: 4/ρ_lo,t²  (h_t ≤ ‖H_t‖_F, λ_lo,t, ω̄_t ≥ ω_i, ρ_lo,t: docs/domains/gka.md)",
      "λ_t, L, μ, L + μ and Chebyshev's c_0 = 2/(L + μ), c_i = 2ω_i/(L + μ); Alg. 2's 4/ρ² (eq. (57))", all, both,
      Held::compute, [](const Bounds& b) { return b.scalars; });
  add("iterates",
      "max_t X_t = (1 + p̂_t)‖scale·q_t‖/m_t (chebyshev), ‖scale·q_t‖/m_t (exact, cg); q̃: max(X_t, ‖scale·q_t‖) "
      "with α; chunk: X_t·κ̄, q̃·κ̄; cg: P̂_t = min(r + 1, K)·κ_A,t‖scale·q_t‖  (m_t = λ_lo,t − n_t ≤ "
      "λ_min(H_t + λ_tI))",
      "every iterate ξ_i and the solution x_t, q̃_t (narrowed operands in the chunk form, with their masked "
      "products with the keys), CG's directions p_i",
      all, both, Held::stored, [](const Bounds& b) { return b.iterates; });
  add("solve",
      "max_t of ‖scale·q_t‖, (Ĥ_t + λ_t)X_t and Ĥ_0X_t (chunk) or (θ_t + φ_t)m_tX_t (sequential); chebyshev: "
      "x̂_t·max(1 + max(1, w_t − 1)p̂_t, w_tp̂_t, 2p̂_t, 1 + ρ_t), x̂_t = ‖scale·q_t‖/m_t, w_t = ω̄_t(1 + ρ_t); exact: "
      "Cholesky's 2Â, b(1 + √(Â/m)), b/√m + √Â·b/m (b = ‖scale·q_t‖, Â = Ĥ_t + λ_t); cg: ÂP̂, ÂP̂², κ_A‖scale·q‖², "
      "1/m, κ_A, X, r̂, P̂ + r̂",
      "(H + λI)ξ and its partial sums, the iteration's partial results, the factor L and the substitutions "
      "(exact), CG's products, α_i, β_i (values in the compute format)",
      all, both, Held::compute, [](const Bounds& b) { return b.solve; });
  add("output", "max_t q̃_t · Ŝ_t (chunk: and q̃_t · Ŝ_0)",
      "o and its partial sums S_tᵀq̃_t (the chunk's diag(ζ)Q̃S_0 + ((Q̃Kᵀ)⊙M̃ᵀ)V)", all, fwd, Held::stored,
      [](const Bounds& b) { return b.output; });
  add("diagnostics",
      "max_t of ‖scale·q_t‖², r̂_t², r̂_t²/‖scale·q_t‖², θ_t + φ_t, λ/h_t (fixed λ) or a",
      "resid's sums of squares and ratio, the kappa output (≤ (‖H‖_F + λ)/m), λ/‖H_t‖_F", all, fwd, Held::compute,
      [](const Bounds& b) { return b.diagnostics; });
  add("state adjoint",
      "max_t D′_H,t = D_H,t + G_t + |dfro_t|, D′_S,t = D_S,t + q̃_t‖do_t‖ (D_{t−1} = γ_tD′_t, D_H,T = ‖dhkk‖_F, "
      "D_S,T = ‖dht‖_F)",
      "dH, dS through every step (dhkk0, dh0), their narrowed chunk-end operands", all, bwd, Held::stored,
      [](const Bounds& b) { return b.adjoint; });
  add("solve adjoint",
      "max_t of R_t = Ŝ_t‖do_t‖, F̄_tR_t, (Ĥ_t + λ_t)F̄_tR_t, c̄F̄RX, G_t, the chains W, dρ², ds, dL, dλ, dfro and "
      "dfro/h_t, Lemma 2's X^d_t = (1 + p̂_t)R_t/m_t (docs/domains.md); exact: u = R/m and Cholesky with b = R",
      "dq̃ = S_t do_t, dx, dξ_i and the reversed Chebyshev pass (unrolled, Alg. 2), dH's rank-one terms, dλ, "
      "d‖H‖_F, the bounds' gradient, Lemma 2's solve and the reversed iterates",
      all, bwd, Held::compute, [](const Bounds& b) { return b.solve_adjoint; });
  add("gradients",
      "max_t of scale·(R_t + min(Φ_tR_t, X^d_t)) (exact: scale·(R_t + R_t/m_t)), β_t(2D′_H‖k_t‖ + D′_S‖v_t‖), "
      "β_tD′_S‖k_t‖, ‖k_t‖(D′_H‖k_t‖ + D′_S‖v_t‖); l2norm: 2/√(‖x‖² + 1e-6) times dq, dk",
      "dq, dk, dv, dβ and their partial sums (narrowed by the chunk form), the L2 norm's backward", all, bwd,
      Held::stored, [](const Bounds& b) { return b.gradients; });
  add("gate gradients", "max_t of γ_t(D′_HĤ_{t−1} + D′_SŜ_{t−1}), R_t(X_t + ‖scale·q_t‖)",
      "dg and dα and their partial sums", all, bwd, Held::compute, [](const Bounds& b) { return b.gate_gradients; });
  add("chunk adjoint",
      "per chunk: D_S,end + Σq̃‖do‖, D_H,end + ΣG + 2Ψ(Ĥ_0 + Σ‖k‖²), the dζ, dM̃, dk, dv and db sums "
      "(docs/domains.md)",
      "the chunk backward's accumulated dH_0, dS_0, dζ, dM̃, dk, dv, eq. (5)'s adjoint and dg's reverse running sum",
      chunk, bwd, Held::compute, [](const Bounds& b) { return b.chunk_adjoint; });
  add("chunk operands",
      "per chunk: D_H,end, D_S,end, q̃κ̄, ‖do‖‖v‖, c̄F̄R, c̄F̄Rκ̄, Lemma 2's X^d and X^dκ̄, 2Ψκ̄, ψ, 4κ̄²Ψ",
      "the chunk backward's narrowed operands: dH_end, dS_end, the masked products of the readout's and of "
      "eq. (58)'s rank-one adjoints, Lemma 2's iterates, eq. (5)'s adjoint operands",
      chunk, bwd, Held::stored, [](const Bounds& b) { return b.chunk_operands; });
  add("reversal",
      "max_t of u·X_t·R_t^{−r} (u = 2⁻²⁴ fp32, 2⁻⁸ bf16, 2⁻¹¹ fp16: the iterates' rounding), +∞ where R_t² < 2⁻²²; "
      "R_t = ρ_lo,t/(1 + √(1 − ρ_lo,t²)) (GKA Lemma 3's √(ω* − 1); H_t ≠ 0, chebyshev): a first-order estimate of "
      "the rounding noise, not a bound",
      "the reversed iterates ξ_{i−2} = (ξ_i − ν_iξ_{i−1} + c_iAξ_{i−1} − c_iq̂)/b_i (GKA eq. (59)) as computed in fp32: "
      "rounding grows by 1/R per step, and b_i = 1 − ν_i (−b_i ≥ R²) rounds to 0 below R² ≈ 2⁻²⁴ (κ near 1: a fixed "
      "λ far above ‖H_t‖_F)",
      chunk, bwd, Held::compute, [](const Bounds& b) { return b.reversal; });
  d.conditions.back().rounding = true;
  d.gaps.push_back({{},
                    {Direction::backward},
                    "not derived for the backward direction with solver=cg: CG's reverse pass divides by ‖r_i‖² "
                    "and p_iᵀAp_i of steps before the last, which no bound on the inputs' magnitudes keeps away "
                    "from 0 (a right-hand side near an invariant subspace of few eigenvectors makes ‖r_i‖ "
                    "arbitrarily small)",
                    [](const Config& cfg) { return cfg.text("solver") == "cg"; }});
  return d;
}

}  // namespace ttr::domains
