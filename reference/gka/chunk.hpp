// Gated KalmaNet (GKA), chunkwise form (GKA §4.2 "Chunk-wise Implementation",
// eq. (5), App. B.1): the same function as gka_sequential (sequential.hpp), computed
// the way a chunked kernel computes it. The sequence is cut into chunks of C tokens
// (the last one may be shorter; C = 1 and C ≥ T are legal). For one chunk with
// chunk-initial states H_0 (K×K) and S_0 (K×V), log-gates g_1..g_n and write gates β:
//
//   b_c = Σ_{i≤c} g_i,  ζ_c = exp(b_c),  M̃_{j,c} = exp(b_c − b_j) β_j  (j ≤ c; 0 otherwise)
//   H_c = ζ_c H_0 + Σ_j M̃_{j,c} k_j k_jᵀ,   S_c = ζ_c S_0 + Σ_j M̃_{j,c} k_j v_jᵀ
//
// (GKA's M with the write gate folded in; ζ_c/ζ_j is taken as exp(b_c − b_j) ≤ 1 from
// the cumulative log-gates, which neither overflows nor divides by an underflowed ζ_j.)
// Nothing per token is materialised by the solvers:
//   ‖H_c‖²_F = ζ_c²‖H_0‖²_F + 2ζ_c Σ_j M̃_{j,c} k_jᵀH_0k_j + column-sum(((G⊙G) M̃) ⊙ M̃)_c,
//       G = K Kᵀ (the Gram matrix of the chunk's keys)                          (GKA eq. (5))
//   H_c ξ_c for all c at once: rows of diag(ζ) Ξ H_0ᵀ + ((Ξ Kᵀ) ⊙ M̃ᵀ) K        (§4.2)
//   O = diag(ζ) Q̃ S_0 + ((Q̃ Kᵀ) ⊙ M̃ᵀ) V                                       (§4.2)
//   H_[t+1] = ζ_n H_0 + Σ_j M̃_{j,n} k_j k_jᵀ, S_[t+1] likewise with v_j          (state passing)
// λ_c = a‖H_c‖_F (eq. (4)) or a fixed λ. The Chebyshev iterations (Alg. 1, exactly as
// chebyshev_forward: L = ‖H_c‖_F + λ_c, μ = λ_c, ξ_{-1} = 0, ξ_0 = 2q/(L+μ), weights
// from ω_0 = omega0) and CG (from 0, as conjugate_gradient) run for all tokens of a
// chunk together, each token with its own scalars, on the batched products above.
// Degenerate tokens (λ_c = 0: H_c = 0 under adaptive λ) get x_c = 0 as in the
// sequential form. With an arithmetic that does not narrow, every output is an exact
// reformulation of the sequential recurrence (equal up to rounding in acc).
//
// Not chunkwise, and said so where they are computed: the `exact` solver and the κ
// diagnostic form H_c explicitly per token (from the chunk state, O(C·K²) per token);
// a kernel would not, and κ is no part of the kernel's output.
//
// Arithmetic policy P (reference/core/policy.hpp): everything is computed in P::acc;
// P::narrow rounds to the 16-bit storage/operand format what a bf16 tensor-core kernel
// holds in 16 bits:
//   - the inputs q, k, v (the gates g, β, α stay in acc, as model code passes them);
//   - every matrix-product operand: Ξ (the iterate, before each H ξ product), the
//     per-chunk states H_[t], S_[t] as read by the chunk (the running states carried
//     between chunks stay in acc), G⊙G and M̃ in eq. (5), the masked products
//     (Ξ Kᵀ)⊙M̃ᵀ and (Q̃ Kᵀ)⊙M̃ᵀ, Q̃, and the decayed keys M̃_{j,·} k_j of the
//     explicit H_c and of the state passing; products accumulate in acc;
//   - the output o.
// Kept in acc: ζ, M̃ as an elementwise factor, the quadratic forms k_jᵀH_0k_j, the
// norms, λ, the solver scalars and vectors (ξ_{i-1}, residuals, q), the final states
// ht and hkk, and the diagnostics.
#pragma once

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "reference/core/matrix.hpp"
#include "reference/core/mutant.hpp"
#include "reference/core/policy.hpp"
#include "reference/family/chunk_common.hpp"  // chunk_gemm_*: the products under P
#include "reference/gka/sequential.hpp"

