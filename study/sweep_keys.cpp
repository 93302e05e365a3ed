// Sweep over the conditioning of the keys: k_t = normalise(diag(s) z_t), z_t ~ N(0, I),
// s_i = κ^{-i/(2(K-1))}, so the key Gram matrix Σ_t k_t k_tᵀ has condition number
// about κ (measured and recorded, after rounding to the bf16 grid) — up to 1e8.
#include <cmath>
#include <random>
#include <vector>

#include "reference/core/float16.hpp"
#include "reference/solvers/spectrum.hpp"
#include "study/sweep.hpp"

namespace ttr::study {

Study sweep_keys() {
  SweepDef d;
  d.name = "sweep-keys";
  d.title = "Error against the conditioning of the keys";
  d.axis = "kappa_keys";
  d.axis_label = "target condition number of the key Gram matrix";
  d.measured_name = "kappa_keys_measured";
  d.claim = "Nearly collinear keys make the delta rule's and the ridge layers' solves ill-conditioned; a correct "
            "kernel's error grows with the conditioning and the error model must grow with it.";
  d.points = [](bool quick) {
    std::vector<SweepPoint> p;
    for (const char* k : quick ? std::vector<const char*>{"1", "1e4", "1e8"}
                               : std::vector<const char*>{"1", "1e2", "1e4", "1e6", "1e8"})
      p.push_back({k, quick ? 64 : 1024, quick ? 16 : 32, quick ? 16 : 64, {Tier::bf16, Tier::fp32}, true});
    return p;
  };
  d.transform = [](const LayerEntry&, const SweepPoint& pt, TensorMap<double>& in, std::uint64_t seed,
                   double& measured) {
    Tensor<double>& k = in.at("k");
    const std::int64_t K = k.shape.back(), rows = k.numel() / K;
    const double kappa = std::stod(pt.label);
    std::mt19937_64 rng(seed ^ 0x6b657973ull);  // "keys"
    std::normal_distribution<double> normal;
    for (std::int64_t r = 0; r < rows; ++r) {
      double n2 = 0;
      for (std::int64_t i = 0; i < K; ++i) {
        const double s = std::pow(kappa, -0.5 * static_cast<double>(i) / static_cast<double>(K - 1));
        double& x = k.data[r * K + i];
        x = s * normal(rng);
        n2 += x * x;
      }
      for (std::int64_t i = 0; i < K; ++i) k.data[r * K + i] = BF16Format::round(k.data[r * K + i] / std::sqrt(n2));
    }
    // κ of Σ_t k_t k_tᵀ over the first head's tokens ([B,T,H,K], b = 0, h = 0).
    const std::int64_t T = k.shape[1], H = k.shape[2];
    std::vector<double> G(static_cast<std::size_t>(K * K), 0.0);
    for (std::int64_t t = 0; t < T; ++t) {
      const double* v = &k.data[(t * H) * K];
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t j = 0; j < K; ++j) G[i * K + j] += v[i] * v[j];
    }
    const auto [lo, hi] = symmetric_extreme_eigenvalues(G.data(), static_cast<int>(K));
    measured = lo > 0 ? hi / lo : INFINITY;
  };
  return make_sweep(d);
}

}  // namespace ttr::study
