// Gated KalmaNet (GKA), sequential form: test-time ridge regression with fading
// memory, solved at every token (GKA eqs. (3), (4), (CH), Alg. 1; Fig. 2).
//
//   H_t = γ_t H_{t-1} + β_t k_t k_tᵀ,   S_t = γ_t S_{t-1} + β_t k_t v_tᵀ        (eq. (CH))
//   λ_t = a ‖H_t‖_F (adaptive, eq. (4)) or a fixed λ
//   x_t solves (H_t + λ_t I) x = scale·q_t: exactly (Cholesky), by `iters` steps of
//       Chebyshev (Alg. 1, L = ‖H_t‖_F + λ_t, μ = λ_t), or by `iters` steps of CG
//   q̃_t = scale·q_t + α_t (x_t − scale·q_t)   (α absent: q̃_t = x_t)
//   o_t = S_tᵀ q̃_t
//
// The paper's state U_t = Σ v kᵀ is V×K and reads y = U x; we keep FLA's K×V
// S_t = U_tᵀ. Eq. (4): the spectrum of H_t + λ_t I lies in [λ_t, ‖H_t‖_F + λ_t],
// so κ_t ≤ (a+1)/a and the Chebyshev bounds above are valid.
// Where H_t = 0 under adaptive λ (no key written yet) the system is 0·x = q:
// x_t = 0, and o_t = 0 since S_t = 0 as well (with h0 = 0).
#pragma once

#include <cmath>
#include <vector>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"
#include "reference/solvers/chebyshev.hpp"
#include "reference/solvers/dense.hpp"
#include "reference/solvers/iterative.hpp"
#include "reference/solvers/spectrum.hpp"

