// The adjoints of the pieces of GKA's chunk form (chunk.hpp), for its chunkwise
// backward (chunk_backward.hpp). Every state a chunk reads has the form
//
//   X_c = ζ_c X_0 + Σ_{j≤c} M̃_{j,c} k_j r_jᵀ      (X = H: r = k;  X = S: r = v)      (GKA eq. (CH), §4.2)
//
// and the chunk touches it only through batched products and eq. (5). Each function
// here is the adjoint of one of those, for all tokens of the chunk at once; the
// results are added to a GkaChunkAdjoint (∂L/∂ of X_0, k, r, ζ, M̃), which
// gka_chunk_gates_backward finally turns into dg and dβ.
//
// Arithmetic policy P: as chunk.hpp, every matrix-product operand is narrowed
// (argument `narrow`); the callers name the exceptions (the reversed Chebyshev pass,
// chunk_backward.hpp). Products accumulate in acc.
#pragma once

#include <cmath>
#include <vector>

#include "reference/core/mutant.hpp"
#include "reference/gka/chunk.hpp"

namespace ttr {

// ∂L/∂ of one chunk's inputs, accumulated by the adjoints below.
template <class T>
struct GkaChunkAdjoint {
  Matrix<T> dH0, dS0;    // K×K, K×V: the chunk-initial states
  Matrix<T> dK, dV;      // n×K, n×V: the chunk's keys and values
  Matrix<T> dMt;         // n×n: ∂L/∂M̃_{j,c} (rows j, columns c; j ≤ c)
  std::vector<T> dzeta;  // ∂L/∂ζ_c
  void reset(int n, int K, int V, const T& zero) {
    dH0.assign(K, K, zero);
    dS0.assign(K, V, zero);
    dK.assign(n, K, zero);
    dV.assign(n, V, zero);
    dMt.assign(n, n, zero);
    dzeta.assign(static_cast<std::size_t>(n), zero);
  }
};

template <class T>
struct GkaChunkBackwardScratch {
  Matrix<T> na, nb, nc;     // narrowed operands
  Matrix<T> cc, cc2, cc3;   // n×n
  Matrix<T> ck, ck2;        // n×K (or n×V)
};

// `m` as a product operand: narrowed (a copy in buf) when `narrow`, else m itself.
template <class P, class T>
const Matrix<T>& gka_operand_if(bool narrow, const Matrix<T>& m, Matrix<T>& buf) {
  return narrow ? gka_operand<P>(m, buf) : m;
}

// A(c, j) ← A(c, j)·M̃_{j,c} for j ≤ c, 0 above (A ⊙ M̃ᵀ, causal), without the forward's
// mutants: the backward's own masks.
template <class T>
void gka_mask_causal(const GkaChunkDecays<T>& d, Matrix<T>& A) {
  const T zero = from_double<T>(0.0);
  for (int c = 0; c < A.rows; ++c)
    for (int j = 0; j < A.cols; ++j) {
      if (j > c) A(c, j) = zero;
      else scale_by(A(c, j), d.Mt(j, c));
    }
}

// Y (n×K), row c = X_c w_c for every token (rows w_c of W):
//   Y = diag(ζ) W X_0ᵀ + ((W Rᵀ) ⊙ M̃ᵀ) K                                       (§4.2)
// With X_0 = H_0, R = K this is chunk.hpp's gka_chunk_matvec; with X_0 = H_0ᵀ it is
// H_cᵀ w_c (k kᵀ is symmetric); with X_0 = S_0, R = V it is S_c w_c, the readout's
// adjoint dq̃_c = S_c do_c.
template <class P>
void gka_state_apply(bool narrow, const Matrix<typename P::acc>& X0, const Matrix<typename P::acc>& Kc,
                     const Matrix<typename P::acc>& R, const GkaChunkDecays<typename P::acc>& d,
                     const Matrix<typename P::acc>& W, GkaChunkBackwardScratch<typename P::acc>& ws,
                     Matrix<typename P::acc>& Y) {
  const Matrix<typename P::acc>& Wn = gka_operand_if<P>(narrow, W, ws.na);
  chunk_gemm_nt<P>(Wn, X0, Y);
  for (int c = 0; c < Y.rows; ++c)
    for (int i = 0; i < Y.cols; ++i) scale_by(Y(c, i), d.zeta[c]);
  chunk_gemm_nt<P>(Wn, R, ws.cc);
  gka_mask_causal(d, ws.cc);
  chunk_gemm_nn<P>(gka_operand_if<P>(narrow, ws.cc, ws.nb), Kc, Y, true);
}

// The adjoint of the states' dependence on their parameters, for rank-one
// cotangents ∂L/∂X_c += u_c w_cᵀ (rows of U, n×K, and W, n×dim r), all tokens at once:
//   dX_0 += (diag(ζ) U)ᵀ W,          dζ_c += u_cᵀ X_0 w_c,
//   dk_j += Σ_c M̃_{j,c} (w_c·r_j) u_c = ((W Rᵀ) ⊙ M̃ᵀ)ᵀ U,
//   dr_j += Σ_c M̃_{j,c} (u_c·k_j) w_c = ((U Kᵀ) ⊙ M̃ᵀ)ᵀ W,
//   dM̃_{j,c} += (u_c·k_j)(w_c·r_j).
// For X = H (R = K) pass dR = g.dK: both key terms land there.
template <class P>
void gka_state_outer_backward(bool narrow, const Matrix<typename P::acc>& X0, const Matrix<typename P::acc>& Kc,
                              const Matrix<typename P::acc>& R, const GkaChunkDecays<typename P::acc>& d,
                              const Matrix<typename P::acc>& U, const Matrix<typename P::acc>& W,
                              GkaChunkBackwardScratch<typename P::acc>& ws, Matrix<typename P::acc>& dX0,
                              Matrix<typename P::acc>& dR, GkaChunkAdjoint<typename P::acc>& g) {
  using T = typename P::acc;
  const int n = U.rows, K = U.cols;
  const Matrix<T>& Un = gka_operand_if<P>(narrow, U, ws.na);
  const Matrix<T>& Wn = gka_operand_if<P>(narrow, W, ws.nb);
  // dζ_c = u_c · (X_0 w_c): row c of W X_0ᵀ is (X_0 w_c)ᵀ.
  chunk_gemm_nt<P>(Wn, X0, ws.ck);
  for (int c = 0; c < n; ++c) g.dzeta[c] += dot(U.row(c), ws.ck.row(c), K);
  // dX_0 += (diag(ζ) U)ᵀ W.
  ws.ck2 = U;
  for (int c = 0; c < n; ++c)
    for (int i = 0; i < K; ++i) scale_by(ws.ck2(c, i), d.zeta[c]);
  chunk_gemm_tn<P>(gka_operand_if<P>(narrow, ws.ck2, ws.nc), Wn, dX0, true);
  // Pu = U Kᵀ, Pw = W Rᵀ (entries (c, j)).
  chunk_gemm_nt<P>(Un, Kc, ws.cc);
  chunk_gemm_nt<P>(Wn, R, ws.cc2);
  for (int c = 0; c < n; ++c)
    for (int j = 0; j <= c; ++j) mul_add_to(g.dMt(j, c), ws.cc(c, j), ws.cc2(c, j));
  gka_mask_causal(d, ws.cc);
  gka_mask_causal(d, ws.cc2);
  chunk_gemm_tn<P>(gka_operand_if<P>(narrow, ws.cc2, ws.nc), Un, g.dK, true);
  chunk_gemm_tn<P>(gka_operand_if<P>(narrow, ws.cc, ws.nc), Wn, dR, true);
}

// The adjoint for a dense cotangent ∂L/∂H_c (K×K) of one token c: the solvers that
// form H_c explicitly (chunk.hpp's exact solver, CG, Chebyshev where ρ = 0):
//   dH_0 += ζ_c dH_c,  dζ_c += ⟨dH_c, H_0⟩,  dk_j += M̃_{j,c} (dH_c + dH_cᵀ) k_j,
//   dM̃_{j,c} += k_jᵀ dH_c k_j   (j ≤ c).
// O(c·K²) per token: not a chunkwise algorithm, as the explicit H_c of the forward.
template <class T>
void gka_dense_state_backward(const Matrix<T>& H0, const Matrix<T>& Kc, const GkaChunkDecays<T>& d, int c,
                              const std::vector<T>& dHc, GkaChunkAdjoint<T>& g) {
  const T zero = from_double<T>(0.0);
  const int K = Kc.cols;
  const std::size_t KK = static_cast<std::size_t>(K) * K;
  for (std::size_t e = 0; e < KK; ++e) mul_add_to(g.dH0.a[e], d.zeta[c], dHc[e]);
  g.dzeta[c] += dot(dHc.data(), H0.a.data(), static_cast<int>(KK));
  std::vector<T> y(static_cast<std::size_t>(K));
  for (int j = 0; j <= c; ++j) {
    const T* k = Kc.row(j);
    T quad = zero;
    for (int p = 0; p < K; ++p) {
      T acc = zero;
      for (int q = 0; q < K; ++q) {
        mul_add_to(acc, dHc[static_cast<std::size_t>(p) * K + q], k[q]);
        mul_add_to(acc, dHc[static_cast<std::size_t>(q) * K + p], k[q]);
      }
      y[p] = acc;
      T row = zero;
      for (int q = 0; q < K; ++q) mul_add_to(row, dHc[static_cast<std::size_t>(p) * K + q], k[q]);
      mul_add_to(quad, k[p], row);
    }
    for (int p = 0; p < K; ++p) mul_add_to(g.dK(j, p), d.Mt(j, c), y[p]);
    g.dMt(j, c) += quad;
  }
}

// The adjoint of ‖H_c‖_F by GKA eq. (5) as chunk.hpp computes it, from ψ_c = ∂L/∂(‖H_c‖²_F)
// (= d‖H_c‖_F / (2‖H_c‖_F); 0 where ‖H_c‖_F = 0):
//   ‖H_c‖² = ζ_c²‖H_0‖² + 2ζ_c Σ_j M̃_{j,c} q_j + Σ_{i,j} M̃_{i,c} M̃_{j,c} G_ij²,  q_j = k_jᵀH_0k_j, G = K Kᵀ
//   dζ_c += ψ_c (2ζ_c‖H_0‖² + 2 Σ_j M̃_{j,c} q_j)
//   dH_0 += (Σ_c 2ψ_c ζ_c²) H_0 + Σ_j dq_j k_j k_jᵀ,   dq_j = Σ_{c≥j} 2ψ_c ζ_c M̃_{j,c}
//   dk_j += dq_j (H_0 + H_0ᵀ) k_j
//   dM̃_{j,c} += ψ_c (2ζ_c q_j + 2 ((G⊙G) M̃)_{j,c})
//   d(G²) = M̃ diag(ψ) M̃ᵀ,  dG = 2 G ⊙ d(G²),  dK += (dG + dGᵀ) K = 2 dG K.
// In exact arithmetic this is the sequential form's dH_c += (d‖H_c‖_F/‖H_c‖_F) H_c
// carried to H_0, k, ζ and M̃ (backward.hpp).
template <class P>
void gka_chunk_fro_norms_backward(const Matrix<typename P::acc>& H0, const Matrix<typename P::acc>& Kc,
                                  const GkaChunkDecays<typename P::acc>& d, const std::vector<typename P::acc>& psi,
                                  GkaChunkBackwardScratch<typename P::acc>& ws, GkaChunkAdjoint<typename P::acc>& g) {
  using T = typename P::acc;
  const T zero = from_double<T>(0.0), two = from_double<T>(2.0);
  const int n = Kc.rows, K = Kc.cols;
  const T h0_sq = dot(H0.a.data(), H0.a.data(), K * K);
  // q_j = k_jᵀ H_0 k_j (row j of K H_0ᵀ is (H_0 k_j)ᵀ), as the forward.
  chunk_gemm_nt<P>(Kc, H0, ws.ck);
  std::vector<T> quad(static_cast<std::size_t>(n)), dquad(static_cast<std::size_t>(n), zero);
  for (int j = 0; j < n; ++j) quad[j] = dot(ws.ck.row(j), Kc.row(j), K);
  // G and (G⊙G) M̃, as the forward.
  chunk_gemm_nt<P>(Kc, Kc, ws.cc);  // G
  ws.cc3 = ws.cc;
  for (T& e : ws.cc3.a) e *= e;  // G⊙G
  chunk_gemm_nn<P>(gka_operand<P>(ws.cc3, ws.na), gka_operand<P>(d.Mt, ws.nb), ws.cc2);
  T dh0_scale = zero;
  for (int c = 0; c < n; ++c) {
    if (psi[c] == zero) continue;
    T cross = zero;
    for (int j = 0; j <= c; ++j) {
      mul_add_to(cross, d.Mt(j, c), quad[j]);
      const T two_psi = two * psi[c];
      g.dMt(j, c) += two_psi * (d.zeta[c] * quad[j] + ws.cc2(j, c));
      mul_add_to(dquad[j], two_psi * d.zeta[c], d.Mt(j, c));
    }
    g.dzeta[c] += two * psi[c] * (d.zeta[c] * h0_sq + cross);
    mul_add_to(dh0_scale, two * psi[c], d.zeta[c] * d.zeta[c]);
  }
  for (std::size_t e = 0; e < H0.a.size(); ++e) mul_add_to(g.dH0.a[e], dh0_scale, H0.a[e]);
  // Σ_j dq_j k_j k_jᵀ, and dk_j += dq_j (H_0 + H_0ᵀ) k_j: rows of K H_0ᵀ and K H_0.
  ws.ck2 = Kc;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < K; ++i) scale_by(ws.ck2(j, i), dquad[j]);
  chunk_gemm_tn<P>(gka_operand<P>(ws.ck2, ws.na), Kc, g.dH0, true);
  chunk_gemm_nn<P>(Kc, H0, ws.ck2);  // row j: (H_0ᵀ k_j)ᵀ
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < K; ++i) mul_add_to(g.dK(j, i), dquad[j], ws.ck(j, i) + ws.ck2(j, i));
  // d(G²) = M̃ diag(ψ) M̃ᵀ, then dK += 2 (2 G ⊙ d(G²)) K.
  ws.cc3 = d.Mt;
  for (int j = 0; j < n; ++j)
    for (int c = 0; c < n; ++c) scale_by(ws.cc3(j, c), psi[c]);
  chunk_gemm_nt<P>(gka_operand<P>(ws.cc3, ws.na), gka_operand<P>(d.Mt, ws.nb), ws.cc2);
  const T four = from_double<T>(4.0);
  for (std::size_t e = 0; e < ws.cc2.a.size(); ++e) ws.cc2.a[e] = four * ws.cc.a[e] * ws.cc2.a[e];
  chunk_gemm_nn<P>(gka_operand<P>(ws.cc2, ws.na), Kc, g.dK, true);
}

