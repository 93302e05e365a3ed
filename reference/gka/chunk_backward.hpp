// Gated KalmaNet (GKA), chunkwise backward: the adjoint of the chunk form's own
// equations (chunk.hpp, GKA §4.2, eq. (5)), chunk by chunk from the last, so that in
// exact arithmetic it equals the sequential adjoint (backward.hpp) and under a 16-bit
// policy it is a realistic backward kernel. Generic over the arithmetic policy P,
// like the forward.
//
// Forward of one chunk (chunk.hpp): chunk-initial states H_0, S_0, tokens c = 0..n-1,
//   H_c = ζ_c H_0 + Σ_{j≤c} M̃_{j,c} k_j k_jᵀ,  S_c = ζ_c S_0 + Σ_{j≤c} M̃_{j,c} k_j v_jᵀ,
//   f_c = ‖H_c‖_F by eq. (5), λ_c = a f_c (eq. (4)), x_c = Alg. 1 on (H_c + λ_c I) x = q̂_c,
//   q̃_c = q̂_c + α_c (x_c − q̂_c),  O = diag(ζ) Q̃ S_0 + ((Q̃ Kᵀ) ⊙ M̃ᵀ) V,
//   H_end = ζ_{n-1} H_0 + Σ_j M̃_{j,n-1} k_j k_jᵀ (S_end likewise): the next chunk's H_0.
// Adjoint of one chunk, carrying dH_end = ∂L/∂H_end, dS_end (dhkk, dht for the last):
//   1. recompute: the chunk-initial states come from a forward pass over the chunks
//      by the forward's own state passing (stored, one K×K + K×V per chunk); ζ, M̃,
//      f_c, λ_c and the solve are recomputed by the forward's own functions;
//   2. readout: dQ̃ = diag(ζ) dO S_0ᵀ + ((dO Vᵀ) ⊙ M̃ᵀ) K (rows S_c do_c), and the
//      rank-one cotangents dS_c = q̃_c do_cᵀ carried to S_0, k, v, ζ, M̃
//      (chunk_backward_parts.hpp: gka_state_outer_backward);
//   3. the α-connection: dx = α dq̃, dq̂ = (1 − α) dq̃, dα = ⟨dq̃, x − q̂⟩;
//   4. the Chebyshev solve by GKA Alg. 2 as derived (App. C, solve_backward.hpp's
//      gka_chebyshev_alg2_backward), for all tokens of the chunk at once, each with
//      its own scalars: dq̂ by Lemma 2 (eq. (53)) — Alg. 1 run on the adjoint systems
//      (H_cᵀ + λ_c I) with right-hand sides dx_c, batched like the forward; then the
//      reverse recursion eq. (56)/(61) for dξ_{i-1} together with the reversed forward
//      ξ_{i-2} = (ξ_i − ν_i ξ_{i-1} + c_i Aξ_{i-1} − c_i q̂)/b_i (eq. (54) solved for
//      ξ_{i-2}; the print's (59)/(60) have + c_i q), every product A_c ξ_{i-1},
//      A_cᵀ dξ_i batched over the chunk; each step's rank-one dH_c −= c_i dξ_i ξ_{i-1}ᵀ
//      (eq. (58)) goes straight to H_0, k, ζ, M̃ for all tokens (step 2's adjoint),
//      dλ_c −= c_i ⟨dξ_i, ξ_{i-1}⟩, and the bounds' terms dc_i, dω_i as the sequential
//      Alg. 2 route adds them (backward.hpp's header). One departure from Alg. 2: the
//      weights ν_i are not recovered by eq. (57) but recomputed forward from ω_0 (r + 1
//      scalars per token): reversing (57) multiplies an error by 1/(ω* − 1) per step
//      (≈ 1.75 at a = 0.02, so ~2e7 over r = 30), harmless in MPFR, fatal in fp32.
//      Where ρ_c = 0 (L = μ: H_c = 0 under a fixed λ) Alg. 2 cannot reverse (GKA
//      Remark 2), and the exact and CG solvers are not chunkwise in the forward
//      either: those tokens take the sequential adjoints (solve_backward.hpp) on an
//      explicitly formed H_c and a dense dH_c (gka_dense_state_backward), O(c·K²) each;
//   5. the ‖H_c‖_F path: d f_c += a dλ_c, then the adjoint of eq. (5)
//      (gka_chunk_fro_norms_backward) from ψ_c = d f_c / (2 f_c);
//   6. state passing: dH_0 += ζ_{n-1} dH_end, dk_j += M̃_{j,n-1}((dH_end + dH_endᵀ) k_j
//      + dS_end v_j), dv_j += M̃_{j,n-1} dS_endᵀ k_j, dζ_{n-1} += ⟨dH_end, H_0⟩ + ⟨dS_end, S_0⟩,
//      dM̃_{j,n-1} += k_jᵀ dH_end k_j + k_jᵀ dS_end v_j; dH_0, dS_0 become the previous
//      chunk's dH_end, dS_end (the reverse pass over chunks);
//   7. gates: dβ, db from dM̃ and dζ, dg the chunk-local reverse cumulative sum of db.
//
// Arithmetic policy P: the recomputed forward narrows what the forward narrows
// (chunk.hpp). In addition narrowed: the cotangents do, dht, dhkk (16-bit inputs);
// dH_end, dS_end when read as product operands (the per-chunk state gradients a
// kernel stores in 16 bits); every other matrix-product operand of the backward
// (dO, Q̃, the masked (dO Vᵀ)⊙M̃ᵀ, the rank-one factors c_i dξ_i and ξ_{i-1} of
// eq. (58), the operands of eq. (5)'s adjoint); dq, dk, dv, dβ as written. Kept in
// fp32 (acc): the iterates ξ, dξ of the reversed Chebyshev pass and the products
// A_c ξ_{i-1}, A_cᵀ dξ_i (including their masked factors); the running dH, dS carried
// between chunks, dζ, dM̃, ψ, dλ, the per-token solver scalars, dg, dα, dh0, dhkk0.
// What the fp32 reversal costs under a 16-bit policy (docs/error-model-gradients.md, "GKA's
// chunk backward"): the forward formed A_c ξ_{i-1} from bf16(ξ_{i-1}), the reversal
// from ξ_{i-1}, so every reversed step injects their difference (~u‖ξ‖), which the
// reversal amplifies by up to 1/√(ω* − 1) per step (GKA Lemma 3): bf16 dk carries
// ~50 u at r = 30. The reversal on the forward's narrowed operands would retrace them
// and cut that 6×, but the Monte Carlo model, whose perturbations are keyed by a
// value's bits rather than by its 16-bit rounding, could not follow it.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "reference/core/mutant.hpp"
#include "reference/gka/backward.hpp"
#include "reference/gka/chunk.hpp"
#include "reference/gka/chunk_backward_parts.hpp"

