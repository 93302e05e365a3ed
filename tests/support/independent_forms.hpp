// Independent second formulations of the layers, written from scratch for the
// tests (they deliberately do not call anything under reference/, whose code they
// check): at MPFR 512 bits
//  * the attention form with cumulative decays (linear_attn / simple_gla / gla);
//  * the transition-matrix form of the delta family with explicit K×K matrices
//      S_t = (I − β_t w_t k_tᵀ) Diag(γ_t) S_{t-1} + β_t w_t v_tᵀ,  o_t = S_tᵀ(scale q_t),
//    with a scalar or per-key decay γ_t = e^{g_t}, an optional Kaczmarz step
//    β̃_t = η_t/(‖k_t‖² + eps), and a write key w_t = k_t or, with the ATK
//    preconditioner, w_t = k̃_t = B_t ⊙ k_t;
//  * the ATK preconditioner (own implementation of the formula, FLA semantics:
//    A is updated before it is used at token t)
//      A_t = e^{g_atk,t} A_{t-1} + β_atk,t k_t²,  r = log(A_t + eps) − c_h,
//      s = r/(1 + |r|),  B_t = x^{−s}  (with pow, where the code uses exp(−log(x)·s));
// and, exactly over the rationals, the linear_attn attention form.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "reference/core/multiprecision.hpp"
#include "reference/core/tensor.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/rational.hpp"

namespace ttr::test {

using MpMat = std::vector<std::vector<mpfr_real>>;

inline std::vector<mpfr_real> mp_row(const Tensor<double>& x, std::int64_t b, std::int64_t t, std::int64_t h) {
  std::vector<mpfr_real> r;
  for (std::int64_t f = 0; f < x.dim(3); ++f) r.emplace_back(x.data[i4(x.shape, b, t, h, f)]);
  return r;
}
// Own normalisation: row / sqrt(‖row‖² + 1e-6) (1e-6 as the double FLA uses).
inline std::vector<mpfr_real> normalised(std::vector<mpfr_real> x) {
  mpfr_real n2 = 0;
  for (const mpfr_real& e : x) n2 += e * e;
  const mpfr_real d = sqrt(n2 + mpfr_real(1e-6));
  for (mpfr_real& e : x) e /= d;
  return x;
}
inline MpMat matmul(const MpMat& a, const MpMat& b) {
  MpMat c(a.size(), std::vector<mpfr_real>(b[0].size(), mpfr_real(0)));
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b[0].size(); ++j)
      for (std::size_t l = 0; l < b.size(); ++l) c[i][j] += a[i][l] * b[l][j];
  return c;
}
// scale <= 0: the default K^-1/2, computed here on its own.
inline mpfr_real scale_or_default(double scale, std::int64_t K) {
  return scale > 0 ? mpfr_real(scale) : mpfr_real(1) / sqrt(mpfr_real(static_cast<double>(K)));
}

// Attention form at 512 bits, with cumulative decays summed in log space once per
// (s, t) pair; g is [B,T,H] (one decay per head) or [B,T,H,K] (per key channel):
//   o_t = scale · Σ_i q_{t,i} [ e^{G_{t,i}} h0_{i,:} + Σ_{s≤t} e^{G_{t,i} − G_{s,i}} k_{s,i} v_s ],
//   G_{t,i} = Σ_{r≤t} g_{r,(i)},  ht = the bracket at t = T−1.
inline TensorMap<mpfr_real> attention_form(const TensorMap<double>& in, double scale_or_default_value) {
  using R = mpfr_real;
  EXPECT_GE(ttr::precision_control<R>::set_bits(512), 512u);
  const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v"), &g = in.at("g");
  const Tensor<double>* h0 = in.count("h0") ? &in.at("h0") : nullptr;
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  const bool per_key = g.shape.size() == 4;
  const R scale = scale_or_default(scale_or_default_value, K);
  TensorMap<R> out;
  out["o"] = Tensor<R>({B, T, H, V}, R(0));
  out["ht"] = Tensor<R>({B, H, K, V}, R(0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      std::vector<std::vector<R>> G(T, std::vector<R>(K));  // G_{t,i} = Σ_{r≤t} g_{r,i}
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t i = 0; i < K; ++i)
          G[t][i] = (t ? G[t - 1][i] : R(0)) +
                    R(per_key ? g.data[i4(g.shape, b, t, h, i)] : g.data[i3(g.shape, b, t, h)]);
      // state_entry(t, i, j) = e^{G_ti} h0_ij + Σ_{s≤t} e^{G_ti − G_si} k_si v_sj
      auto state_entry = [&](std::int64_t t, std::int64_t i, std::int64_t j) {
        R acc = h0 ? R(exp(G[t][i]) * R(h0->data[i4(h0->shape, b, h, i, j)])) : R(0);
        for (std::int64_t s = 0; s <= t; ++s)
          acc += exp(G[t][i] - G[s][i]) * R(k.data[i4(k.shape, b, s, h, i)]) * R(v.data[i4(v.shape, b, s, h, j)]);
        return acc;
      };
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t j = 0; j < V; ++j) {
          R acc = 0;
          for (std::int64_t i = 0; i < K; ++i) acc += scale * R(q.data[i4(q.shape, b, t, h, i)]) * state_entry(t, i, j);
          out["o"].data[i4(out["o"].shape, b, t, h, j)] = acc;
        }
      if (T > 0)
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) out["ht"].data[i4(out["ht"].shape, b, h, i, j)] = state_entry(T - 1, i, j);
    }
  return out;
}