namespace ttr {

// The gate factors of one chunk of n tokens: ζ_c and M̃_{j,c} (rows j, columns c).
template <class T>
struct GkaChunkDecays {
  std::vector<T> b;     // b_c = Σ_{i≤c} log γ_i
  std::vector<T> zeta;  // ζ_c = exp(b_c)
  Matrix<T> Mt;         // M̃_{j,c} = exp(b_c − b_j) β_j for j ≤ c, 0 for j > c
};

// Buffers of the chunk computations, sized by the first chunk and reused by the
// others (no allocation in the inner loops beyond MPFR's expression temporaries).
template <class T>
struct GkaChunkScratch {
  Matrix<T> narrow_a, narrow_b;  // narrowed copies of product operands
  Matrix<T> cc, cc2;             // C×C: Ξ Kᵀ, G⊙G, (G⊙G) M̃
  Matrix<T> ck;                  // C×K: K H_0ᵀ, decayed keys
  Matrix<T> y;                   // C×K: the batched products H_c ξ_c
  Matrix<T> xi_prev, r, p;       // C×K: solver iterates
  Matrix<T> hc;                  // K×K: an explicitly formed H_c
  std::vector<T> quad, rho2, omega, l_plus_mu, rr, ap;
  std::vector<char> active;
};

// `m` as a product operand: m itself when P does not narrow, else a narrowed copy in buf.
template <class P, class T>
const Matrix<T>& gka_operand(const Matrix<T>& m, Matrix<T>& buf) {
  if constexpr (!P::narrows) {
    return m;
  } else {
    buf.rows = m.rows;
    buf.cols = m.cols;
    buf.a.resize(m.a.size());
    for (std::size_t i = 0; i < m.a.size(); ++i) buf.a[i] = P::narrow(m.a[i]);
    return buf;
  }
}

// ζ and M̃ of a chunk from its log-gates g_c and write gates β_c (beta null: β = 1).
template <class T>
void gka_chunk_decays(const std::vector<T>& g, const std::vector<T>* beta, int n, GkaChunkDecays<T>& d) {
  using std::exp;
  const T zero = from_double<T>(0.0);
  d.b.resize(static_cast<std::size_t>(n));
  d.zeta.resize(static_cast<std::size_t>(n));
  T cum = zero;
  for (int c = 0; c < n; ++c) {
    cum += g[c];
    d.b[c] = cum;
    d.zeta[c] = exp(cum);
  }
  d.Mt.assign(n, n, zero);
  for (int j = 0; j < n; ++j)
    for (int c = j; c < n; ++c) {
      d.Mt(j, c) = exp(d.b[c] - d.b[j]);  // ζ_c/ζ_j ≤ 1 without dividing
      if (beta) scale_by(d.Mt(j, c), (*beta)[j]);
    }
}

// ‖H_c‖_F for every token c of the chunk by GKA eq. (5), without forming H_c:
//   ‖H_c‖² = ζ_c²‖H_0‖² + 2ζ_c Σ_j M̃_{j,c} k_jᵀH_0k_j + column-sum(((G⊙G) M̃) ⊙ M̃)_c.
// H0: the chunk-initial state as the chunk reads it (narrowed by the caller);
// Kc: the chunk's keys, n×K (rows k_j).
template <class P>
void gka_chunk_fro_norms(const Matrix<typename P::acc>& H0, const Matrix<typename P::acc>& Kc,
                         const GkaChunkDecays<typename P::acc>& d, GkaChunkScratch<typename P::acc>& ws,
                         std::vector<typename P::acc>& fro) {
  using T = typename P::acc;
  using std::sqrt;
  const T zero = from_double<T>(0.0), two = from_double<T>(2.0);
  const int n = Kc.rows, K = Kc.cols;
  fro.resize(static_cast<std::size_t>(n));
  const T h0_sq = dot(H0.a.data(), H0.a.data(), K * K);
  // Quadratic forms k_jᵀ H_0 k_j: row j of K H_0ᵀ is (H_0 k_j)ᵀ.
  chunk_gemm_nt<P>(Kc, H0, ws.ck);
  ws.quad.resize(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) ws.quad[j] = dot(ws.ck.row(j), Kc.row(j), K);
  // (G⊙G) M̃ with G = K Kᵀ: entry (j, c) is Σ_i (k_jᵀk_i)² M̃_{i,c}.
  chunk_gemm_nt<P>(Kc, Kc, ws.cc);
  for (T& e : ws.cc.a) e *= e;
  chunk_gemm_nn<P>(gka_operand<P>(ws.cc, ws.narrow_a), gka_operand<P>(d.Mt, ws.narrow_b), ws.cc2);
  for (int c = 0; c < n; ++c) {
    T cross = zero, intra = zero;
    for (int j = 0; j <= c; ++j) {  // M̃_{j,c} = 0 for j > c
      mul_add_to(cross, d.Mt(j, c), ws.quad[j]);
      mul_add_to(intra, ws.cc2(j, c), d.Mt(j, c));
    }
    // The sum is a squared norm, ≥ 0; only rounding (or a non-PSD H_0 given as
    // input, for the cross term alone) can take it below 0, where sqrt would be NaN.
    T sq = d.zeta[c] * d.zeta[c] * h0_sq + two * d.zeta[c] * cross + intra;
    if (sq < zero) sq = zero;
    fro[c] = sqrt(sq);
  }
  // mutant gka-norm-previous-token: an off-by-one in the column of eq. (5) that
  // token c reads: ‖H_{c−1}‖_F (at the chunk's first token, the chunk-initial
  // ‖H_0‖_F, i.e. the previous token's), so λ_c and Chebyshev's L lag by a token.
  if (mutated(Mutant::gka_norm_previous_token) && n > 0) {
    for (int c = n - 1; c > 0; --c) fro[c] = fro[c - 1];
    fro[0] = sqrt(h0_sq);
  }
}

// A(c, j) ← A(c, j)·M̃_{j,c}, i.e. A ⊙ M̃ᵀ (causal: 0 for j > c).
template <class T>
void gka_mask_by_decays(const GkaChunkDecays<T>& d, Matrix<T>& A) {
  const T zero = from_double<T>(0.0);
  // mutant causal-mask-strict: the mask keeps j < c only, so token c's own key
  // k_c k_cᵀ (and k_c v_cᵀ in the readout) is missing from H_c ξ_c and o_c.
  const int last = mutated(Mutant::causal_mask_strict) ? -1 : 0;  // keep j <= c + last
  for (int c = 0; c < A.rows; ++c)
    for (int j = 0; j < A.cols; ++j) {
      if (j > c + last) A(c, j) = zero;
      else scale_by(A(c, j), d.Mt(j, c));
    }
}

// Y (n×K): row c is H_c ξ_c (λ_c ξ_c not included), for the iterates Ξ (rows ξ_c) of
// all tokens at once (GKA §4.2): diag(ζ) Ξ H_0ᵀ + ((Ξ Kᵀ) ⊙ M̃ᵀ) K. Row c of Ξ H_0ᵀ is
// (H_0 ξ_c)ᵀ, the orientation of the sequential form's row-by-row product.
template <class P>
void gka_chunk_matvec(const Matrix<typename P::acc>& H0, const Matrix<typename P::acc>& Kc,
                      const GkaChunkDecays<typename P::acc>& d, const Matrix<typename P::acc>& Xi,
                      GkaChunkScratch<typename P::acc>& ws, Matrix<typename P::acc>& Y) {
  const Matrix<typename P::acc>& Xn = gka_operand<P>(Xi, ws.narrow_a);
  chunk_gemm_nt<P>(Xn, H0, Y);
  for (int c = 0; c < Y.rows; ++c)
    for (int i = 0; i < Y.cols; ++i) scale_by(Y(c, i), d.zeta[c]);
  chunk_gemm_nt<P>(Xn, Kc, ws.cc);
  gka_mask_by_decays(d, ws.cc);
  chunk_gemm_nn<P>(gka_operand<P>(ws.cc, ws.narrow_b), Kc, Y, true);
}

// Decayed keys of the state at token c: row j is M̃_{j,c} k_j (0 for j > c).
template <class T>
void gka_decayed_keys(const GkaChunkDecays<T>& d, const Matrix<T>& Kc, int c, Matrix<T>& out) {
  out.assign(Kc.rows, Kc.cols, from_double<T>(0.0));
  for (int j = 0; j <= c; ++j)
    for (int i = 0; i < Kc.cols; ++i) {
      out(j, i) = Kc(j, i);
      scale_by(out(j, i), d.Mt(j, c));
    }
}

// H_c = ζ_c H_0 + Σ_{j≤c} M̃_{j,c} k_j k_jᵀ formed explicitly. Not part of the chunk
// algorithm: only the `exact` solver (a dense solve needs the matrix) and the κ
// diagnostic use it.
template <class P>
void gka_chunk_explicit_state(const Matrix<typename P::acc>& H0, const Matrix<typename P::acc>& Kc,
                              const GkaChunkDecays<typename P::acc>& d, int c, GkaChunkScratch<typename P::acc>& ws,
                              Matrix<typename P::acc>& Hc) {
  gka_decayed_keys(d, Kc, c, ws.ck);
  chunk_gemm_tn<P>(gka_operand<P>(ws.ck, ws.narrow_a), Kc, Hc);
  for (std::size_t i = 0; i < Hc.a.size(); ++i) mul_add_to(Hc.a[i], d.zeta[c], H0.a[i]);
}

// State passing (GKA §4.2): H ← ζ_n H + Σ_j M̃_{j,n} k_j k_jᵀ, S ← ζ_n S + Σ_j M̃_{j,n} k_j v_jᵀ
// for the running states H, S (kept in acc).
template <class P>
void gka_chunk_pass_state(const Matrix<typename P::acc>& Kc, const Matrix<typename P::acc>& Vc,
                          const GkaChunkDecays<typename P::acc>& d, GkaChunkScratch<typename P::acc>& ws,
                          Matrix<typename P::acc>& H, Matrix<typename P::acc>& S) {
  const int last = Kc.rows - 1;
  const bool decay_after = mutated(Mutant::decay_after_update);
  const auto decay = [&] {
    for (auto& e : H.a) scale_by(e, d.zeta[last]);
    for (auto& e : S.a) scale_by(e, d.zeta[last]);
  };
  if (!decay_after) decay();
  gka_decayed_keys(d, Kc, last, ws.ck);
  const auto& Kw = gka_operand<P>(ws.ck, ws.narrow_a);
  chunk_gemm_tn<P>(Kw, Kc, H, true);
  chunk_gemm_tn<P>(Kw, Vc, S, true);
  // mutant decay-after-update: the chunk's writes (already decayed to the chunk end
  // by M̃_{j,n}) added before the ζ_n decay, which then decays them once more.
  if (decay_after) decay();
}

// Per-token quantities the solvers need: ‖H_c‖_F, λ_c, and the degenerate tokens.
template <class T>
struct GkaChunkSolve {
  std::vector<T> fro, lam;
  std::vector<char> degenerate;  // λ_c = 0: x_c = 0, as in the sequential form
};

// GKA Alg. 1 for all tokens of the chunk together: token c has its own L = ‖H_c‖_F + λ_c,
// μ = λ_c, ρ_c and weight schedule, and takes exactly chebyshev_forward's steps, on the
// batched products H_c ξ_c.
template <class P>
void gka_chunk_chebyshev(const Matrix<typename P::acc>& H0, const Matrix<typename P::acc>& Kc,
                         const GkaChunkDecays<typename P::acc>& d, const GkaChunkSolve<typename P::acc>& s,
                         const Matrix<typename P::acc>& Sq, const GkaOptions& opt, GkaChunkScratch<typename P::acc>& ws,
                         Matrix<typename P::acc>& X) {
  using T = typename P::acc;
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0),
          four = from_double<T>(4.0);
  const int n = Sq.rows, K = Sq.cols;
  ws.rho2.assign(static_cast<std::size_t>(n), zero);
  // mutant chebyshev-omega0-wrong: the weight schedule ω_i = 4/(4 − ρ²ω_{i−1}) started
  // from ω_0 = 1 (a neutral-looking momentum weight) whatever omega0 is configured:
  // every later weight is off, the iterates converge more slowly and to a different
  // x after a fixed number of iterations.
  const double omega0 = mutated(Mutant::chebyshev_omega0_wrong) ? 1.0 : opt.omega0;
  ws.omega.assign(static_cast<std::size_t>(n), from_double<T>(omega0));
  ws.l_plus_mu.assign(static_cast<std::size_t>(n), zero);
  X.assign(n, K, zero);          // ξ_0 (0 for degenerate tokens, which stay 0)
  ws.xi_prev.assign(n, K, zero);  // ξ_{-1}
  for (int c = 0; c < n; ++c) {
    if (s.degenerate[c]) continue;
    const T L = s.fro[c] + s.lam[c], mu = s.lam[c];
    const T rho = (L - mu) / (L + mu);
    ws.rho2[c] = rho * rho;
    ws.l_plus_mu[c] = L + mu;
    const T c0 = two / ws.l_plus_mu[c];
    for (int i = 0; i < K; ++i) X(c, i) = c0 * Sq(c, i);
  }
  for (int it = 1; it <= opt.iters; ++it) {
    gka_chunk_matvec<P>(H0, Kc, d, X, ws, ws.y);
    for (int c = 0; c < n; ++c) {
      if (s.degenerate[c]) continue;
      const T w = four / (four - ws.rho2[c] * ws.omega[c]);  // weight schedule
      ws.omega[c] = w;
      const T ci = two * w / ws.l_plus_mu[c];
      for (int i = 0; i < K; ++i) {
        const T ax = ws.y(c, i) + s.lam[c] * X(c, i);
        // grad step + momentum, written over ξ_{i-2} (read first)
        ws.xi_prev(c, i) = X(c, i) - ci * (ax - Sq(c, i)) + (w - one) * (X(c, i) - ws.xi_prev(c, i));
      }
    }
    std::swap(X, ws.xi_prev);
  }
}