namespace ttr {

template <class P>
struct GkaChunkBackwardWork {
  using T = typename P::acc;
  GkaChunkTokens<T> tk;
  GkaChunkDecays<T> d;
  GkaChunkScratch<T> fws;         // the forward's functions' scratch
  GkaChunkBackwardScratch<T> ws;  // the adjoints'
  GkaChunkSolve<T> s;
  GkaChunkAdjoint<T> g;
  Matrix<T> H0buf, S0buf, H0t, X, Xrm1, Qt, dO, dQt, dX, dSq, dHe, dSe, t1, t2;
  Matrix<T> xi, xim1, xim2, ax, dxi, dxi_next, dxi_prev, atd, u, adj, sched;  // Alg. 2
  std::vector<T> dlam, dfro, psi, dalpha, dg, dbeta, domega, ds, drho2, s_sum;
  std::vector<char> dense;  // tokens whose solve is differentiated on an explicit H_c
  std::vector<Matrix<T>> Hstart, Sstart;
};

// Y += diag(λ) W: the λ_c I part of A_c = H_c + λ_c I on the batched products.
template <class T>
void gka_add_ridge(const std::vector<T>& lam, const Matrix<T>& W, Matrix<T>& Y) {
  for (int c = 0; c < W.rows; ++c)
    for (int i = 0; i < W.cols; ++i) mul_add_to(Y(c, i), lam[c], W(c, i));
}

// Step 4 for the tokens Alg. 2 can reverse (not degenerate, ρ_c ≠ 0): adds to w.dSq,
// w.dlam, w.dfro and the chunk adjoint w.g; marks in w.dense the tokens it leaves to
// gka_chunk_dense_solve_backward.
// flat_reversal: tokens with ρ_c = 0 reversed by Alg. 2 with ξ_{i−2} = ξ_{i−1} instead
// of the dense route (GkaBackwardOptions::chebyshev_flat_reversal).
template <class P>
void gka_chunk_chebyshev_alg2_backward(const Matrix<typename P::acc>& H0, const GkaOptions& opt, bool bounds,
                                       bool flat_reversal, GkaChunkBackwardWork<P>& w) {
  using T = typename P::acc;
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0),
          four = from_double<T>(4.0);
  const Matrix<T>& Kc = w.tk.K;
  const int n = Kc.rows, K = Kc.cols, r = opt.iters;
  const T omega0 = from_double<T>(opt.omega0);
  // The mutants of this step, read once per chunk (their stories: gate/mutants.cpp).
  const bool printed_q_sign = mutated(Mutant::gka_alg2_printed_q_sign);
  const bool recursion_sign_flipped = mutated(Mutant::gka_adjoint_recursion_sign);
  const int last_step = mutated(Mutant::gka_chebyshev_adjoint_step_short) ? 2 : 1;  // the reverse loop's last i
  GkaOptions adjoint_opt = opt;  // Lemma 2's solve: the forward's r steps
  if (mutated(Mutant::gka_adjoint_solve_step_short)) adjoint_opt.iters = std::max(0, r - 1);
  std::vector<T> rho2(static_cast<std::size_t>(n), zero);
  std::vector<char> active(static_cast<std::size_t>(n), 0), flat(static_cast<std::size_t>(n), 0);
  w.s_sum.assign(static_cast<std::size_t>(n), zero);
  w.sched.assign(n, r + 1, zero);
  for (int c = 0; c < n; ++c) {
    if (w.s.degenerate[c]) continue;
    const T L = w.s.fro[c] + w.s.lam[c], mu = w.s.lam[c];
    w.s_sum[c] = L + mu;
    const T rho = (L - mu) / w.s_sum[c];
    if (rho == zero && !flat_reversal) {  // GKA Remark 2: Alg. 2 cannot reverse; the dense route
      w.dense[c] = 1;
      continue;
    }
    // Else with ρ = 0: ν_i = 1 and A_c = λ_c I (H_c = 0) make every iterate q̂/λ_c, so
    // ξ_{i−2} = ξ_{i−1}, and the momentum terms, weighted by ρ², vanish.
    flat[c] = rho == zero;
    active[c] = 1;
    rho2[c] = rho * rho;
    // ω_0..ω_r as the forward's schedule computes them (chunk.hpp, gka_chunk_chebyshev).
    w.sched(c, 0) = omega0;
    for (int i = 1; i <= r; ++i) w.sched(c, i) = four / (four - rho2[c] * w.sched(c, i - 1));
  }
  // dq̂ by Lemma 2: Alg. 1 on (H_cᵀ + λ_c I) y = dx_c for all tokens, batched as the forward.
  w.H0t.assign(K, K, zero);
  for (int i = 0; i < K; ++i)
    for (int j = 0; j < K; ++j) w.H0t(i, j) = H0(j, i);
  gka_chunk_chebyshev<P>(w.H0t, Kc, w.d, w.s, w.dX, adjoint_opt, w.fws, w.adj);
  for (int c = 0; c < n; ++c)
    if (active[c])
      for (int i = 0; i < K; ++i) w.dSq(c, i) += w.adj(c, i);
  // The reverse recursion with the reversed forward, all tokens at once.
  w.xi = w.X;
  w.xim1 = w.Xrm1;
  w.xim2.assign(n, K, zero);
  w.dxi.assign(n, K, zero);
  for (int c = 0; c < n; ++c)
    if (active[c])
      for (int i = 0; i < K; ++i) w.dxi(c, i) = w.dX(c, i);
  w.dxi_next.assign(n, K, zero);
  w.dxi_prev.assign(n, K, zero);
  w.u.assign(n, K, zero);
  w.domega.assign(static_cast<std::size_t>(n), zero);
  w.ds.assign(static_cast<std::size_t>(n), zero);
  w.drho2.assign(static_cast<std::size_t>(n), zero);
  for (int it = r; it >= last_step; --it) {
    // A_c ξ_{i-1} (fp32 operands: see the header).
    gka_state_apply<P>(false, H0, Kc, Kc, w.d, w.xim1, w.ws, w.ax);
    gka_add_ridge(w.s.lam, w.xim1, w.ax);
    for (int c = 0; c < n; ++c) {
      T* u = w.u.row(c);
      T* xm2 = w.xim2.row(c);
      if (!active[c]) {
        std::fill(u, u + K, zero);
        std::fill(xm2, xm2 + K, zero);
        continue;
      }
      const T nu = w.sched(c, it), nu_prev = w.sched(c, it - 1);
      const T s = w.s_sum[c], ci = two * nu / s;
      const T* x = w.xi.row(c);
      const T* xm1 = w.xim1.row(c);
      const T* a = w.ax.row(c);
      const T* q = w.tk.Sq.row(c);
      const T* dd = w.dxi.row(c);
      if (it == 1) {
        std::fill(xm2, xm2 + K, zero);  // ξ_{-1} = 0
      } else if (flat[c]) {
        std::copy(xm1, xm1 + K, xm2);
      } else {
        const T bi = -(nu - one);
        for (int i = 0; i < K; ++i) {  // eq. (54); the print's eqs. (59)/(60) have + c_i q
          const T rest = x[i] - (nu * xm1[i] - ci * a[i]);
          xm2[i] = (printed_q_sign ? rest + ci * q[i] : rest - ci * q[i]) / bi;
        }
      }
      w.dlam[c] -= ci * dot(dd, xm1, K);
      T dci = zero, dwi = w.domega[c];
      for (int i = 0; i < K; ++i) {
        mul_add_to(dci, -dd[i], a[i] - q[i]);
        mul_add_to(dwi, dd[i], xm1[i] - xm2[i]);
        u[i] = -(ci * dd[i]);  // eq. (58): dH_c += u ξ_{i-1}ᵀ
      }
      dwi += two * dci / s;
      w.ds[c] -= dci * ci / s;
      const T nu2 = nu * nu;
      w.domega[c] = dwi * rho2[c] * nu2 / four;
      w.drho2[c] += dwi * nu_prev * nu2 / four;
    }
    gka_state_outer_backward<P>(true, H0, Kc, Kc, w.d, w.u, w.xim1, w.ws, w.g.dH0, w.g.dK, w.g);
    // eq. (56)/(61): dξ_{i-1} = ν_i dξ_i − c_i A_cᵀ dξ_i − (ν_{i+1} − 1) dξ_{i+1}.
    gka_state_apply<P>(false, w.H0t, Kc, Kc, w.d, w.dxi, w.ws, w.atd);
    gka_add_ridge(w.s.lam, w.dxi, w.atd);
    for (int c = 0; c < n; ++c) {
      if (!active[c]) continue;
      const T nu = w.sched(c, it), ci = two * nu / w.s_sum[c];
      for (int i = 0; i < K; ++i) {
        w.dxi_prev(c, i) = nu * w.dxi(c, i) - ci * w.atd(c, i);
        if (it < r) {
          if (recursion_sign_flipped) w.dxi_prev(c, i) += (w.sched(c, it + 1) - one) * w.dxi_next(c, i);
          else w.dxi_prev(c, i) -= (w.sched(c, it + 1) - one) * w.dxi_next(c, i);
        }
      }
    }
    std::swap(w.dxi_next, w.dxi);
    std::swap(w.dxi, w.dxi_prev);
    std::swap(w.xi, w.xim1);
    std::swap(w.xim1, w.xim2);
  }
  if (!bounds) return;
  std::vector<T> sq(static_cast<std::size_t>(K)), unused(static_cast<std::size_t>(K));
  for (int c = 0; c < n; ++c) {
    if (!active[c]) continue;
    const ChebyshevParams<T> cp{w.s.fro[c] + w.s.lam[c], w.s.lam[c], r, omega0};
    std::copy(w.tk.Sq.row(c), w.tk.Sq.row(c) + K, sq.begin());
    const GkaSolveAdjoint<T> sa{unused, nullptr, w.dlam[c], w.dfro[c]};
    gka_chebyshev_bounds_backward(cp, sq, w.dxi.row(c), w.ds[c], w.drho2[c], sa);  // w.dxi: dξ_0
  }
}