// The ATK preconditioner's configuration (config defaults; center is used only
// when no log_atk_scale tensor is given).
struct AtkParams {
  double x = 1.5, eps = 1e-6, center = -0.2;
};

// One ATK step on the per-channel accumulator A (updated in place); returns the
// write key k̃ = B_t ⊙ k.
inline std::vector<mpfr_real> atk_write_key(std::vector<mpfr_real>& A, const std::vector<mpfr_real>& kt,
                                            const mpfr_real& alpha, const mpfr_real& w, const mpfr_real& x,
                                            const mpfr_real& eps, const mpfr_real& center) {
  std::vector<mpfr_real> kw(kt.size());
  for (std::size_t i = 0; i < kt.size(); ++i) {
    A[i] = alpha * A[i] + w * kt[i] * kt[i];
    const mpfr_real r = log(A[i] + eps) - center;
    const mpfr_real s = r / (1 + abs(r));
    kw[i] = pow(x, -s) * kt[i];
  }
  return kw;
}

struct DeltaParams {
  double scale = -1;  // <= 0: default K^-1/2
  bool l2norm = false;
  std::optional<double> kaczmarz_eps = std::nullopt;  // set: β̃ = beta/(‖k‖² + eps) (beta holds η)
  std::optional<AtkParams> atk = std::nullopt;  // set: write key k̃ from the ATK preconditioner
};

// Transition-matrix form at 512 bits (see the file comment). Inputs q, k, v, g
// ([B,T,H] or per key [B,T,H,K]), beta, optional h0; with atk also g_atk, beta_atk
// and optional initial_A_state, log_atk_scale. Outputs o, ht (and final_A_state).
inline TensorMap<mpfr_real> transition_form(const TensorMap<double>& in, const DeltaParams& p) {
  using R = mpfr_real;
  EXPECT_GE(ttr::precision_control<R>::set_bits(512), 512u);
  const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v"), &g = in.at("g"), &beta = in.at("beta");
  const Tensor<double>* h0 = in.count("h0") ? &in.at("h0") : nullptr;
  const Tensor<double>* A0 = in.count("initial_A_state") ? &in.at("initial_A_state") : nullptr;
  const Tensor<double>* c = in.count("log_atk_scale") ? &in.at("log_atk_scale") : nullptr;
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  const bool per_key = g.shape.size() == 4;
  const R scale = scale_or_default(p.scale, K);
  TensorMap<R> out;
  out["o"] = Tensor<R>({B, T, H, V}, R(0));
  out["ht"] = Tensor<R>({B, H, K, V}, R(0));
  if (p.atk) out["final_A_state"] = Tensor<R>({B, H, K}, R(0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      MpMat S(K, std::vector<R>(V, R(0)));
      if (h0)
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) S[i][j] = R(h0->data[i4(h0->shape, b, h, i, j)]);
      std::vector<R> A(K, R(0));
      if (A0)
        for (std::int64_t i = 0; i < K; ++i) A[i] = R(A0->data[i3(A0->shape, b, h, i)]);
      for (std::int64_t t = 0; t < T; ++t) {
        auto qt = mp_row(q, b, t, h), kt = mp_row(k, b, t, h);
        const auto vt = mp_row(v, b, t, h);
        if (p.l2norm) {
          qt = normalised(qt);
          kt = normalised(kt);
        }
        std::vector<R> kw = kt;  // the write key
        if (p.atk) {
          const auto &g_atk = in.at("g_atk"), &beta_atk = in.at("beta_atk");
          const R center = c ? R(c->data[static_cast<std::size_t>(h)]) : R(p.atk->center);
          kw = atk_write_key(A, kt, exp(R(g_atk.data[i3(g_atk.shape, b, t, h)])),
                             R(beta_atk.data[i3(beta_atk.shape, b, t, h)]), R(p.atk->x), R(p.atk->eps), center);
        }
        std::vector<R> gamma(K);  // decay of state row l
        if (per_key) {
          const auto gl = mp_row(g, b, t, h);
          for (std::int64_t l = 0; l < K; ++l) gamma[l] = exp(gl[l]);
        } else {
          const R gs = exp(R(g.data[i3(g.shape, b, t, h)]));
          for (std::int64_t l = 0; l < K; ++l) gamma[l] = gs;
        }
        R bt = R(beta.data[i3(beta.shape, b, t, h)]);
        if (p.kaczmarz_eps) {
          R energy = 0;
          for (const R& e : kt) energy += e * e;
          bt /= energy + R(*p.kaczmarz_eps);
        }
        MpMat M(K, std::vector<R>(K, R(0)));  // (I − β w kᵀ) Diag(γ): column l scaled by γ_l
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t l = 0; l < K; ++l) M[i][l] = ((i == l ? R(1) : R(0)) - bt * kw[i] * kt[l]) * gamma[l];
        S = matmul(M, S);
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) S[i][j] += bt * kw[i] * vt[j];
        for (std::int64_t j = 0; j < V; ++j) {
          R acc = 0;
          for (std::int64_t i = 0; i < K; ++i) acc += S[i][j] * (scale * qt[i]);
          out["o"].data[i4(out["o"].shape, b, t, h, j)] = acc;
        }
      }
      for (std::int64_t i = 0; i < K; ++i) {
        if (p.atk) out["final_A_state"].data[i3(out["final_A_state"].shape, b, h, i)] = A[i];
        for (std::int64_t j = 0; j < V; ++j) out["ht"].data[i4(out["ht"].shape, b, h, i, j)] = S[i][j];
      }
    }
  return out;
}

