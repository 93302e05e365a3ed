// What forward_ridge.cpp (eqs. (3), (KF)) and forward_state.cpp (eqs. (4), (CH),
// (5), §4.2, docs/layers.md) share: one head of one sequence, its run through the
// reference layer (reference/gka/sequential.hpp), and the state H_t, S_t written
// as sums over tokens with the weights η_{t,i}, ζ_t.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "proofs-checks/gka/forward_support.hpp"
#include "reference/gka/sequential.hpp"

namespace ttr::proofs::gkaf {

using dense::operator*;  // scalar × std::vector
using dense::outer;
using dense::random_vector;
using Mat = dense::Mat<mp>;

// One head of one sequence, in the layer's convention: S is K×V (S = Uᵀ, paper's
// U = Σ v kᵀ is V×K) and o_t = S_tᵀ q̃_t.
struct GkaSeq {
  int T = 0, K = 0, V = 0;
  std::vector<Vec> q, k, v;
  Vec g, beta, alpha;  // log γ_t, write gate β_t, α_t (empty: absent)
  std::optional<Mat> S0, H0;
};

inline GkaSeq random_seq(std::mt19937_64& rng, int T, int K, int V, double gamma_lo, double beta_lo, bool beta) {
  GkaSeq s;
  s.T = T, s.K = K, s.V = V;
  for (int t = 0; t < T; ++t) {
    s.q.push_back(random_vector<mp>(rng, K));
    s.k.push_back(random_vector<mp>(rng, K));
    s.v.push_back(random_vector<mp>(rng, V));
    s.g.push_back(mp(gamma_lo >= 1 ? 0.0 : std::log(unif(rng, gamma_lo, 1.0))));
    if (beta) s.beta.push_back(mp(unif(rng, beta_lo, 1.0)));
  }
  return s;
}

struct LayerRun {
  std::vector<Vec> o;
  Mat ht, hkk;
  Vec kappa;
};

inline LayerRun run_layer(const GkaSeq& s, const GkaOptions& opt, const mp& scale) {
  const std::int64_t T = s.T, K = s.K, V = s.V;
  Tensor<mp> q({1, T, 1, K}, mp(0)), k({1, T, 1, K}, mp(0)), v({1, T, 1, V}, mp(0)), g({1, T, 1}, mp(0));
  Tensor<mp> beta({1, T, 1}, mp(0)), alpha({1, T, 1}, mp(0)), h0({1, 1, K, V}, mp(0)), hkk0({1, 1, K, K}, mp(0));
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < K; ++i) q.data[t * K + i] = s.q[t][i], k.data[t * K + i] = s.k[t][i];
    for (int j = 0; j < V; ++j) v.data[t * V + j] = s.v[t][j];
    g.data[t] = s.g[t];
    if (!s.beta.empty()) beta.data[t] = s.beta[t];
    if (!s.alpha.empty()) alpha.data[t] = s.alpha[t];
  }
  if (s.S0) h0.data = s.S0->values();
  if (s.H0) hkk0.data = s.H0->values();
  const GkaInputs<mp> in{q, k, v, g, s.beta.empty() ? nullptr : &beta, s.alpha.empty() ? nullptr : &alpha,
                         s.S0 ? &h0 : nullptr, s.H0 ? &hkk0 : nullptr};
  GkaOutputs<mp> out;
  gka_sequential(in, opt, scale, out);
  LayerRun r;
  for (int t = 0; t < T; ++t) r.o.emplace_back(out.o.data.begin() + t * V, out.o.data.begin() + (t + 1) * V);
  r.ht = Mat(K, V, out.ht.data);
  r.hkk = Mat(K, K, out.hkk.data);
  r.kappa = out.kappa.data;
  return r;
}

// η_{t,i} = β_i Π_{j=i+1}^{t} γ_j (GKA §4.1 "Adaptive Weighting", with the write
// gate); tokens 0-based, t = number of tokens seen.
inline mp eta(const GkaSeq& s, int t, int i) {
  mp w = s.beta.empty() ? mp(1) : s.beta[i];
  for (int j = i + 1; j < t; ++j) w *= exp(s.g[j]);
  return w;
}
inline mp zeta(const GkaSeq& s, int t) {
  mp z = 1;
  for (int j = 0; j < t; ++j) z *= exp(s.g[j]);
  return z;
}
// H_t = ζ_t H_0 + Σ_i η_{t,i} k_i k_iᵀ and S_t = ζ_t S_0 + Σ_i η_{t,i} k_i v_iᵀ, as sums.
inline Mat dense_H(const GkaSeq& s, int t) {
  Mat H = s.H0 ? zeta(s, t) * *s.H0 : Mat(s.K, s.K);
  for (int i = 0; i < t; ++i) H += outer(eta(s, t, i) * s.k[i], s.k[i]);
  return H;
}
inline Mat dense_S(const GkaSeq& s, int t) {
  Mat S = s.S0 ? zeta(s, t) * *s.S0 : Mat(s.K, s.V);
  for (int i = 0; i < t; ++i) S += outer(eta(s, t, i) * s.k[i], s.v[i]);
  return S;
}

// An entry of GKA's part of the catalogue.
inline Entry make(std::string id, std::string ref, std::string statement, Method m, std::string how, Status st,
                  std::string correction, Evidence (*fn)(const ProofOptions&, const std::string&)) {
  return make_entry(Paper::GKA, std::move(id), std::move(ref), std::move(statement), m, std::move(how), st,
                    std::move(correction), fn);
}

}  // namespace ttr::proofs::gkaf