// Step 4 for one token on an explicitly formed H_c (the exact and CG solvers, and
// Chebyshev where ρ_c = 0): the sequential form's adjoints (solve_backward.hpp), then
// the dense dH_c carried to H_0, k, ζ, M̃.
template <class P>
void gka_chunk_dense_solve_backward(const Matrix<typename P::acc>& H0, const GkaOptions& opt, bool bounds, int c,
                                    GkaChunkBackwardWork<P>& w) {
  using T = typename P::acc;
  const T zero = from_double<T>(0.0);
  const int K = w.tk.K.cols;
  const std::size_t KK = static_cast<std::size_t>(K) * K;
  gka_chunk_explicit_state<P>(H0, w.tk.K, w.d, c, w.fws, w.fws.hc);
  const T lam = w.s.lam[c];
  std::vector<T> A(w.fws.hc.a), sq(w.tk.Sq.row(c), w.tk.Sq.row(c) + K), x(w.X.row(c), w.X.row(c) + K),
      dx(w.dX.row(c), w.dX.row(c) + K), dsq(static_cast<std::size_t>(K), zero), dHc(KK, zero);
  for (int i = 0; i < K; ++i) A[static_cast<std::size_t>(i) * K + i] += lam;
  auto apply = [&](const T* xin, T* y) {
    for (int i = 0; i < K; ++i) y[i] = dot(w.fws.hc.row(i), xin, K) + lam * xin[i];
  };
  auto apply_t = [&](const T* xin, T* y) {
    for (int i = 0; i < K; ++i) {
      T acc = zero;
      for (int j = 0; j < K; ++j) mul_add_to(acc, w.fws.hc(j, i), xin[j]);
      y[i] = acc + lam * xin[i];
    }
  };
  T dlam = zero, dfro = zero;
  const GkaSolveAdjoint<T> sa{dsq, dHc.data(), dlam, dfro};
  if (opt.solver == GkaSolver::exact) {
    gka_exact_solve_backward(A, K, x, dx, sa);
  } else if (opt.solver == GkaSolver::cg) {
    CgTrace<T> trace;
    conjugate_gradient(apply, sq.data(), K, opt.iters, &trace);
    gka_cg_backward(apply_t, K, trace, dx, sa);
  } else {
    const ChebyshevParams<T> cp{w.s.fro[c] + lam, lam, opt.iters, from_double<T>(opt.omega0)};
    const ChebyshevResult<T> ch = chebyshev_forward(apply, sq.data(), K, cp, true);
    gka_chebyshev_unrolled_backward(apply_t, sq, cp, ch, dx, bounds, sa);
  }
  for (int i = 0; i < K; ++i) w.dSq(c, i) += dsq[i];
  w.dlam[c] += dlam;
  w.dfro[c] += dfro;
  gka_dense_state_backward(H0, w.tk.K, w.d, c, dHc, w.g);
}