// Conjugate gradient for all tokens of the chunk together, each as conjugate_gradient
// runs it: from 0, stopping where its residual or its pᵀAp is exactly 0.
template <class P>
void gka_chunk_cg(const Matrix<typename P::acc>& H0, const Matrix<typename P::acc>& Kc,
                  const GkaChunkDecays<typename P::acc>& d, const GkaChunkSolve<typename P::acc>& s,
                  const Matrix<typename P::acc>& Sq, const GkaOptions& opt, GkaChunkScratch<typename P::acc>& ws,
                  Matrix<typename P::acc>& X) {
  using T = typename P::acc;
  const T zero = from_double<T>(0.0);
  const int n = Sq.rows, K = Sq.cols;
  X.assign(n, K, zero);
  ws.r = Sq;
  ws.p = Sq;
  ws.rr.resize(static_cast<std::size_t>(n));
  ws.active.resize(static_cast<std::size_t>(n));
  ws.ap.resize(static_cast<std::size_t>(K));
  int n_active = 0;
  for (int c = 0; c < n; ++c) {
    ws.rr[c] = dot(ws.r.row(c), ws.r.row(c), K);
    ws.active[c] = !s.degenerate[c] && ws.rr[c] != zero;
    n_active += ws.active[c];
  }
  const auto stop = [&](int c) {
    ws.active[c] = 0;
    --n_active;
  };
  for (int it = 0; it < opt.iters && n_active > 0; ++it) {
    gka_chunk_matvec<P>(H0, Kc, d, ws.p, ws, ws.y);
    for (int c = 0; c < n; ++c) {
      if (!ws.active[c]) continue;
      T* p = ws.p.row(c);
      T* r = ws.r.row(c);
      T* x = X.row(c);
      for (int i = 0; i < K; ++i) ws.ap[i] = ws.y(c, i) + s.lam[c] * p[i];
      const T pAp = dot(p, ws.ap.data(), K);
      if (pAp == zero) {
        stop(c);
        continue;
      }
      const T alpha = ws.rr[c] / pAp;
      for (int i = 0; i < K; ++i) {
        x[i] += alpha * p[i];
        r[i] -= alpha * ws.ap[i];
      }
      const T rr_new = dot(r, r, K);
      const T beta = rr_new / ws.rr[c];
      for (int i = 0; i < K; ++i) p[i] = r[i] + beta * p[i];
      ws.rr[c] = rr_new;
      if (rr_new == zero) stop(c);
    }
  }
}

