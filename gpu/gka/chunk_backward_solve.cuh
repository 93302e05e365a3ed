// Steps 4 and 5 of GKA's chunk backward kernel (gpu/gka/chunk_backward.cu) for one
// chunk, all tokens at once: the Chebyshev solve differentiated by GKA Alg. 2 as
// derived (App. C), and the adjoint of ‖H_c‖_F by eq. (5) — reference/gka/
// chunk_backward.hpp's gka_chunk_chebyshev_alg2_backward and
// chunk_backward_parts.hpp's gka_chunk_fro_norms_backward on the device.
#pragma once

#include <cuda_runtime.h>

#include "gpu/core/mutant.cuh"
#include "gpu/gka/chunk_backward_ops.cuh"

namespace ttr::gpu::gka_chunk_ops {

// The catalogue's Alg. 2 bugs (gate/mutants.cpp, add_gka_backward), read once per chunk.
struct Alg2Mutants {
  bool printed_q_sign, recursion_sign, adjoint_step_short, adjoint_solve_step_short;
  __device__ static Alg2Mutants of(Mutant active) {
    return {mutated(active, Mutant::gka_alg2_printed_q_sign), mutated(active, Mutant::gka_adjoint_recursion_sign),
            mutated(active, Mutant::gka_chebyshev_adjoint_step_short),
            mutated(active, Mutant::gka_adjoint_solve_step_short)};
  }
};

// Step 4. On entry: the chunk recomputed (tk.fro, lam, degen, and lpm, rho2 as the
// forward's Alg. 1 left them), X = ξ_r and Xp = ξ_{r−1}, s.dX = dx, s.dSq = the
// α-connection's part of dq̂. Adds to s.dSq (Lemma 2, eq. (53)), tk.dlam, tk.dfro (the
// bounds, eqs. (62)–(63)) and, through outer_backward for every reversed step
// (eq. (58)), to ∂L/∂(H_0, k, ζ, M̃). Where ρ_c² = 0 (ρ_c = 0, or so small that ν_i = 1
// exactly in fp32, where eq. (54) would divide by 0), Alg. 2 reverses with ξ_{i−2} = ξ_{i−1}.
template <class E>
__device__ void alg2_backward(Chunk<E>& cx, int r, float omega0, const float* X, const float* Xp, Alg2Mutants m) {
  Scratch& s = cx.s;
  Tokens& tk = cx.tk;
  const int n = cx.n, K = cx.K;
  // L + μ and ρ² as the forward's Alg. 1 left them (tk.lpm, tk.rho2); ν_i = ω_i as its
  // schedule computes them.
  if (threadIdx.x < n) {
    const int c = threadIdx.x;
    float* sc = s.sched + c * (r + 1);
    sc[0] = omega0;
    for (int i = 1; i <= r; ++i) sc[i] = 4.0f / (4.0f - tk.rho2[c] * sc[i - 1]);
  }
  __syncthreads();
  {
    // dq̂ by Lemma 2: Alg. 1 on (H_cᵀ + λ_c I) y = dx_c.
    float* A = s.adj;
    float* B = s.t2;
    const int adj_iters = m.adjoint_solve_step_short ? max(0, r - 1) : r;
    cx.chebyshev(true, s.dX, adj_iters, A, B);
    for (int e = threadIdx.x; e < n * K; e += kThreads)
      if (!tk.degen[e / K]) s.dSq[e] += A[e];
  }
  float* xi = s.xi;
  float* xim1 = s.xim1;
  float* xim2 = s.xim2;
  float* dxi = s.dxi;
  float* dxn = s.dxn;
  float* dxp = s.dxp;
  for (int e = threadIdx.x; e < n * K; e += kThreads) {
    const bool act = !tk.degen[e / K];
    xi[e] = X[e];
    xim1[e] = Xp[e];
    xim2[e] = 0.0f;
    dxi[e] = act ? s.dX[e] : 0.0f;
    dxn[e] = 0.0f;
    dxp[e] = 0.0f;
  }
  __syncthreads();
  const int last_step = m.adjoint_step_short ? 2 : 1;
  for (int it = r; it >= last_step; --it) {
    // A_c ξ_{i−1} (fp32 operands).
    cx.apply(s.H0, false, s.Kc, K, xim1, false, true, s.ax);
    // ξ_{i−2} by eq. (54) solved for it; u = −c_i dξ_i.
    for (int e = threadIdx.x; e < n * K; e += kThreads) {
      const int c = e / K;
      if (tk.degen[c]) {
        xim2[e] = 0.0f;
        s.u[e] = 0.0f;
        continue;
      }
      const float* sc = s.sched + c * (r + 1);
      const float nu = sc[it], ci = 2.0f * nu / tk.lpm[c];
      if (it == 1) xim2[e] = 0.0f;  // ξ_{−1} = 0
      else if (tk.rho2[c] == 0.0f) xim2[e] = xim1[e];  // ν_i = 1, b_i = 0: every iterate q̂/λ_c
      else {
        const float rest = xi[e] - (nu * xim1[e] - ci * s.ax[e]);
        xim2[e] = (m.printed_q_sign ? rest + ci * s.Sq[e] : rest - ci * s.Sq[e]) / (-(nu - 1.0f));
      }
      s.u[e] = -(ci * dxi[e]);
    }
    __syncthreads();
    {
      const float* ax = s.ax;
      const float* Sq = s.Sq;
      float* t1 = s.t1;  // rows: ⟨dξ_i, ξ_{i−1}⟩, −⟨dξ_i, Aξ_{i−1} − q̂⟩, ⟨dξ_i, ξ_{i−1} − ξ_{i−2}⟩
      const float* d = dxi;
      const float* x1 = xim1;
      const float* x2 = xim2;
      row_sums(
          n, K, [=](int c, int i) { return d[c * K + i] * x1[c * K + i]; }, [=](int c, float x) { t1[c * 4] = x; });
      row_sums(
          n, K, [=](int c, int i) { return -d[c * K + i] * (ax[c * K + i] - Sq[c * K + i]); },
          [=](int c, float x) { t1[c * 4 + 1] = x; });
      row_sums(
          n, K, [=](int c, int i) { return d[c * K + i] * (x1[c * K + i] - x2[c * K + i]); },
          [=](int c, float x) { t1[c * 4 + 2] = x; });
      if (threadIdx.x < n && !tk.degen[threadIdx.x]) {
        const int c = threadIdx.x;
        const float* sc = s.sched + c * (r + 1);
        const float nu = sc[it], nu_prev = sc[it - 1], sum = tk.lpm[c], ci = 2.0f * nu / sum;
        tk.dlam[c] -= ci * t1[c * 4];
        const float dci = t1[c * 4 + 1];
        float dwi = tk.domega[c] + t1[c * 4 + 2];
        dwi += 2.0f * dci / sum;
        tk.ds[c] -= dci * ci / sum;
        const float nu2 = nu * nu;
        tk.domega[c] = dwi * tk.rho2[c] * nu2 / 4.0f;
        tk.drho2[c] += dwi * nu_prev * nu2 / 4.0f;
      }
      __syncthreads();
    }
    // eq. (58): dH_c += u ξ_{i−1}ᵀ, to H_0, k, ζ, M̃.
    cx.outer_backward(s.H0, s.Kc, K, s.u, xim1, s.gH, s.gK);
    // eq. (56)/(61): dξ_{i−1} = ν_i dξ_i − c_i A_cᵀ dξ_i − (ν_{i+1} − 1) dξ_{i+1}.
    cx.apply(s.H0, true, s.Kc, K, dxi, false, true, s.atd);
    for (int e = threadIdx.x; e < n * K; e += kThreads) {
      const int c = e / K;
      if (tk.degen[c]) {
        dxp[e] = 0.0f;
        continue;
      }
      const float* sc = s.sched + c * (r + 1);
      const float nu = sc[it], ci = 2.0f * nu / tk.lpm[c];
      float d = nu * dxi[e] - ci * s.atd[e];
      if (it < r) {
        const float mom = (sc[it + 1] - 1.0f) * dxn[e];
        d = m.recursion_sign ? d + mom : d - mom;
      }
      dxp[e] = d;
    }
    __syncthreads();
    float* t = dxn;  // rotate: dξ_{i+1} ← dξ_i ← dξ_{i−1}; ξ_i ← ξ_{i−1} ← ξ_{i−2}
    dxn = dxi;
    dxi = dxp;
    dxp = t;
    t = xi;
    xi = xim1;
    xim1 = xim2;
    xim2 = t;
  }
  {
    // The bounds L = ‖H_c‖_F + λ_c, μ = λ_c (dξ_0 in dxi).
    const float* d = dxi;
    const float* Sq = s.Sq;
    float* t1 = s.t1;
    row_sums(
        n, K, [=](int c, int i) { return d[c * K + i] * Sq[c * K + i]; }, [=](int c, float x) { t1[c] = x; });
    if (threadIdx.x < n && !tk.degen[threadIdx.x]) {
      const int c = threadIdx.x;
      const float sum = tk.lpm[c], L = tk.fro[c] + tk.lam[c], mu = tk.lam[c], rho = (L - mu) / sum;
      const float c0 = 2.0f / sum;
      float ds = tk.ds[c] - t1[c] * c0 / sum;
      const float drho = 2.0f * rho * tk.drho2[c];
      ds -= drho * rho / sum;
      const float dL = ds + drho / sum, dmu = ds - drho / sum;
      tk.dfro[c] += dL;
      tk.dlam[c] += dL + dmu;
    }
    __syncthreads();
  }
}

// Step 5: d‖H_c‖_F += a dλ_c (lambda_gradient: the adaptive λ's), then eq. (5)'s adjoint
// from ψ_c = d‖H_c‖_F / (2‖H_c‖_F), to ∂L/∂(H_0, k, ζ, M̃). h0_sq: ‖H_0‖²_F as the forward.
template <class E>
__device__ void fro_norms_backward(Chunk<E>& cx, float h0_sq, float a, bool lambda_gradient) {
  Scratch& s = cx.s;
  Tokens& tk = cx.tk;
  const int n = cx.n, K = cx.K;
  auto nr = [](float x) { return narrow<E>(x); };
  float* psi = tk.step;  // reused
  if (threadIdx.x < kC) {
    const int c = threadIdx.x;
    float df = c < n ? tk.dfro[c] : 0.0f;
    if (c < n && lambda_gradient) df += a * tk.dlam[c];
    psi[c] = c < n && tk.fro[c] != 0.0f ? df / (2.0f * tk.fro[c]) : 0.0f;
  }
  __syncthreads();
  {
    const float* Mt = s.Mt;
    const float* GGM = s.GGM;
    const float* G = s.G;
    float* gMt = s.gMt;
    if (threadIdx.x < n) {
      const int c = threadIdx.x;
      if (psi[c] != 0.0f) {
        float cross = 0.0f;
        const float two_psi = 2.0f * psi[c], z = tk.zeta[c];
        for (int j = 0; j <= c; ++j) {
          cross = fmaf(Mt[j * kC + c], tk.quad[j], cross);
          gMt[j * kC + c] += two_psi * (z * tk.quad[j] + GGM[j * kC + c]);
        }
        tk.dzeta[c] += two_psi * (z * h0_sq + cross);
      }
      const int j = threadIdx.x;  // dq_j = Σ_{c≥j} 2ψ_c ζ_c M̃_{j,c}
      float dq = 0.0f;
      for (int c2 = j; c2 < n; ++c2)
        if (psi[c2] != 0.0f) dq = fmaf(2.0f * psi[c2] * tk.zeta[c2], Mt[j * kC + c2], dq);
      tk.dquad[j] = dq;
    }
    __syncthreads();
    float dh0_scale = 0.0f;  // Σ_c 2ψ_c ζ_c², in token order on every thread
    for (int c = 0; c < n; ++c)
      if (psi[c] != 0.0f) dh0_scale = fmaf(2.0f * psi[c], tk.zeta[c] * tk.zeta[c], dh0_scale);
    const float* Kc = s.Kc;
    const float* H0 = s.H0;
    const float* dquad = tk.dquad;
    float* gH = s.gH;
    // dH_0 += (Σ_c 2ψ_c ζ_c²) H_0 + Σ_j dq_j k_j k_jᵀ
    gemm(
        tk, K, K, n, [=](int i, int j) { return nr(Kc[j * K + i] * dquad[j]); }, [=](int j, int l) { return Kc[j * K + l]; },
        [=](int i, int l, float x) { gH[i * K + l] += fmaf(dh0_scale, H0[i * K + l], x); });
    // dk_j += dq_j (H_0 + H_0ᵀ) k_j: rows of K H_0ᵀ (again: the reverse pass reused t1) and K H_0.
    float* t1 = s.t1;
    float* t2 = s.t2;
    float* gK = s.gK;
    gemm(
        tk, n, K, K, [=](int j, int l) { return Kc[j * K + l]; }, [=](int l, int i) { return H0[i * K + l]; },
        [=](int j, int i, float x) { t1[j * K + i] = x; });
    gemm(
        tk, n, K, K, [=](int j, int l) { return Kc[j * K + l]; }, [=](int l, int i) { return H0[l * K + i]; },
        [=](int j, int i, float x) { t2[j * K + i] = x; });
    for (int e = threadIdx.x; e < n * K; e += kThreads) gK[e] = fmaf(dquad[e / K], t1[e] + t2[e], gK[e]);
    __syncthreads();
    // d(G²) = M̃ diag(ψ) M̃ᵀ, dK += (4 G ⊙ d(G²)) K.
    float* cc = s.cc;
    gemm(
        tk, n, n, n, [=](int j, int c) { return nr(Mt[j * kC + c] * psi[c]); }, [=](int c, int i) { return nr(Mt[i * kC + c]); },
        [=](int j, int i, float x) { cc[j * kC + i] = 4.0f * G[j * kC + i] * x; });
    gemm(
        tk, n, K, n, [=](int j, int l) { return nr(cc[j * kC + l]); }, [=](int l, int i) { return Kc[l * K + i]; },
        [=](int j, int i, float x) { gK[j * K + i] += x; });
  }
}

}  // namespace ttr::gpu::gka_chunk_ops