// The preconditioned layers (precond_gated_delta_rule, precond_kda) with their
// config defaults: l2norm on, x = 1.5, eps = 1e-6, centre −0.2 (unused when a
// log_atk_scale tensor is given); scale <= 0 is the default K^-1/2.
struct PrecondParams {
  double scale = -1;
  bool l2norm = true;
  double x = 1.5, eps = 1e-6, center = -0.2;
};
inline TensorMap<mpfr_real> precond_transition_form(const TensorMap<double>& in, const PrecondParams& p = {}) {
  return transition_form(in, {.scale = p.scale, .l2norm = p.l2norm, .atk = AtkParams{p.x, p.eps, p.center}});
}

// linear_attn's attention (parallel) form over the rationals, exact:
//   o[b,t,h,:] = scale · ( Σ_i q_{t,i} h0_{i,:} + Σ_{s≤t} (Σ_i q_{t,i} k_{s,i}) v_s )
//   ht[b,h]    = h0 + Σ_s k_s v_sᵀ
inline void linear_attention_form(const Tensor<rational>& q, const Tensor<rational>& k, const Tensor<rational>& v,
                                  const Tensor<rational>* h0, const rational& scale, Tensor<rational>& o,
                                  Tensor<rational>& ht) {
  using Q = rational;
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  o = Tensor<Q>({B, T, H, V}, Q(0));
  ht = Tensor<Q>({B, H, K, V}, Q(0));
  const Shape st{B, H, K, V};
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t j = 0; j < V; ++j) {
          Q acc = 0;
          if (h0)
            for (std::int64_t i = 0; i < K; ++i) acc += q.data[i4(q.shape, b, t, h, i)] * h0->data[i4(st, b, h, i, j)];
          for (std::int64_t s = 0; s <= t; ++s) {
            Q score = 0;
            for (std::int64_t i = 0; i < K; ++i) score += q.data[i4(q.shape, b, t, h, i)] * k.data[i4(k.shape, b, s, h, i)];
            acc += score * v.data[i4(v.shape, b, s, h, j)];
          }
          o.data[i4(o.shape, b, t, h, j)] = scale * acc;
        }
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t j = 0; j < V; ++j) {
          Q acc = h0 ? h0->data[i4(st, b, h, i, j)] : Q(0);
          for (std::int64_t s = 0; s < T; ++s) acc += k.data[i4(k.shape, b, s, h, i)] * v.data[i4(v.shape, b, s, h, j)];
          ht.data[i4(st, b, h, i, j)] = acc;
        }
    }
}

}  // namespace ttr::test