// Dense solves per token on the explicitly formed H_c + λ_c I, with the sequential
// form's Cholesky and LU fallback. Not a chunkwise algorithm: a kernel with
// solver=exact would have to materialise every H_c, which GKA §4.1 avoids.
template <class P>
void gka_chunk_exact(const Matrix<typename P::acc>& H0, const Matrix<typename P::acc>& Kc,
                     const GkaChunkDecays<typename P::acc>& d, const GkaChunkSolve<typename P::acc>& s,
                     const Matrix<typename P::acc>& Sq, GkaChunkScratch<typename P::acc>& ws,
                     Matrix<typename P::acc>& X) {
  using T = typename P::acc;
  const T zero = from_double<T>(0.0);
  const int n = Sq.rows, K = Sq.cols;
  X.assign(n, K, zero);
  for (int c = 0; c < n; ++c) {
    if (s.degenerate[c]) continue;
    gka_chunk_explicit_state<P>(H0, Kc, d, c, ws, ws.hc);
    for (int i = 0; i < K; ++i) ws.hc(i, i) += s.lam[c];
    if (!cholesky_solve(ws.hc.a, K, Sq.row(c), X.row(c)) && !lu_solve(ws.hc.a, K, Sq.row(c), X.row(c)))
      for (int i = 0; i < K; ++i) X(c, i) = zero / zero;  // singular in this arithmetic: NaN, not a guess
  }
}

