// GKA's guaranteed domain, backward direction (docs/domains/gka.md,
// "Backward"): the sequential adjoint (reference/gka/backward.hpp, solve_backward.hpp)
// token by token from t = T, and the chunk backward (chunk_backward.hpp,
// chunk_backward_parts.hpp) chunk by chunk from the sequential adjoint's bounds at
// the chunk's end — in exact arithmetic the adjoint carried between chunks is the
// sequential one there.
//
// The Chebyshev adjoint dξ_{i−1} = ω_i(I − c A)dξ_i − (ω_{i+1} − 1)dξ_{i+1} (GKA eq. (56))
// is the transpose of the iteration's homogeneous recurrence: dξ_j is the response
// of ξ_r to a perturbation of ξ_j, (τ_{j+1}/τ_{r+1})U_{r−j}(A's y/ρ) applied to dx
// (τ_{n}/τ_{n+1} = ρω_n/2), so ‖dξ_j‖ ≤ F_j‖dx‖ (gka.cpp, chebyshev_factors).
#include <algorithm>
#include <cmath>
#include <vector>

#include "oracles/domains/gka_bounds.hpp"

namespace ttr::domains::gka_detail {

namespace {

// What the chunk backward needs of one token's adjoint.
struct Adj {
  double R = 0, Qd = 0;        // ‖dq̃_t‖ ≤ Ŝ_t‖do_t‖, ‖q̃_t do_tᵀ‖_F
  double G = 0;                // ‖the solve's dH_t‖_F (rank-one terms of eq. (58), or −u xᵀ)
  double dfro = 0, psi = 0;    // |d‖H_t‖_F|, ψ_t = |d‖H_t‖_F|/(2h_t) (eq. (5)'s adjoint)
  double Xd = 0, cFR = 0, FR = 0;  // Lemma 2's iterates; c_i dξ_i; dξ_i
  double DH_in = 0, DS_in = 0; // D_H,t, D_S,t: the adjoints carried into token t
};

// The Chebyshev adjoint of one token (per unit of R = ‖dx‖ bound): adds to
// b.solve_adjoint, returns G/R, |dλ|/R, |dfro|/R in g[0..2] and c̄F̄ in g[3].
// With x̂ = ‖scale·q‖/m ≥ ‖x*‖: ‖ξ_i‖ ≤ (1 + ε_i)x̂, ‖ξ_{i−1} − ξ_{i−2}‖ ≤ (ε_{i−1} + ε_{i−2})x̂
// (ε_{−1} = 1: ξ_{−1} = 0), the residual ‖Aξ_{i−1} − q̂‖ ≤ ε_{i−1}‖scale·q‖.
void chebyshev_adjoint(const Params& P, const Token& t, const Cheb& ch, double R, double g[4], Bounds& b) {
  const int r = P.iters;
  const double A = t.H + t.lam_hi, F = ch.Fmax, Phi = quot(ch.sum_wF, t.lmu_lo), xh = quot(t.sig, t.m);
  const auto eps = [&](int i) { return i < 0 ? 1.0 : ch.eps[i]; };
  double Om = 0, D2 = 0, DS1 = 0, Wmax = 0, dH = 0, dci = 0;
  for (int i = r; i >= 1; --i) {
    const double Fi = ch.F[i], wi = ch.omega[i], ci = quot(2.0 * wi, t.lmu_lo);
    // dH −= c_i dξ_i ξ_{i−1}ᵀ and dλ −= c_i⟨dξ_i, ξ_{i−1}⟩ (GKA eq. (58)).
    dH += mul(mul(ci, Fi), (1.0 + eps(i - 1)) * xh);
    // dc_i = −⟨dξ_i, Aξ_{i−1} − q̂⟩; dω_i = (carried) + ⟨dξ_i, ξ_{i−1} − ξ_{i−2}⟩ + 2dc_i/s.
    const double dc = mul(Fi, eps(i - 1) * t.sig);
    up(dci, dc);
    const double W = Om + mul(Fi, (eps(i - 1) + eps(i - 2)) * xh) + quot(2.0 * dc, t.lmu_lo);
    up(Wmax, W);
    Om = W * t.rho_hi * t.rho_hi * wi * wi / 4.0;  // dω_{i−1} += dω_i ρ²ω_i²/4
    D2 += W * ch.omega[i - 1] * wi * wi / 4.0;     // dρ² += dω_i ω_{i−1}ω_i²/4
    DS1 += quot(mul(dc, ci), t.lmu_lo);             // ds −= dc_i c_i/s
  }
  DS1 += quot(mul(ch.F[0], t.sig) * 2.0, t.lmu_lo * t.lmu_lo);  // ⟨dξ_0, q̂⟩c_0/s
  const double DSb = DS1 + quot(2.0 * D2, t.lmu_lo);  // ds after dρ ρ/s (dρ = 2ρdρ² ≤ 2D2)
  const double DL = DSb + quot(2.0 * D2, t.lmu_lo);   // dL, dμ = ds ± dρ/s
  const double dlam = dH + 2.0 * DL;                  // Σ c_i⟨dξ_i, ξ_{i−1}⟩ + dL + dμ
  const double dfro = DL + (P.adaptive ? P.a_hi * dlam : 0.0);
  const double cF = mul(t.cbar, F);
  double& sa = b.solve_adjoint;
  for (const double u : {F, mul(A, F), 3.0 * F + mul(mul(t.cbar, A), F), cF, mul(F, t.X), mul(cF, t.X), dH, 1.0 + Phi,
                         2.0 * dci,
                         mul(t.cbar, dci), 8.0 * Wmax, 2.0 * D2, DSb, DL, mul(ch.F[0], t.sig),
                         quot(2.0 * mul(ch.F[0], t.sig), t.lmu_lo), dlam, dfro})
    up(sa, mul(R, u));
  g[0] = dH, g[1] = dlam, g[2] = dfro, g[3] = cF;
}

}  // namespace

void backward_bounds(const Params& P, const ProblemBounds& pr, Bounds& b) {
  const std::vector<Token>& tk = pr.tk;
  const std::size_t T = tk.size();
  const bool chunk = P.form == Form::chunk;
  std::vector<Adj> adj(T);
  double DH = pr.D_H, DS = pr.D_S;
  up(b.adjoint, DH);
  up(b.adjoint, DS);
  Cheb ch;
  double ch_rho = -1, ch_z = -1;
  for (std::size_t i = T; i-- > 0;) {
    const Token& t = tk[i];
    Adj& a = adj[i];
    a.DH_in = DH, a.DS_in = DS;
    a.R = mul(t.S, t.dnorm), a.Qd = mul(t.Qt, t.dnorm);
    double& sa = b.solve_adjoint;
    up(sa, a.R);
    double dsq = t.alpha ? a.R : 0.0;  // (1 − α)dq̃; the solve adds its dq̂ below
    if (!t.skip) {
      const double A = t.H + t.lam_hi;
      if (P.solver == Solver::chebyshev) {
        const double z = t.n == 0.0 ? 1.0 : 1.0 + quot(2.0 * t.n, t.h);
        if (t.rho_hi != ch_rho || z != ch_z) ch = chebyshev_factors(P, t.rho_hi, z);
        ch_rho = t.rho_hi, ch_z = z;
        double g[4];
        chebyshev_adjoint(P, t, ch, a.R, g, b);
        a.G = mul(a.R, g[0]), a.dfro = mul(a.R, g[2]), a.cFR = mul(a.R, g[3]), a.FR = mul(a.R, ch.Fmax);
        // Lemma 2: Σ c_i dξ_i = p_r(A)dx, Alg. 1 on the adjoint system — its iterates
        // are bounded as the forward's with ‖dx‖ ≤ R (Alg. 2 and the chunk backward
        // run it; the unrolled pass sums the same value).
        a.Xd = quot((1.0 + t.phat) * a.R, t.m);
        dsq += std::min(mul(quot(ch.sum_wF, t.lmu_lo), a.R), a.Xd);
        if (P.alg2 || chunk) {
          const double Yd = chunk ? mul(a.Xd, A) : mul(t.theta + t.phi, (1.0 + t.phat) * a.R);
          const double Y = chunk ? mul(t.X, A) : mul(t.theta + t.phi, t.xm);
          // Lemma 2's solve; the reversed iterates ξ_{i−2} = (ξ_i − ν_iξ_{i−1} + c_iAξ_{i−1} − c_iq̂)/b_i.
          for (const double u : {a.Xd, Yd, chebyshev_partials(t, a.R), 3.0 * t.X + mul(t.cbar, Y + t.sig),
                                 a.R + a.Xd})
            up(sa, u);
        }
        if (P.alg2 && !t.zero) up(b.scalars, quot(4.0, t.rho_lo * t.rho_lo));  // eq. (57)'s 4/ρ²
        // The chunk backward's reversal (eq. (59)) runs in fp32 from the forward's
        // iterates, which a 16-bit policy narrows before each product: an error of
        // ~u‖ξ‖ (u = P.u_iterate, the dtype's: each reversed step injects the difference
        // between ξ and its narrowed copy) grows by 1/R per reversed step,
        // R = √(ω* − 1) = ρ/(1 + √(1 − ρ²)) (GKA Lemma 3): ~u·X_t·R^{−r}. GKA Remark 2 keeps
        // to κ ≥ 10 (R ≥ 0.52: R^{−30} < 10⁹); a fixed λ far above ‖H_t‖_F drives κ
        // toward 1 and R toward 0, and the noise past fp32's range (NaN gradients,
        // docs/domains/gka.md, "Alg. 2 in floating point"). And the divisor itself,
        // b_i = 1 − ν_i with −b_i ≥ ω* − 1 = R²: where R² is near fp32's 2⁻²⁴, ν_i =
        // 4/(4 − ρ²ν_{i−1}) rounds to 1 and b_i to 0 (at any r: ρ ≲ 2⁻¹¹), so the
        // value is +∞ below R² = 2⁻²². H_t = 0 takes the flat route.
        if (chunk && !t.zero) {
          const double R = t.rho_lo / (1.0 + std::sqrt(std::max(0.0, 1.0 - t.rho_lo * t.rho_lo)));
          up(b.reversal, R * R < 0x1p-22 ? kInf : mul(P.u_iterate * t.X, std::pow(R, -static_cast<double>(P.iters))));
        }
      } else {  // exact: u = A⁻ᵀdx by Cholesky (GKA eq. (6), Lemma 1)
        const double u = quot(a.R, t.m);
        a.G = mul(u, t.X);
        a.dfro = P.adaptive ? P.a_hi * a.G : 0.0;
        dsq += u;
        for (const double x : {u, cholesky_bound(A, t.m, a.R), a.G, a.R + u, a.dfro}) up(sa, x);
      }
      if (!t.zero) {
        a.psi = quot(a.dfro, 2.0 * t.h);
        up(sa, quot(a.dfro, t.h));  // dH += (d‖H‖_F/‖H‖_F)H
      }
    }
    // The adjoints of H_t, S_t (GKA eq. (CH)), and the gradients of token t.
    const double DHp = DH + a.G + a.dfro, DSp = DS + a.Qd;
    for (const double x : {DHp, DSp, a.Qd}) up(b.adjoint, x);
    const double dq = P.s * dsq;
    const double acc = 2.0 * mul(DHp, t.kap), sv = mul(DSp, t.nu);
    const double dk = t.beta * (acc + sv);
    for (const double x : {dq, P.l2 ? 2.0 * t.lq * dq : 0.0, acc, sv, acc / 2.0 + sv, dk, P.l2 ? 2.0 * t.lk * dk : 0.0,
                           mul(DSp, t.kap), mul(t.kap, acc / 2.0 + sv)})
      up(b.gradients, x);
    const double dgamma = mul(DHp, t.H_prev) + mul(DSp, t.S_prev);
    up(b.gate_gradients, dgamma);
    if (t.alpha) up(b.gate_gradients, mul(a.R, t.X + t.sig));
    DH = t.gamma * DHp, DS = t.gamma * DSp;
  }
  if (!chunk || T == 0) return;
  // The chunk backward, chunk by chunk (docs/domains/gka.md, "Chunk backward").
  const std::size_t C = std::min<std::size_t>(static_cast<std::size_t>(std::max(P.chunk, 1)), T);
  for (std::size_t c0 = 0; c0 < T; c0 += C) {
    const std::size_t c1 = std::min(T, c0 + C), last = c1 - 1;
    const double DHe = adj[last].DH_in, DSe = adj[last].DS_in;
    const double H0 = tk[c0].H_prev, S0 = tk[c0].S_prev;
    double kb = 0, nb = 0, Hmax = 0, sQd = 0, sG = 0, Psi = 0, sk2 = 0, skn = 0, mQd = 0, mG = 0, mpsi = 0, mQt = 0,
           mdo = 0, mcFR = 0, mXd = 0, mX = 0, mFR = 0;
    for (std::size_t i = c0; i < c1; ++i) {
      const Token& t = tk[i];
      const Adj& a = adj[i];
      up(kb, t.kap), up(nb, t.nu), up(Hmax, t.H), up(mQd, a.Qd), up(mG, a.G), up(mpsi, a.psi), up(mQt, t.Qt);
      up(mdo, t.dnorm), up(mcFR, a.cFR), up(mXd, a.Xd), up(mX, t.X), up(mFR, a.FR);
      sQd += a.Qd, sG += a.G, Psi += a.psi, sk2 += t.kap * t.kap, skn += t.kap * t.nu;
    }
    const double k2 = kb * kb, Hs = H0 + Hmax;
    // Accumulated in fp32: dS_0, dH_0 (readout's rank-one terms, eq. (58)'s, eq. (5)'s,
    // the carried dH_end), dζ_c, dM̃_{j,c}, dk, dv, db and dg's reverse running sum.
    const double dS0 = DSe + sQd;
    const double dH0 = DHe + sG + 2.0 * mul(Psi, H0 + sk2);
    const double dM = mQd * kb * nb + mul(mG, k2) + 2.0 * mul(mpsi, k2 * Hs) + mul(k2, DHe) + mul(kb * nb, DSe);
    const double Z = mul(sQd, S0) + mul(sG, H0) + 2.0 * mul(Psi, H0 * Hmax) + mul(DHe, H0) + mul(DSe, S0);
    const double M = mul(sQd, skn) + mul(sG, sk2) + 2.0 * mul(Psi, Hs * sk2) + mul(sk2, DHe) + mul(skn, DSe);
    const double sumM = mul(kb * nb, sQd) + mul(k2, sG) + 2.0 * mul(Psi, k2 * Hs) + mul(k2, DHe) + mul(kb * nb, DSe);
    const double dK = mul(nb, sQd) + 2.0 * mul(kb, sG) + 4.0 * mul(Psi, kb * (H0 + sk2)) + 2.0 * mul(kb, DHe) +
                      mul(nb, DSe);
    const double dV = mul(kb, sQd + DSe);
    // (products with H_0, S_0 come before the decay ζ_c: ΞH_0ᵀ, dΞH_0, Lemma 2's, dO S_0ᵀ)
    for (const double x : {dS0, dH0, dM, Z + 2.0 * M, sumM, dK, dV, 4.0 * mul(Psi, k2), 2.0 * Psi, 2.0 * mpsi,
                           mdo * S0, mul(mX, H0), mul(mXd, H0), mul(mFR, H0), mul(mul(mcFR, mX), H0), mul(DHe, kb),
                           mul(DSe, nb), mul(DSe, kb)})
      up(b.chunk_adjoint, x);
    // Narrowed: dH_end, dS_end; the readout's Q̃, (Q̃Kᵀ)⊙M̃ᵀ, (dO Vᵀ)⊙M̃ᵀ; eq. (58)'s c_i dξ_i
    // and its masked products; Lemma 2's iterates; eq. (5)'s scaled keys, ψM̃, 4G⊙(M̃ψM̃ᵀ).
    for (const double x : {DHe, DSe, mul(mQt, kb), mdo * nb, mcFR, mul(mcFR, kb), mXd, mul(mXd, kb),
                           2.0 * mul(Psi, kb), mpsi, 4.0 * mul(Psi, k2)})
      up(b.chunk_operands, x);
  }
}

}  // namespace ttr::domains::gka_detail