// Where one (b, h) sequence's gradients go (rows of [B,T,H,·] tensors).
template <class T>
struct GkaSeqGrads {
  SeqView<T> dq, dk, dv, dg, dbeta, dalpha;  // dbeta, dalpha: base null when absent
};

// One (b, h) sequence. H, S: the initial states (acc). dH, dS: on entry ∂L/∂ of the
// final states (narrowed cotangents), on exit ∂L/∂ of the initial ones.
template <class P>
void gka_chunk_sequence_backward(const GkaInputs<typename P::acc>& in, const GkaOptions& opt,
                                 const GkaBackwardOptions& bopt, const typename P::acc& scale, int chunk_size,
                                 std::int64_t b, std::int64_t h, Matrix<typename P::acc> H, Matrix<typename P::acc> S,
                                 SeqView<const typename P::acc> do_, Matrix<typename P::acc>& dH,
                                 Matrix<typename P::acc>& dS, const GkaSeqGrads<typename P::acc>& out,
                                 GkaChunkBackwardWork<P>& w) {
  using T = typename P::acc;
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0),
          a = from_double<T>(opt.a);
  const std::int64_t len = in.q.dim(1);
  const int K = static_cast<int>(in.q.dim(3)), V = static_cast<int>(in.v.dim(3));
  const std::int64_t chunks = (len + chunk_size - 1) / chunk_size;
  // The mutants of the other steps, read once per sequence (gate/mutants.cpp).
  const bool lambda_gradient = !mutated(Mutant::gka_lambda_gradient_dropped);
  const bool dalpha_written = !mutated(Mutant::gka_dalpha_dropped);
  const bool dh_carried = !mutated(Mutant::gka_dh_not_carried);
  // Forward pass over the chunks: the chunk-initial states, by the forward's own
  // state passing.
  w.Hstart.resize(static_cast<std::size_t>(chunks));
  w.Sstart.resize(static_cast<std::size_t>(chunks));
  for (std::int64_t n = 0; n < chunks; ++n) {
    const std::int64_t t0 = n * chunk_size;
    const int c = static_cast<int>(std::min<std::int64_t>(chunk_size, len - t0));
    w.Hstart[static_cast<std::size_t>(n)] = H;
    w.Sstart[static_cast<std::size_t>(n)] = S;
    if (n + 1 == chunks) break;
    gka_load_chunk<P>(in, b, h, t0, c, scale, w.tk);
    gka_chunk_decays(w.tk.g, in.beta ? &w.tk.beta : nullptr, c, w.d);
    gka_chunk_pass_state<P>(w.tk.K, w.tk.V, w.d, w.fws, H, S);
  }
  for (std::int64_t n = chunks - 1; n >= 0; --n) {
    const std::int64_t t0 = n * chunk_size;
    const int c = static_cast<int>(std::min<std::int64_t>(chunk_size, len - t0));
    const int last = c - 1;
    // 1. Recompute, as the forward (chunk.hpp, gka_chunk_sequence).
    gka_load_chunk<P>(in, b, h, t0, c, scale, w.tk);
    gka_chunk_decays(w.tk.g, in.beta ? &w.tk.beta : nullptr, c, w.d);
    const Matrix<T>& H0 = gka_operand<P>(w.Hstart[static_cast<std::size_t>(n)], w.H0buf);
    const Matrix<T>& S0 = gka_operand<P>(w.Sstart[static_cast<std::size_t>(n)], w.S0buf);
    gka_chunk_fro_norms<P>(H0, w.tk.K, w.d, w.fws, w.s.fro);
    gka_chunk_lambdas(opt, w.s);
    if (opt.solver == GkaSolver::exact) {
      gka_chunk_exact<P>(H0, w.tk.K, w.d, w.s, w.tk.Sq, w.fws, w.X);
    } else if (opt.solver == GkaSolver::chebyshev) {
      gka_chunk_chebyshev<P>(H0, w.tk.K, w.d, w.s, w.tk.Sq, opt, w.fws, w.X);
      w.Xrm1 = w.fws.xi_prev;  // ξ_{r-1} (after the forward's last swap)
    } else {
      gka_chunk_cg<P>(H0, w.tk.K, w.d, w.s, w.tk.Sq, opt, w.fws, w.X);
    }
    w.Qt = w.X;
    if (in.alpha)
      for (int t = 0; t < c; ++t)
        for (int i = 0; i < K; ++i) w.Qt(t, i) = w.tk.Sq(t, i) + w.tk.alpha[t] * (w.X(t, i) - w.tk.Sq(t, i));
    w.g.reset(c, K, V, zero);
    // 2. The readout O = diag(ζ) Q̃ S_0 + ((Q̃ Kᵀ) ⊙ M̃ᵀ) V.
    w.dO.assign(c, V, zero);
    for (int t = 0; t < c; ++t)
      for (int j = 0; j < V; ++j) w.dO(t, j) = P::narrow(do_.row(t0 + t)[j]);
    gka_state_apply<P>(true, S0, w.tk.K, w.tk.V, w.d, w.dO, w.ws, w.dQt);
    gka_state_outer_backward<P>(true, S0, w.tk.K, w.tk.V, w.d, w.Qt, w.dO, w.ws, w.g.dS0, w.g.dV, w.g);
    // 3. The α-connection.
    w.dX.assign(c, K, zero);
    w.dSq.assign(c, K, zero);
    w.dalpha.assign(static_cast<std::size_t>(c), zero);
    for (int t = 0; t < c; ++t)
      for (int i = 0; i < K; ++i) {
        if (in.alpha) {
          w.dX(t, i) = w.tk.alpha[t] * w.dQt(t, i);
          w.dSq(t, i) = (one - w.tk.alpha[t]) * w.dQt(t, i);
          if (dalpha_written) mul_add_to(w.dalpha[t], w.dQt(t, i), w.X(t, i) - w.tk.Sq(t, i));
        } else {
          w.dX(t, i) = w.dQt(t, i);
        }
      }
    // 4. The solve (degenerate tokens: x = 0, no gradient through x).
    w.dlam.assign(static_cast<std::size_t>(c), zero);
    w.dfro.assign(static_cast<std::size_t>(c), zero);
    w.dense.assign(static_cast<std::size_t>(c), 0);
    if (opt.solver == GkaSolver::chebyshev) {
      gka_chunk_chebyshev_alg2_backward<P>(H0, opt, bopt.chebyshev_bounds_gradient, bopt.chebyshev_flat_reversal, w);
    } else {
      for (int t = 0; t < c; ++t) w.dense[t] = !w.s.degenerate[t];
    }
    for (int t = 0; t < c; ++t)
      if (w.dense[t]) gka_chunk_dense_solve_backward<P>(H0, opt, bopt.chebyshev_bounds_gradient, t, w);
    // 5. λ_c = a‖H_c‖_F and eq. (5).
    w.psi.assign(static_cast<std::size_t>(c), zero);
    for (int t = 0; t < c; ++t) {
      if (!opt.fixed_lambda && lambda_gradient) w.dfro[t] += a * w.dlam[t];
      if (w.s.fro[t] != zero) w.psi[t] = w.dfro[t] / (two * w.s.fro[t]);
    }
    gka_chunk_fro_norms_backward<P>(H0, w.tk.K, w.d, w.psi, w.ws, w.g);
    // 6. State passing: H_end = ζ_{n-1} H_0 + Σ_j M̃_{j,n-1} k_j k_jᵀ, S_end likewise.
    // (mutant gka-dh-not-carried: a chunk before the last starts from dH_end = 0.)
    if (!dh_carried && n + 1 < chunks) std::fill(dH.a.begin(), dH.a.end(), zero);
    for (std::size_t e = 0; e < dH.a.size(); ++e) mul_add_to(w.g.dH0.a[e], w.d.zeta[last], dH.a[e]);
    for (std::size_t e = 0; e < dS.a.size(); ++e) mul_add_to(w.g.dS0.a[e], w.d.zeta[last], dS.a[e]);
    // ζ_{n-1} decays the running states (acc), not their narrowed operand copies.
    const Matrix<T>& Hrun = w.Hstart[static_cast<std::size_t>(n)];
    const Matrix<T>& Srun = w.Sstart[static_cast<std::size_t>(n)];
    w.g.dzeta[last] += dot(dH.a.data(), Hrun.a.data(), K * K) + dot(dS.a.data(), Srun.a.data(), K * V);
    const Matrix<T>& dHe = gka_operand<P>(dH, w.dHe);
    const Matrix<T>& dSe = gka_operand<P>(dS, w.dSe);
    chunk_gemm_nt<P>(w.tk.K, dHe, w.t1);  // rows (dH_end k_j)ᵀ
    chunk_gemm_nn<P>(w.tk.K, dHe, w.t2);  // rows (dH_endᵀ k_j)ᵀ
    chunk_gemm_nt<P>(w.tk.V, dSe, w.ws.ck);  // rows (dS_end v_j)ᵀ
    chunk_gemm_nn<P>(w.tk.K, dSe, w.ws.ck2);  // rows (dS_endᵀ k_j)ᵀ
    for (int j = 0; j < c; ++j) {
      const T m = w.d.Mt(j, last);
      const T* k = w.tk.K.row(j);
      for (int i = 0; i < K; ++i) mul_add_to(w.g.dK(j, i), m, w.t1(j, i) + w.t2(j, i) + w.ws.ck(j, i));
      for (int i = 0; i < V; ++i) mul_add_to(w.g.dV(j, i), m, w.ws.ck2(j, i));
      w.g.dMt(j, last) += dot(k, w.t1.row(j), K) + dot(k, w.ws.ck.row(j), K);
    }
    dH = w.g.dH0;
    dS = w.g.dS0;
    // 7. Gates, and the chunk's gradients as written.
    gka_chunk_gates_backward(w.d, w.g, w.dg, in.beta ? &w.dbeta : nullptr);
    for (int t = 0; t < c; ++t) {
      const std::int64_t row = t0 + t;
      for (int i = 0; i < K; ++i) {
        out.dq.row(row)[i] = P::narrow(scale * w.dSq(t, i));
        out.dk.row(row)[i] = P::narrow(w.g.dK(t, i));
      }
      for (int i = 0; i < V; ++i) out.dv.row(row)[i] = P::narrow(w.g.dV(t, i));
      out.dg.at(row) = w.dg[t];
      if (in.beta) out.dbeta.at(row) = P::narrow(w.dbeta[t]);
      if (in.alpha) out.dalpha.at(row) = w.dalpha[t];
    }
  }
}