// κ(H_c + λ_c I) exactly as the sequential form computes it (float64 eigenvalues of
// H_c/‖H_c‖_F), from an explicitly formed H_c: a diagnostic, not part of the kernel.
template <class T>
T gka_kappa(const Matrix<T>& Hc, const T& fro, const T& lam, std::vector<double>& Hd) {
  if (lam == from_double<T>(0.0)) return from_double<T>(1.0);
  const T norm = fro == from_double<T>(0.0) ? lam : fro;
  Hd.resize(Hc.a.size());
  for (std::size_t i = 0; i < Hd.size(); ++i) Hd[i] = to_double(Hc.a[i] / norm);
  const double lam_d = to_double(lam / norm);
  const auto [emin, emax] = symmetric_extreme_eigenvalues(Hd.data(), Hc.rows);
  return from_double<T>((emax + lam_d) / (emin + lam_d));
}

// One chunk's tokens as the kernel loads them: scale·q from the narrowed q, narrowed
// k and v, gates in acc.
template <class T>
struct GkaChunkTokens {
  Matrix<T> Sq, K, V;
  std::vector<T> g, beta, alpha;
};

template <class P>
void gka_load_chunk(const GkaInputs<typename P::acc>& in, std::int64_t b, std::int64_t h, std::int64_t t0, int n,
                    const typename P::acc& scale, GkaChunkTokens<typename P::acc>& tk) {
  using T = typename P::acc;
  const int K = static_cast<int>(in.q.dim(3)), V = static_cast<int>(in.v.dim(3));
  const auto qs = seq(in.q, b, h), ks = seq(in.k, b, h), vs = seq(in.v, b, h), gs = seq(in.g, b, h);
  tk.Sq.assign(n, K, from_double<T>(0.0));
  tk.K.assign(n, K, from_double<T>(0.0));
  tk.V.assign(n, V, from_double<T>(0.0));
  tk.g.resize(static_cast<std::size_t>(n));
  tk.beta.resize(static_cast<std::size_t>(n));
  tk.alpha.resize(static_cast<std::size_t>(n));
  for (int c = 0; c < n; ++c) {
    const std::int64_t t = t0 + c;
    for (int i = 0; i < K; ++i) {
      tk.Sq(c, i) = scale * P::narrow(qs.row(t)[i]);
      tk.K(c, i) = P::narrow(ks.row(t)[i]);
    }
    for (int j = 0; j < V; ++j) tk.V(c, j) = P::narrow(vs.row(t)[j]);
    tk.g[c] = gs.at(t);
    if (in.beta) tk.beta[c] = seq(*in.beta, b, h).at(t);
    if (in.alpha) tk.alpha[c] = seq(*in.alpha, b, h).at(t);
  }
}