// The gates of one chunk from ∂L/∂ζ and ∂L/∂M̃ (M̃_{j,c} = e^{b_c − b_j} β_j, ζ_c = e^{b_c},
// b_c = Σ_{i≤c} g_i):  dβ_j = Σ_{c≥j} dM̃_{j,c} e^{b_c − b_j},
//   db_c += ζ_c dζ_c + Σ_{j<c} dM̃_{j,c} M̃_{j,c},  db_j −= Σ_{c>j} dM̃_{j,c} M̃_{j,c},
//   dg_i = Σ_{c≥i} db_c (a reverse cumulative sum inside the chunk). The diagonal
//   M̃_{c,c} = β_c does not depend on b: its two terms cancel, and are not formed.
// dbeta: null when the layer has no β.
template <class T>
void gka_chunk_gates_backward(const GkaChunkDecays<T>& d, const GkaChunkAdjoint<T>& g, std::vector<T>& dg,
                              std::vector<T>* dbeta) {
  using std::exp;
  const T zero = from_double<T>(0.0);
  const int n = static_cast<int>(d.zeta.size());
  std::vector<T> db(static_cast<std::size_t>(n), zero);
  if (dbeta) dbeta->assign(static_cast<std::size_t>(n), zero);
  for (int c = 0; c < n; ++c) {
    mul_add_to(db[c], d.zeta[c], g.dzeta[c]);
    for (int j = 0; j <= c; ++j) {
      if (j < c) {
        const T term = g.dMt(j, c) * d.Mt(j, c);
        db[c] += term;
        db[j] -= term;
      }
      if (dbeta) mul_add_to((*dbeta)[j], g.dMt(j, c), exp(d.b[c] - d.b[j]));
    }
  }
  dg.assign(static_cast<std::size_t>(n), zero);
  // mutant gka-dg-revcumsum-exclusive: dg_i = Σ_{c>i} db_c, the sum read before adding db_i.
  const bool exclusive = mutated(Mutant::gka_dg_revcumsum_exclusive);
  T run = zero;
  for (int i = n - 1; i >= 0; --i) {
    if (exclusive) dg[i] = run;
    run += db[i];
    if (!exclusive) dg[i] = run;
  }
}

}  // namespace ttr