// GKA backward in chunks of `chunk_size` tokens under arithmetic policy P: the
// gradients of gka_backward (backward.hpp), in P::acc. The Chebyshev solve is
// differentiated by GKA Alg. 2 (bopt.chebyshev is the sequential form's choice and
// is not read); bopt.chebyshev_bounds_gradient as there; checkpoint_every is not
// used (the chunk-initial states are the checkpoints).
template <class P>
void gka_chunk_backward(const GkaInputs<typename P::acc>& in, const GkaOptions& opt, const typename P::acc& scale,
                        int chunk_size, const GkaCotangents<typename P::acc>& cot, GkaGrads<typename P::acc>& gr,
                        const GkaBackwardOptions& bopt = {}) {
  using T = typename P::acc;
  if (chunk_size < 1) throw std::invalid_argument("gka_chunk_backward: chunk size must be at least 1");
  const std::int64_t B = in.q.dim(0), Hn = in.q.dim(2);
  const int K = static_cast<int>(in.q.dim(3)), V = static_cast<int>(in.v.dim(3));
  const T zero = from_double<T>(0.0);
  gr.dq = Tensor<T>(in.q.shape, zero);
  gr.dk = Tensor<T>(in.k.shape, zero);
  gr.dv = Tensor<T>(in.v.shape, zero);
  gr.dg = Tensor<T>(in.g.shape, zero);
  gr.dbeta = in.beta ? Tensor<T>(in.beta->shape, zero) : Tensor<T>();
  gr.dalpha = in.alpha ? Tensor<T>(in.alpha->shape, zero) : Tensor<T>();
  gr.dh0 = Tensor<T>({B, Hn, K, V}, zero);
  gr.dhkk0 = Tensor<T>({B, Hn, K, K}, zero);
  GkaChunkBackwardWork<P> w;
  Matrix<T> H(K, K, zero), S(K, V, zero), dH(K, K, zero), dS(K, V, zero);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hn; ++h) {
      const T* h0 = in.h0 ? state_block(*in.h0, b, h) : nullptr;
      const T* hkk0 = in.hkk0 ? state_block(*in.hkk0, b, h) : nullptr;
      const T* dht = cot.ht ? state_block(*cot.ht, b, h) : nullptr;
      const T* dhkk = cot.hkk ? state_block(*cot.hkk, b, h) : nullptr;
      for (std::size_t e = 0; e < H.a.size(); ++e) {
        H.a[e] = hkk0 ? hkk0[e] : zero;
        dH.a[e] = dhkk ? P::narrow(dhkk[e]) : zero;  // 16-bit inputs
      }
      for (std::size_t e = 0; e < S.a.size(); ++e) {
        S.a[e] = h0 ? h0[e] : zero;
        dS.a[e] = dht ? P::narrow(dht[e]) : zero;
      }
      const GkaSeqGrads<T> out{seq(gr.dq, b, h), seq(gr.dk, b, h), seq(gr.dv, b, h), seq(gr.dg, b, h),
                               in.beta ? seq(gr.dbeta, b, h) : SeqView<T>{nullptr, 0, 0},
                               in.alpha ? seq(gr.dalpha, b, h) : SeqView<T>{nullptr, 0, 0}};
      gka_chunk_sequence_backward<P>(in, opt, bopt, scale, chunk_size, b, h, H, S, seq(cot.o, b, h), dH, dS, out, w);
      std::copy(dH.a.begin(), dH.a.end(), state_block(gr.dhkk0, b, h));
      std::copy(dS.a.begin(), dS.a.end(), state_block(gr.dh0, b, h));
    }
}

}  // namespace ttr