// λ_c = a‖H_c‖_F (eq. (4)) or the fixed λ; degenerate where λ_c = 0 (only H_c = 0
// under adaptive λ).
template <class T>
void gka_chunk_lambdas(const GkaOptions& opt, GkaChunkSolve<T>& s) {
  const T zero = from_double<T>(0.0), a = from_double<T>(opt.a);
  const std::size_t n = s.fro.size();
  s.lam.resize(n);
  s.degenerate.resize(n);
  // mutant gka-constant-lambda: λ = 0.25 for every token, MesaNet's regulariser
  // floor, which GKA argues cannot bound κ (MesaNet's reaches 500) and replaces by
  // λ_t = a‖H_t‖_F (eq. (4)): a port that hard-codes it ignores `a` and `lambda`.
  const bool constant = mutated(Mutant::gka_constant_lambda);
  // mutant gka-zero-norm-unguarded: no special case for H_c = 0 (then ‖H_c‖_F = 0 and
  // the adaptive λ_c = 0): the solvers run on the zero matrix, and Chebyshev's
  // ρ = (L − μ)/(L + μ) = 0/0 and step 2/(L + μ) = 2/0 turn x_c, then o_c, into
  // NaN. H_c = 0 only where every write up to c vanished — β = 0 (or k = 0) since the
  // sequence start with no hkk0, or all earlier writes decayed to 0 — never on
  // random keys and gates.
  const bool guarded = !mutated(Mutant::gka_zero_norm_unguarded);
  for (std::size_t c = 0; c < n; ++c) {
    s.lam[c] = constant ? from_double<T>(0.25) : opt.fixed_lambda ? from_double<T>(opt.lambda) : a * s.fro[c];
    s.degenerate[c] = guarded && s.lam[c] == zero;
  }
}

// Where one (b, h) sequence's per-token results go.
template <class T>
struct GkaSeqOut {
  SeqView<T> o, lambda, fro, kappa, resid;
};

