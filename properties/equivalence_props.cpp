// Equivalences between forms, in MPFR-256 (the only MPFR translation unit of
// ttr_properties):
//
//  * every chunk and scan form of layers.def equals its layer's sequential
//    definition, at a random chunk size C (mostly C ∤ T, also T < C) on the
//    adversarial inputs of gen/layer_inputs.hpp (WY/UT: PDN §2.2, GKA eq. (5),
//    KLA-K Cor. 1.1 scans);
//  * pdn_exact from h0 = 0 equals the ridge regression closed form
//    S_T = (Σ k kᵀ + λI)⁻¹ Σ k vᵀ (PDN Thm 3.1), solved here by Gaussian
//    elimination of our own;
//  * kalman_filter with unit weights (η absent) equals pdn_exact: GKA eq. (KF) with
//    η = 1 is the Sherman–Morrison recursion of PDN eq. (5) (Φ = P, and
//    Φk/(1 + kᵀΦk) = k̃), from any h0.
//
// Tolerance 1e-40, normwise relative per output. Both sides are exact algorithms
// with 257-bit significands (unit 2^-257 ≈ 4e-78); the chunk forms invert unit
// lower-triangular C×C systems of key inner products, whose inverse can grow
// like 3^C for nearly collinear keys at β‖k‖² near 2, and ridge systems have
// κ(ΣkkT + λI) ≤ 1e6·24/1e-3 ≈ 3e10: amplifications ≤ 1e37 leave the difference
// under 1e-40. A wrong mask, gate boundary or UT product shows at 1e-3 or worse.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/gen/layer_inputs.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::prop {
namespace {

using test::mp;

constexpr double kTol = 1e-40;

// max_e |got − want| / max_e |want| (absolute where want = 0).
double normwise(const Tensor<mp>& got, const Tensor<mp>& want) {
  RC_ASSERT(got.shape == want.shape);
  mp num = 0, den = 0;
  for (std::size_t e = 0; e < want.data.size(); ++e) {
    num = std::max(num, mp(abs(got.data[e] - want.data[e])));
    den = std::max(den, mp(abs(want.data[e])));
  }
  return (den == 0 ? num : mp(num / den)).convert_to<double>();
}

RC_GTEST_PROP(Equivalence, ChunkAndScanFormsEqualSequentialInMpfr256, ()) {
  const auto [layer, form] = *gen::choose_uniform(test::mpfr_parallel_forms());
  gen::InputOptions opt;
  opt.max_T = 20;
  const auto c = *gen::layer_case(layer, opt);
  RC_TAG(layer + "/" + form);
  RC_CLASSIFY(c.dims.at("T") % c.C != 0, "C does not divide T");
  const Config cfg = Config::make(find_layer(layer).spec, c.sets);
  const auto want = test::mpfr_form(layer, "sequential", c.in, cfg, 256, c.C);
  const auto got = test::mpfr_form(layer, form, c.in, cfg, 256, c.C);
  RC_ASSERT(got.size() == want.size());
  for (const auto& [name, w] : want) {
    const Tensor<mp>& g = got.at(name);
    if (name == "resid") {  // ≈ 2^-257 relative residuals on both sides: compared absolutely
      for (std::size_t e = 0; e < w.data.size(); ++e) RC_ASSERT(mp(abs(g.data[e] - w.data[e])) < mp(kTol));
      continue;
    }
    // kappa is computed in float64 from the state by design (spectrum.hpp): the
    // two forms' states agree to 1e-40, the float64 eigen-solve to ~K u κ.
    const double tol = name == "kappa" ? 1e-9 : kTol;
    const double e = normwise(g, w);
    RC_LOG() << name << " error " << e << "\n";
    RC_ASSERT(e < tol);
  }
}

// (Σ k kᵀ + λI) X = Σ k vᵀ per (b, h) by Gaussian elimination with partial
// pivoting in mpfr at the current precision; returns X [B,H,K,V].
Tensor<mp> ridge_closed_form(const gen::LayerCase& c, double lambda) {
  const std::int64_t B = c.dims.at("B"), T = c.dims.at("T"), H = c.dims.at("H"), K = c.dims.at("K"),
                     V = c.dims.at("V");
  const auto &k = c.in.at("k"), &v = c.in.at("v");
  Tensor<mp> X({B, H, K, V}, mp(0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      std::vector<std::vector<mp>> A(K, std::vector<mp>(K + V, mp(0)));  // [G + λI | R]
      for (std::int64_t i = 0; i < K; ++i) A[i][i] = mp(lambda);
      for (std::int64_t t = 0; t < T; ++t) {
        const std::int64_t kr = ((b * T + t) * H + h) * K, vr = ((b * T + t) * H + h) * V;
        for (std::int64_t i = 0; i < K; ++i) {
          for (std::int64_t j = 0; j < K; ++j) A[i][j] += mp(k.data[kr + i]) * mp(k.data[kr + j]);
          for (std::int64_t j = 0; j < V; ++j) A[i][K + j] += mp(k.data[kr + i]) * mp(v.data[vr + j]);
        }
      }
      for (std::int64_t p = 0; p < K; ++p) {
        std::int64_t piv = p;
        for (std::int64_t i = p + 1; i < K; ++i)
          if (abs(A[i][p]) > abs(A[piv][p])) piv = i;
        std::swap(A[p], A[piv]);
        for (std::int64_t i = p + 1; i < K; ++i) {
          const mp f = A[i][p] / A[p][p];
          for (std::int64_t j = p; j < K + V; ++j) A[i][j] -= f * A[p][j];
        }
      }
      for (std::int64_t j = 0; j < V; ++j)
        for (std::int64_t i = K - 1; i >= 0; --i) {
          mp s = A[i][K + j];
          for (std::int64_t l = i + 1; l < K; ++l) s -= A[i][l] * X.data[((b * H + h) * K + l) * V + j];
          X.data[((b * H + h) * K + i) * V + j] = s / A[i][i];
        }
    }
  return X;
}

RC_GTEST_PROP(Equivalence, PdnExactEqualsRidgeClosedForm, ()) {
  gen::InputOptions opt;
  opt.optional_inputs = false;  // h0 = 0
  const auto c = *gen::layer_case("pdn_exact", opt);
  const Config cfg = Config::make(find_layer("pdn_exact").spec, c.sets);
  const auto got = test::mpfr_form("pdn_exact", "sequential", c.in, cfg, 256, c.C);
  test::PrecisionGuard guard;
  precision_control<mp>::set_bits(256);
  RC_ASSERT(normwise(got.at("ht"), ridge_closed_form(c, cfg.number("lambda"))) < kTol);
}

RC_GTEST_PROP(Equivalence, KalmanFilterWithUnitWeightsEqualsPdnExact, ()) {
  gen::InputOptions opt;
  opt.optional_inputs = false;
  auto c = *gen::layer_case("pdn_exact", opt);
  if (*gen::choose<bool>({{1, false}, {1, true}})) {
    Tensor<double> h0({c.dims.at("B"), c.dims.at("H"), c.dims.at("K"), c.dims.at("V")}, 0.0);
    h0.data = gen::draw_role(Role::state, h0.numel());
    c.in["h0"] = h0;
  }
  const auto pdn = test::mpfr_form("pdn_exact", "sequential", c.in,
                                   Config::make(find_layer("pdn_exact").spec, c.sets), 256, c.C);
  const auto kf = test::mpfr_form("kalman_filter", "sequential", c.in,
                                  Config::make(find_layer("kalman_filter").spec, c.sets), 256, c.C);
  for (const char* name : {"o", "ht"}) RC_ASSERT(normwise(kf.at(name), pdn.at(name)) < kTol);
}

}  // namespace
}  // namespace ttr::prop
