// Gated KalmaNet (GKA), backward of the sequential form (sequential.hpp), for every
// solver (the per-token solve adjoints are in solve_backward.hpp). Generic over the
// scalar type.
//
// Forward step t (GKA eqs. (CH), (4), Alg. 1), with γ = e^{g_t}, w = β_t (or 1):
//   H_t = γ H_{t-1} + w k kᵀ,  S_t = γ S_{t-1} + w k vᵀ,  f = ‖H_t‖_F,  λ = a f (or fixed),
//   q̂ = scale·q_t,  x solves (H_t + λI) x = q̂,  q̃ = q̂ + α (x − q̂) (α absent: q̃ = x),
//   o_t = S_tᵀ q̃.
// Cotangents do, dht = ∂L/∂S_T, dhkk = ∂L/∂H_T (optional). Adjoint step, t = T..1,
// carrying dS = ∂L/∂S_t and dH = ∂L/∂H_t:
//   dq̃ = S_t do,  dS += q̃ doᵀ;   dx = α dq̃,  dq̂ = (1 − α) dq̃,  dα = ⟨dq̃, x − q̂⟩ (α absent: dx = dq̃)
//   exact solve, implicit differentiation (GKA eq. (6), Lemma 1 eq. (7)), A = H_t + λI:
//     u = A⁻ᵀ dx,  dq̂ += u,  dH −= u xᵀ,  dλ = −⟨u, x⟩
//   Chebyshev (reverse pass over the stored iterates ξ_{-1..r}, GKA App. C.1 eqs.
//   (54)-(58), written for y = A x with A = H + λI applied as the forward applies it):
//     for i = r..1:  dq̂ += c_i dξ_i,  dH −= c_i dξ_i ξ_{i-1}ᵀ,  dλ −= c_i ⟨dξ_i, ξ_{i-1}⟩,
//                    dξ_{i-1} += ω_i dξ_i − c_i Aᵀ dξ_i,  dξ_{i-2} −= (ω_i − 1) dξ_i   (eq. (56))
//     and dq̂ += c_0 dξ_0.  The coefficients depend on the bounds L = f + λ, μ = λ:
//     ρ = (L − μ)/(L + μ), ω_i = 4/(4 − ρ² ω_{i-1}), c_i = 2ω_i/(L + μ), c_0 = 2/(L + μ); with
//       dc_i = −⟨dξ_i, Aξ_{i-1} − q̂⟩ (i ≥ 1), dc_0 = ⟨dξ_0, q̂⟩,
//       dω_i += ⟨dξ_i, ξ_{i-1} − ξ_{i-2}⟩ + 2 dc_i/(L + μ),  dω_{i-1} += dω_i ρ² ω_i²/4,
//       dρ² += dω_i ω_{i-1} ω_i²/4;  with s = L + μ:  ds = −Σ_{i≥0} dc_i c_i/s − dρ ρ/s,
//       dρ = 2ρ dρ²,  dL = ds + dρ/s,  dμ = ds − dρ/s;
//     the exact adjoint adds dL to df and dL + dμ to dλ. GKA App. C.1 holds L, μ
//     constant ("A_i, b_i, c_i depend on some constant terms and ω_i"): pass
//     chebyshev_bounds_gradient = false for that variant.
//   Chebyshev by GKA Alg. 2 as derived (chebyshev = alg2): the same gradient with no
//     iterate stored, dq̂ by Lemma 2 and the rest by reversing the iteration
//     (solve_backward.hpp says where it differs from the print).
//   CG: reverse mode over CG's recorded iterates (solvers/cg_backward.hpp); not
//     the implicit gradient CG(A, dx, r) of GKA Table 1, which Lemma 2 does not
//     cover (CG's α_i, β_i depend on q̂).
//   adaptive λ (eq. (4)):  df += a dλ;   then dH += (df / f) H_t  (f > 0)
//   (H_t, S_t)  dγ = ⟨dH, H_{t-1}⟩ + ⟨dS, S_{t-1}⟩,  dw = kᵀ dH k + kᵀ dS v,
//               dk = w ((dH + dHᵀ) k + dS v),  dv = w dSᵀ k,  dg_t = γ dγ,  dβ_t = dw,
//               dH ← γ dH,  dS ← γ dS;    dh0 = dS_0,  dhkk0 = dH_0.
// Summing the λ path of eq. (7): −a⟨u, x⟩ H_t/f per token, which with dk = (dH + dHᵀ)k
// is Lemma 1's −w_t H_t k (w_t = 2a xᵀu/‖H_t‖_F).
// H is read as a general K×K matrix (its gradient dhkk0 is the one of the entries);
// the Cholesky solve reads one triangle of the symmetric H, so gradients that
// differentiate through a symmetric parametrisation agree after folding (i, j) and (j, i).
// Where λ = 0 (H_t = 0 under adaptive λ) the forward sets x = 0: no gradient flows
// through x there.
//
// Stored vs recomputed (checkpointing): a forward sweep stores (H, S) before every
// C-th token (C = checkpoint_every, default ⌈√T⌉); the adjoint sweep takes the
// segments last to first, re-steps each from its checkpoint keeping its C + 1
// states (the last segment's are kept by the forward sweep itself), and per token
// recomputes f, λ, x (re-solving, or re-running the solver
// with its iterates kept). Memory (⌈T/C⌉ + C + 1)·(K² + K·V) per sequence instead of
// T·(K² + K·V); every state is stepped by the same code from the same values, so
// the gradients are bit for bit those of C = T (one segment: every state kept).
#pragma once

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "reference/gka/sequential.hpp"
#include "reference/gka/solve_backward.hpp"