// resid_c = ‖(H_c + λ_c I) x_c − scale·q_c‖/‖scale·q_c‖ from the batched product, and
// κ_c from an explicitly formed H_c (diagnostic only), as the sequential form defines them.
template <class P>
void gka_chunk_diagnostics(const Matrix<typename P::acc>& H0, const GkaChunkTokens<typename P::acc>& tk,
                           const GkaChunkDecays<typename P::acc>& d, const GkaChunkSolve<typename P::acc>& s,
                           const Matrix<typename P::acc>& X, std::int64_t t0, GkaChunkScratch<typename P::acc>& ws,
                           std::vector<double>& Hd, const GkaSeqOut<typename P::acc>& out) {
  using T = typename P::acc;
  using std::sqrt;
  const T zero = from_double<T>(0.0);
  const int n = X.rows, K = X.cols;
  gka_chunk_matvec<P>(H0, tk.K, d, X, ws, ws.y);
  for (int c = 0; c < n; ++c) {
    T rn = zero, qn = zero;
    for (int i = 0; i < K; ++i) {
      const T r = ws.y(c, i) + s.lam[c] * X(c, i) - tk.Sq(c, i);
      rn += r * r;
      qn += tk.Sq(c, i) * tk.Sq(c, i);
    }
    const std::int64_t t = t0 + c;
    out.lambda.at(t) = s.lam[c];
    out.fro.at(t) = s.fro[c];
    out.resid.at(t) = qn == zero ? sqrt(rn) : sqrt(rn / qn);
    if (!s.degenerate[c]) gka_chunk_explicit_state<P>(H0, tk.K, d, c, ws, ws.hc);
    out.kappa.at(t) = gka_kappa(ws.hc, s.fro[c], s.lam[c], Hd);
  }
}

// q̃_c = scale·q_c + α_c (x_c − scale·q_c) (α absent: x_c), then the readout
// O = diag(ζ) Q̃ S_0 + ((Q̃ Kᵀ) ⊙ M̃ᵀ) V, i.e. o_c = S_cᵀ q̃_c for every token (§4.2).
template <class P>
void gka_chunk_readout(const Matrix<typename P::acc>& S0, const GkaChunkTokens<typename P::acc>& tk,
                       const GkaChunkDecays<typename P::acc>& d, bool alpha, Matrix<typename P::acc>& X,
                       std::int64_t t0, GkaChunkScratch<typename P::acc>& ws, const SeqView<typename P::acc>& o) {
  const int n = X.rows, K = X.cols, V = tk.V.cols;
  if (alpha)
    for (int c = 0; c < n; ++c)
      for (int i = 0; i < K; ++i) X(c, i) = tk.Sq(c, i) + tk.alpha[c] * (X(c, i) - tk.Sq(c, i));
  const auto& Qn = gka_operand<P>(X, ws.narrow_a);
  chunk_gemm_nn<P>(Qn, S0, ws.y);
  for (int c = 0; c < n; ++c)
    for (int j = 0; j < V; ++j) scale_by(ws.y(c, j), d.zeta[c]);
  chunk_gemm_nt<P>(Qn, tk.K, ws.cc);
  gka_mask_by_decays(d, ws.cc);
  chunk_gemm_nn<P>(gka_operand<P>(ws.cc, ws.narrow_b), tk.V, ws.y, true);
  for (int c = 0; c < n; ++c)
    for (int j = 0; j < V; ++j) o.row(t0 + c)[j] = P::narrow(ws.y(c, j));
}