namespace ttr {

enum class GkaSolver { exact, chebyshev, cg };

struct GkaOptions {
  GkaSolver solver = GkaSolver::exact;
  double a = 0.02;         // adaptive ridge strength
  bool fixed_lambda = false;
  double lambda = 0.0;     // when fixed_lambda
  int iters = 30;
  double omega0 = 2.0;
};

template <class T>
struct GkaInputs {
  const Tensor<T>& q;
  const Tensor<T>& k;
  const Tensor<T>& v;
  const Tensor<T>& g;       // log γ, [B,T,H]
  const Tensor<T>* beta;    // write gate [B,T,H], default 1
  const Tensor<T>* alpha;   // α-connection [B,T,H], default absent
  const Tensor<T>* h0;      // S_0 [B,H,K,V]
  const Tensor<T>* hkk0;    // H_0 [B,H,K,K]
};

template <class T>
struct GkaOutputs {
  Tensor<T> o, ht, hkk, lambda, fro, kappa, resid;
};

template <class T>
void gka_sequential(const GkaInputs<T>& in, const GkaOptions& opt, const T& scale, GkaOutputs<T>& out) {
  using std::exp;
  using std::sqrt;
  const std::int64_t B = in.q.dim(0), len = in.q.dim(1), Hn = in.q.dim(2);
  const int K = static_cast<int>(in.q.dim(3)), V = static_cast<int>(in.v.dim(3));
  const T zero = from_double<T>(0.0), one = from_double<T>(1.0);
  const T a = from_double<T>(opt.a), omega0 = from_double<T>(opt.omega0);
  out.o = Tensor<T>({B, len, Hn, V}, zero);
  out.ht = in.h0 ? *in.h0 : Tensor<T>({B, Hn, K, V}, zero);
  out.hkk = in.hkk0 ? *in.hkk0 : Tensor<T>({B, Hn, K, K}, zero);
  for (Tensor<T>* d : {&out.lambda, &out.fro, &out.kappa, &out.resid}) *d = Tensor<T>({B, len, Hn}, zero);
  std::vector<T> sq(K), x(K), Ax(K), qt(K);
  std::vector<double> Hd(static_cast<std::size_t>(K) * K);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hn; ++h) {
      T* S = state_block(out.ht, b, h);
      T* H = state_block(out.hkk, b, h);
      const auto qs = seq(in.q, b, h), ks = seq(in.k, b, h), vs = seq(in.v, b, h), gs = seq(in.g, b, h);
      const auto os = seq(out.o, b, h);
      for (std::int64_t t = 0; t < len; ++t) {
        const T gamma = exp(gs.at(t));
        const T w = in.beta ? seq(*in.beta, b, h).at(t) : one;
        const T* kt = ks.row(t);
        const T* vt = vs.row(t);
        // H and S updates (eq. (CH)): decay, then write the weighted outer product.
        for (int i = 0; i < K; ++i) {
          const T wk = w * kt[i];
          for (int j = 0; j < K; ++j) {
            T& e = H[static_cast<std::size_t>(i) * K + j];
            scale_by(e, gamma);
            mul_add_to(e, wk, kt[j]);
          }
          for (int j = 0; j < V; ++j) {
            T& e = S[static_cast<std::size_t>(i) * V + j];
            scale_by(e, gamma);
            mul_add_to(e, wk, vt[j]);
          }
        }
        const T fro = sqrt(dot(H, H, K * K));
        const T lam = opt.fixed_lambda ? from_double<T>(opt.lambda) : a * fro;
        for (int i = 0; i < K; ++i) sq[i] = scale * qs.row(t)[i];
        auto apply = [&](const T* xin, T* y) {  // y = (H + λI) x
          for (int i = 0; i < K; ++i) y[i] = dot(H + static_cast<std::size_t>(i) * K, xin, K) + lam * xin[i];
        };
        const bool degenerate = lam == zero;  // only H = 0 under adaptive λ (fixed λ > 0)
        if (degenerate) {
          std::fill(x.begin(), x.end(), zero);
        } else if (opt.solver == GkaSolver::exact) {
          std::vector<T> A(H, H + static_cast<std::size_t>(K) * K);
          for (int i = 0; i < K; ++i) A[static_cast<std::size_t>(i) * K + i] += lam;
          if (!cholesky_solve(A, K, sq.data(), x.data()) && !lu_solve(A, K, sq.data(), x.data()))
            std::fill(x.begin(), x.end(), zero / zero);  // singular in this arithmetic: NaN, not a guess
        } else if (opt.solver == GkaSolver::chebyshev) {
          const ChebyshevParams<T> p{fro + lam, lam, opt.iters, omega0};
          x = chebyshev_forward(apply, sq.data(), K, p).xi;
        } else {
          x = conjugate_gradient(apply, sq.data(), K, opt.iters);
        }
        // Diagnostics.
        apply(x.data(), Ax.data());
        T rn = zero, qn = zero;
        for (int i = 0; i < K; ++i) {
          const T r = Ax[i] - sq[i];
          rn += r * r;
          qn += sq[i] * sq[i];
        }
        const auto row = [&](Tensor<T>& d) -> T& { return seq(d, b, h).at(t); };
        row(out.lambda) = lam;
        row(out.fro) = fro;
        row(out.resid) = qn == zero ? sqrt(rn) : sqrt(rn / qn);
        // κ is invariant under scaling H and λ together: divide by ‖H_t‖_F (or λ) in
        // the working precision first, so that a state decayed below float64's
        // range (MPFR carries it) still gives a float64-accurate κ.
        double lam_d = 1.0;
        if (!degenerate) {
          const T norm = fro == zero ? lam : fro;
          for (std::size_t i = 0; i < Hd.size(); ++i) Hd[i] = to_double(H[i] / norm);
          lam_d = to_double(lam / norm);
        }
        const auto [emin, emax] = degenerate ? std::pair<double, double>{0.0, 0.0}
                                             : symmetric_extreme_eigenvalues(Hd.data(), K);
        row(out.kappa) = from_double<T>(degenerate ? 1.0 : (emax + lam_d) / (emin + lam_d));
        // α-connection and readout.
        for (int i = 0; i < K; ++i)
          qt[i] = in.alpha ? sq[i] + seq(*in.alpha, b, h).at(t) * (x[i] - sq[i]) : x[i];
        T* ot = os.row(t);
        for (int j = 0; j < V; ++j) {
          T acc = zero;
          for (int i = 0; i < K; ++i) mul_add_to(acc, qt[i], S[static_cast<std::size_t>(i) * V + j]);
          ot[j] = acc;
        }
      }
    }
}

}  // namespace ttr
