// GKA §6.4: DeltaNet (eq. (17)) and Gated DeltaNet (eq. (19)) as Kalman filters whose
// error covariance is frozen at Σ = I. The Kalman side is written here from eqs.
// (12)–(13) with explicit matrices (A_t = α_t I, Q_t = I, Σ_{t-1} = I); the thing
// under test is the reference delta rule (reference/family/delta.hpp) with the β_t
// the paper defines. The second equality of (17)/(19) assumes unit-norm keys, as the
// text says; the entries use unit keys and report how far it misses without them.
#include <algorithm>

#include "proofs-checks/gka/forward_support.hpp"
#include "reference/family/delta.hpp"

namespace ttr::proofs {
namespace {

using namespace dense;
using namespace gkaf;
using Mat = dense::Mat<mp>;

Evidence kalman_vs_delta(const ProofOptions& opt, const std::string& id, bool gated) {
  MpPrecision prec(opt.bits);
  auto rng = entry_rng(opt, id);
  const int points = opt.full ? 40 : 4;
  Worst err, gain;
  double unnormalised = 0;  // the second equality with keys of norm in [0.5, 2]
  for (int p = 0; p < points; ++p) {
    const int T = 1 + static_cast<int>(rng() % 10), K = 2 + static_cast<int>(rng() % 5), V = 1 + static_cast<int>(rng() % 3);
    const std::int64_t Tl = T, Kl = K, Vl = V;
    Tensor<mp> q({1, Tl, 1, Kl}, mp(0)), k({1, Tl, 1, Kl}, mp(0)), v({1, Tl, 1, Vl}, mp(0)), beta({1, Tl, 1}, mp(0)),
        g({1, Tl, 1}, mp(0));
    std::vector<Vec> ks, vs, qs;
    Vec r(T), alpha(T);
    for (int t = 0; t < T; ++t) {
      Vec kt = random_vector<mp>(rng, K);
      kt = kt / norm(kt);  // unit-normalised keys (the text's assumption)
      ks.push_back(kt), vs.push_back(random_vector<mp>(rng, V)), qs.push_back(random_vector<mp>(rng, K));
      r[t] = mp(std::exp(unif(rng, std::log(1e-2), std::log(1e2))));
      alpha[t] = gated ? mp(unif(rng, 0.1, 1.0)) : mp(1);
      for (int i = 0; i < K; ++i) q.data[t * K + i] = qs[t][i], k.data[t * K + i] = kt[i];
      for (int j = 0; j < V; ++j) v.data[t * V + j] = vs[t][j];
      // β_t as the paper defines it below (17) / (19).
      beta.data[t] = gated ? 1 / (1 + r[t] / (alpha[t] * alpha[t] + 1)) : 1 / (1 + r[t]);
      g.data[t] = log(alpha[t]);
    }
    const mp scale = mp(unif(rng, 0.1, 1.0));
    Tensor<mp> o, ht;
    delta_forward(gated ? Decay::scalar : Decay::none, q, k, k, v, beta, gated ? &g : nullptr,
                 static_cast<const Tensor<mp>*>(nullptr), scale, o, ht);

    // The Kalman filter (12)-(13) with Σ_{t-1} = I, per channel (columns of Ŝ, K×V).
    Mat S(K, V);
    const std::string w = "point " + std::to_string(p) + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
                          " V=" + std::to_string(V);
    for (int t = 0; t < T; ++t) {
      const Mat A = alpha[t] * Mat::identity(K);  // A_t = α_t I (identity for DeltaNet)
      Mat P = A * A.transpose();                  // P = A Σ Aᵀ + Q with Σ = I; Q = I for GDN, 0 for DeltaNet
      if (gated) P = plus_identity(P, mp(1));
      const Vec Pk = P * ks[t];
      mp den = r[t];
      for (int a = 0; a < K; ++a) den += ks[t][a] * Pk[a];
      Vec G(K);
      for (int a = 0; a < K; ++a) G[a] = Pk[a] / den;  // first expression of (17)/(19)
      // Second expression: k/(1 + r) or k/(1 + r/(α²+1)), unit keys.
      const mp second = gated ? 1 / (1 + r[t] / (alpha[t] * alpha[t] + 1)) : 1 / (1 + r[t]);
      Vec G2(K);
      for (int a = 0; a < K; ++a) G2[a] = second * ks[t][a];
      gain.see(rel_diff_2(G2, G), w + " t=" + std::to_string(t + 1));
      {  // the same with a key of norm c ∈ [0.5, 2]: the assumption matters
        const mp c = mp(unif(rng, 0.5, 2.0));
        const mp kk = c * c;  // kᵀk
        const mp p0 = gated ? alpha[t] * alpha[t] + 1 : mp(1);
        const mp first = p0 / (p0 * kk + r[t]);  // G = first · k
        unnormalised = std::max(unnormalised, to_d(abs(second - first) / first));
      }
      // (12): ŝ_t = A ŝ_{t-1} + G (v − kᵀ A ŝ_{t-1}), per channel.
      const Mat pred = A * S;
      for (int j = 0; j < V; ++j) {
        mp innov = vs[t][j];
        for (int a = 0; a < K; ++a) innov -= ks[t][a] * pred(a, j);
        for (int a = 0; a < K; ++a) S(a, j) = pred(a, j) + G[a] * innov;
      }
      const Vec ot = (scale * S).transpose() * qs[t], ref(o.data.begin() + t * V, o.data.begin() + (t + 1) * V);
      err.see(rel_diff_2(ref, ot), w + " o_t, t=" + std::to_string(t + 1));
    }
    err.see(rel_diff_2(ht.data, S.values()), w + " final state");
  }
  return holds_if(std::max(err.value, gain.value), exact_tolerance(opt.bits),
                  "max rel. |reference delta rule - Kalman filter with Sigma = I| (o_t and state), and of the two "
                  "gain expressions (unit keys)",
                  err.value >= gain.value ? err.where : gain.where,
                  "filter vs delta rule " + num(err.value) + ", gain expressions " + num(gain.value) +
                      "; without unit keys (norm in [0.5,2]) the second equality misses by up to " + num(unnormalised));
}

Entry make(std::string id, std::string ref, std::string statement, std::string how, bool gated) {
  return make_entry(Paper::GKA, std::move(id), std::move(ref), std::move(statement), Method::exact_identity,
                    std::move(how), Status::holds, "",
                    [gated](const ProofOptions& opt, const std::string& id) { return kalman_vs_delta(opt, id, gated); });
}

}  // namespace

std::vector<Entry> gka_forward_kalman_entries() {
  return {
      make("gka.eq17.deltanet_as_kf", "eq. (17)",
           "with Sigma_t = I: G_t = k_t/(k_t^T k_t + r_t) = k_t/(1 + r_t) (unit keys), and (16) becomes DeltaNet "
           "with beta_t = 1/(1 + r_t)",
           "MPFR opt.bits; 4 (full: 40) sequences T<=10, K<=6, V<=3, unit keys, r_t in [1e-2,1e2]: KF (16) with "
           "explicit Sigma = I vs reference delta rule (Decay::none) at every t; holds under the unit-key "
           "assumption the text states",
           false),
      make("gka.eq19.gdn_as_kf", "eq. (19)",
           "with Sigma_{t-1} = I, A_t = alpha_t I, Q_t = I: G_t = (alpha_t^2+1)k_t/((alpha_t^2+1)k_t^T k_t + r_t) = "
           "k_t/(1 + r_t/(alpha_t^2+1)), and (12) becomes GDN with beta_t = (1 + r_t/(alpha_t^2+1))^{-1}",
           "MPFR opt.bits; 4 (full: 40) sequences as eq. (17), alpha_t in [0.1,1]: KF (12)-(13) with explicit "
           "A, Q, Sigma vs reference gated delta rule (Decay::scalar, g = log alpha) at every t; holds under the "
           "unit-key assumption the text states",
           true),
  };
}

}  // namespace ttr::proofs