// One (b, h) sequence, chunk after chunk; H and S enter as the initial states and
// leave as the final ones.
template <class P>
void gka_chunk_sequence(const GkaInputs<typename P::acc>& in, const GkaOptions& opt, const typename P::acc& scale,
                        int chunk_size, std::int64_t b, std::int64_t h, Matrix<typename P::acc>& H,
                        Matrix<typename P::acc>& S, const GkaSeqOut<typename P::acc>& out) {
  using T = typename P::acc;
  const std::int64_t len = in.q.dim(1);
  GkaChunkTokens<T> tk;
  GkaChunkDecays<T> d;
  GkaChunkScratch<T> ws;
  GkaChunkSolve<T> s;
  Matrix<T> H0buf, S0buf, X;
  std::vector<double> Hd;
  // mutant last-partial-chunk-dropped: a launch grid of T / C chunks (floor, not
  // ceil) skips the last partial chunk: its outputs stay 0 and the states miss it.
  const std::int64_t end = mutated(Mutant::last_partial_chunk_dropped) ? len - len % chunk_size : len;
  // mutant gate-cumsum-not-reset: a global cumsum of the log-gates where a
  // chunk-local one is meant: M̃ (differences b_c − b_j) is unchanged, but
  // ζ_c = exp(b_c) decays the chunk-initial H_0, S_0 again by every earlier gate.
  const bool global_cumsum = mutated(Mutant::gate_cumsum_not_reset);
  T carried = from_double<T>(0.0);  // Σ of the gates of the earlier chunks (mutant only)
  for (std::int64_t t0 = 0; t0 < end; t0 += chunk_size) {
    using std::exp;
    const int n = static_cast<int>(std::min<std::int64_t>(chunk_size, len - t0));
    gka_load_chunk<P>(in, b, h, t0, n, scale, tk);
    gka_chunk_decays(tk.g, in.beta ? &tk.beta : nullptr, n, d);
    if (global_cumsum) {
      for (int c = 0; c < n; ++c) {
        d.b[c] += carried;
        d.zeta[c] = exp(d.b[c]);
      }
      for (int c = 0; c < n; ++c) carried += tk.g[c];
    }
    // The chunk-initial states as the chunk reads them (16-bit in a bf16 kernel).
    const Matrix<T>& H0 = gka_operand<P>(H, H0buf);
    const Matrix<T>& S0 = gka_operand<P>(S, S0buf);
    gka_chunk_fro_norms<P>(H0, tk.K, d, ws, s.fro);
    gka_chunk_lambdas(opt, s);
    if (opt.solver == GkaSolver::exact) gka_chunk_exact<P>(H0, tk.K, d, s, tk.Sq, ws, X);
    else if (opt.solver == GkaSolver::chebyshev) gka_chunk_chebyshev<P>(H0, tk.K, d, s, tk.Sq, opt, ws, X);
    else gka_chunk_cg<P>(H0, tk.K, d, s, tk.Sq, opt, ws, X);
    gka_chunk_diagnostics<P>(H0, tk, d, s, X, t0, ws, Hd, out);
    gka_chunk_readout<P>(S0, tk, d, in.alpha != nullptr, X, t0, ws, out.o);
    gka_chunk_pass_state<P>(tk.K, tk.V, d, ws, H, S);
  }
}

// GKA forward in chunks of `chunk_size` tokens (C ≥ 1; the last chunk may be shorter)
// under arithmetic policy P; the outputs of gka_sequential (o, ht, hkk, lambda, fro,
// kappa, resid), in P::acc.
template <class P>
void gka_chunk(const GkaInputs<typename P::acc>& in, const GkaOptions& opt, const typename P::acc& scale,
               int chunk_size, GkaOutputs<typename P::acc>& out) {
  using T = typename P::acc;
  if (chunk_size < 1) throw std::invalid_argument("gka_chunk: chunk size must be at least 1");
  const std::int64_t B = in.q.dim(0), len = in.q.dim(1), Hn = in.q.dim(2);
  const int K = static_cast<int>(in.q.dim(3)), V = static_cast<int>(in.v.dim(3));
  const T zero = from_double<T>(0.0);
  out.o = Tensor<T>({B, len, Hn, V}, zero);
  out.ht = in.h0 ? *in.h0 : Tensor<T>({B, Hn, K, V}, zero);
  out.hkk = in.hkk0 ? *in.hkk0 : Tensor<T>({B, Hn, K, K}, zero);
  for (Tensor<T>* diag : {&out.lambda, &out.fro, &out.kappa, &out.resid}) *diag = Tensor<T>({B, len, Hn}, zero);
  Matrix<T> H(K, K, zero), S(K, V, zero);  // running states, in acc
  // mutant h0-ignored: the kernel never loads its initial states (h0, hkk0) and
  // starts from zero.
  const bool load_initial = !mutated(Mutant::h0_ignored);
  // mutant state-leaks-across-heads: a persistent kernel that does not reset its
  // state registers between work items starts every (batch, head) after the first
  // from the final states of the one before.
  const bool leak = mutated(Mutant::state_leaks_across_heads);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hn; ++h) {
      T* ht = state_block(out.ht, b, h);
      T* hkk = state_block(out.hkk, b, h);
      if (!(leak && b + h > 0)) {
        if (load_initial) {
          std::copy(hkk, hkk + H.a.size(), H.a.begin());
          std::copy(ht, ht + S.a.size(), S.a.begin());
        } else {
          std::fill(H.a.begin(), H.a.end(), zero);
          std::fill(S.a.begin(), S.a.end(), zero);
        }
      }
      const GkaSeqOut<T> so{seq(out.o, b, h), seq(out.lambda, b, h), seq(out.fro, b, h), seq(out.kappa, b, h),
                            seq(out.resid, b, h)};
      gka_chunk_sequence<P>(in, opt, scale, chunk_size, b, h, H, S, so);
      std::copy(H.a.begin(), H.a.end(), hkk);
      std::copy(S.a.begin(), S.a.end(), ht);
    }
}

}  // namespace ttr