namespace ttr {

template <class T>
struct GkaCotangents {
  const Tensor<T>& o;         // [B,T,H,V]
  const Tensor<T>* ht;        // [B,H,K,V]
  const Tensor<T>* hkk;       // [B,H,K,K]
};

// dbeta / dalpha are filled when beta / alpha are given; dh0, dhkk0 always.
template <class T>
struct GkaGrads {
  Tensor<T> dq, dk, dv, dg, dbeta, dalpha, dh0, dhkk0;
};

// How the Chebyshev solve is differentiated: the reverse pass over its stored
// iterates, or GKA Alg. 2 as derived (solve_backward.hpp).
enum class GkaChebyshevBackward { unrolled, alg2 };

struct GkaBackwardOptions {
  bool chebyshev_bounds_gradient = true;  // false: GKA App. C.1's constant L, μ
  GkaChebyshevBackward chebyshev = GkaChebyshevBackward::unrolled;
  std::int64_t checkpoint_every = 0;      // C; 0: ⌈√T⌉
  // The chunk backward's tokens with ρ = 0 (a fixed λ, H_c = 0), where Alg. 2 cannot
  // reverse: false, the dense sequential adjoint (chunk_backward.hpp); true, Alg. 2 with
  // ξ_{i−2} = ξ_{i−1} (every iterate is q̂/λ there), the CUDA kernel's route
  // (gpu/gka/chunk_backward.cu), kept here to prove it gives the same gradient.
  bool chebyshev_flat_reversal = false;
};

// The checkpoint spacing used for a sequence of `len` tokens.
inline std::int64_t gka_checkpoint_spacing(std::int64_t len, std::int64_t every) {
  if (every > 0) return std::min(every, std::max<std::int64_t>(len, 1));
  std::int64_t c = 1;
  while (c * c < len) ++c;
  return c;
}

template <class T>
void gka_backward(const GkaInputs<T>& in, const GkaOptions& opt, const T& scale, const GkaCotangents<T>& cot,
                  GkaGrads<T>& gr, const GkaBackwardOptions& bopt = {}) {
  using std::exp;
  using std::sqrt;
  const std::int64_t B = in.q.dim(0), len = in.q.dim(1), Hn = in.q.dim(2);
  const int K = static_cast<int>(in.q.dim(3)), V = static_cast<int>(in.v.dim(3));
  const std::size_t KK = static_cast<std::size_t>(K) * K, KV = static_cast<std::size_t>(K) * V;
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0), two = from_double<T>(2.0);
  const T a = from_double<T>(opt.a), omega0 = from_double<T>(opt.omega0);
  gr.dq = Tensor<T>(in.q.shape, zero);
  gr.dk = Tensor<T>(in.k.shape, zero);
  gr.dv = Tensor<T>(in.v.shape, zero);
  gr.dg = Tensor<T>(in.g.shape, zero);
  gr.dbeta = in.beta ? Tensor<T>(in.beta->shape, zero) : Tensor<T>();
  gr.dalpha = in.alpha ? Tensor<T>(in.alpha->shape, zero) : Tensor<T>();
  gr.dh0 = cot.ht ? *cot.ht : Tensor<T>({B, Hn, K, V}, zero);
  gr.dhkk0 = cot.hkk ? *cot.hkk : Tensor<T>({B, Hn, K, K}, zero);
  auto at = [](int i, int j, int n) { return static_cast<std::size_t>(i) * n + j; };
  const std::int64_t C = gka_checkpoint_spacing(len, bopt.checkpoint_every);
  const std::int64_t segments = (len + C - 1) / C;
  // Checkpoints: (H, S) before tokens 0, C, 2C, ...; the segment being adjoined:
  // its C + 1 states, before its first token and after each of its tokens.
  std::vector<T> Hc(static_cast<std::size_t>(segments) * KK), Sc(static_cast<std::size_t>(segments) * KV);
  std::vector<T> Hs(static_cast<std::size_t>(C + 1) * KK), Ss(static_cast<std::size_t>(C + 1) * KV);
  std::vector<T> H(KK), S(KV), sq(K), x(K), qt(K), dqt(K), dsq(K), dx(K);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hn; ++h) {
      const auto qs = seq(in.q, b, h), ks = seq(in.k, b, h), vs = seq(in.v, b, h), gs = seq(in.g, b, h);
      const auto gate = [&](std::int64_t t) { return in.beta ? seq(*in.beta, b, h).at(t) : one; };
      // H, S ← H_t, S_t from H_{t-1}, S_{t-1} (the forward's operations).
      auto update = [&](std::int64_t t, const T& gamma) {
        const T w = gate(t);
        const T* kt = ks.row(t);
        for (int i = 0; i < K; ++i) {
          const T wk = w * kt[i];
          for (int j = 0; j < K; ++j) {
            scale_by(H[at(i, j, K)], gamma);
            mul_add_to(H[at(i, j, K)], wk, kt[j]);
          }
          for (int j = 0; j < V; ++j) {
            scale_by(S[at(i, j, V)], gamma);
            mul_add_to(S[at(i, j, V)], wk, vs.row(t)[j]);
          }
        }
      };
      const T* H0 = in.hkk0 ? state_block(*in.hkk0, b, h) : nullptr;
      const T* S0 = in.h0 ? state_block(*in.h0, b, h) : nullptr;
      for (std::size_t e = 0; e < KK; ++e) H[e] = H0 ? H0[e] : zero;
      for (std::size_t e = 0; e < KV; ++e) S[e] = S0 ? S0[e] : zero;
      const std::int64_t last0 = (segments - 1) * C;  // the last segment's states are kept here, not re-stepped
      auto keep = [&](std::int64_t slot) {
        std::copy(H.begin(), H.end(), Hs.begin() + static_cast<std::ptrdiff_t>(slot * KK));
        std::copy(S.begin(), S.end(), Ss.begin() + static_cast<std::ptrdiff_t>(slot * KV));
      };
      for (std::int64_t t = 0; t < len; ++t) {
        if (t % C == 0) {
          std::copy(H.begin(), H.end(), Hc.begin() + static_cast<std::ptrdiff_t>(t / C * KK));
          std::copy(S.begin(), S.end(), Sc.begin() + static_cast<std::ptrdiff_t>(t / C * KV));
        }
        if (t >= last0) keep(t - last0);
        update(t, exp(gs.at(t)));
      }
      if (len > 0) keep(len - last0);
      T* dH = state_block(gr.dhkk0, b, h);
      T* dS = state_block(gr.dh0, b, h);
      for (std::int64_t seg = segments - 1; seg >= 0; --seg) {
        const std::int64_t t0 = seg * C, t1 = std::min(len, t0 + C);
        if (seg < segments - 1) {  // re-step from the checkpoint, keeping the C + 1 states
          std::copy(Hc.begin() + static_cast<std::ptrdiff_t>(seg * KK), Hc.begin() + static_cast<std::ptrdiff_t>((seg + 1) * KK), H.begin());
          std::copy(Sc.begin() + static_cast<std::ptrdiff_t>(seg * KV), Sc.begin() + static_cast<std::ptrdiff_t>((seg + 1) * KV), S.begin());
          for (std::int64_t t = t0; t <= t1; ++t) {
            keep(t - t0);
            if (t < t1) update(t, exp(gs.at(t)));
          }
        }
        for (std::int64_t t = t1 - 1; t >= t0; --t) {
          const T* Hp = Hs.data() + (t - t0) * KK;  // H_{t-1}
          const T* Sp = Ss.data() + (t - t0) * KV;
          const T* Ht = Hp + KK;  // H_t, read in place (the next slot)
          const T* St = Sp + KV;
          const T gamma = exp(gs.at(t));
          const T fro = sqrt(dot(Ht, Ht, static_cast<int>(KK)));
          const T lam = opt.fixed_lambda ? from_double<T>(opt.lambda) : a * fro;
          for (int i = 0; i < K; ++i) sq[i] = scale * qs.row(t)[i];
          auto apply = [&](const T* xin, T* y) {  // y = (H + λI) x, as the forward
            for (int i = 0; i < K; ++i) y[i] = dot(Ht + at(i, 0, K), xin, K) + lam * xin[i];
          };
          auto apply_t = [&](const T* xin, T* y) {  // y = (H + λI)ᵀ x
            for (int i = 0; i < K; ++i) {
              y[i] = lam * xin[i];
              for (int j = 0; j < K; ++j) mul_add_to(y[i], Ht[at(j, i, K)], xin[j]);
            }
          };
          const bool degenerate = lam == zero;
          const bool alg2 = opt.solver == GkaSolver::chebyshev && bopt.chebyshev == GkaChebyshevBackward::alg2;
          ChebyshevResult<T> ch;
          CgTrace<T> cg;
          const ChebyshevParams<T> cp{fro + lam, lam, opt.iters, omega0};
          std::vector<T> A;
          if (degenerate) {
            std::fill(x.begin(), x.end(), zero);
          } else if (opt.solver == GkaSolver::exact) {
            A.assign(Ht, Ht + KK);
            for (int i = 0; i < K; ++i) A[at(i, i, K)] += lam;
            if (!cholesky_solve(A, K, sq.data(), x.data()) && !lu_solve(A, K, sq.data(), x.data()))
              std::fill(x.begin(), x.end(), zero / zero);
          } else if (opt.solver == GkaSolver::chebyshev) {
            ch = chebyshev_forward(apply, sq.data(), K, cp, !alg2);
            x = ch.xi;
          } else {
            x = conjugate_gradient(apply, sq.data(), K, opt.iters, &cg);
          }
          const T alpha = in.alpha ? seq(*in.alpha, b, h).at(t) : one;
          for (int i = 0; i < K; ++i) qt[i] = in.alpha ? sq[i] + alpha * (x[i] - sq[i]) : x[i];
          // The readout o = S_tᵀ q̃.
          const T* dot_ = seq(cot.o, b, h).row(t);
          for (int i = 0; i < K; ++i) {
            T acc = zero;
            for (int j = 0; j < V; ++j) {
              mul_add_to(acc, St[at(i, j, V)], dot_[j]);
              mul_add_to(dS[at(i, j, V)], qt[i], dot_[j]);
            }
            dqt[i] = acc;
          }
          // The α-connection.
          T dalpha = zero;
          for (int i = 0; i < K; ++i) {
            if (in.alpha) {
              dx[i] = alpha * dqt[i];
              dsq[i] = (one - alpha) * dqt[i];
              mul_add_to(dalpha, dqt[i], x[i] - sq[i]);
            } else {
              dx[i] = dqt[i];
              dsq[i] = zero;
            }
          }
          if (in.alpha) seq(gr.dalpha, b, h).at(t) = dalpha;
          // The solve.
          T dlam = zero, dfro = zero;
          const GkaSolveAdjoint<T> sa{dsq, dH, dlam, dfro};
          if (degenerate) {
          } else if (opt.solver == GkaSolver::exact) {
            gka_exact_solve_backward(A, K, x, dx, sa);
          } else if (opt.solver == GkaSolver::cg) {
            gka_cg_backward(apply_t, K, cg, dx, sa);
          } else if (!alg2 || !gka_chebyshev_alg2_backward(apply, apply_t, sq, cp, ch.xi, ch.xi_prev, ch.omega.back(),
                                                            dx, bopt.chebyshev_bounds_gradient, sa)) {
            if (alg2) ch = chebyshev_forward(apply, sq.data(), K, cp, true);  // Alg. 2 cannot reverse ρ = 0
            gka_chebyshev_unrolled_backward(apply_t, sq, cp, ch, dx, bopt.chebyshev_bounds_gradient, sa);
          }
          if (!opt.fixed_lambda) dfro += a * dlam;
          if (fro != zero) {
            const T f = dfro / fro;
            for (std::size_t e = 0; e < KK; ++e) mul_add_to(dH[e], f, Ht[e]);
          }
          for (int i = 0; i < K; ++i) seq(gr.dq, b, h).row(t)[i] = scale * dsq[i];
          // H_t = γ H_{t-1} + w k kᵀ,  S_t = γ S_{t-1} + w k vᵀ.
          const T w = gate(t);
          const T* kt = ks.row(t);
          const T* vt = vs.row(t);
          T dgamma = dot(dH, Hp, static_cast<int>(KK)) + dot(dS, Sp, static_cast<int>(KV)), dw = zero;
          T* dkt = seq(gr.dk, b, h).row(t);
          T* dvt = seq(gr.dv, b, h).row(t);
          for (int j = 0; j < V; ++j) dvt[j] = zero;
          for (int i = 0; i < K; ++i) {
            T acc = zero;
            for (int j = 0; j < K; ++j) {
              mul_add_to(acc, dH[at(i, j, K)], kt[j]);
              mul_add_to(acc, dH[at(j, i, K)], kt[j]);
            }
            T sv = zero;
            for (int j = 0; j < V; ++j) {
              mul_add_to(sv, dS[at(i, j, V)], vt[j]);
              mul_add_to(dvt[j], dS[at(i, j, V)], kt[i]);
            }
            // kᵀ dH k = ½ Σ_i k_i ((dH + dHᵀ) k)_i
            mul_add_to(dw, kt[i], acc / two + sv);
            dkt[i] = w * (acc + sv);
          }
          for (int j = 0; j < V; ++j) dvt[j] *= w;
          seq(gr.dg, b, h).at(t) = gamma * dgamma;
          if (in.beta) seq(gr.dbeta, b, h).at(t) = dw;
          for (std::size_t e = 0; e < KK; ++e) scale_by(dH[e], gamma);
          for (std::size_t e = 0; e < KV; ++e) scale_by(dS[e], gamma);
        }
      }
    }
}

}  // namespace ttr
