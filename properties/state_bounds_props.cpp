// State bounds and contraction of the delta family and the gated linear layers,
// derived from the recurrences of docs/layers.md (our K×V state S_t):
//
// Delta family (PDN eq. (4); GDN and KDA, GKA §6.4; KLA-Z eq. (3)):
//   S_t = (I − β_t k_t k_tᵀ) D_t S_{t-1} + β_t k_t v_tᵀ,   D_t = Diag(e^{g_t}) ⪯ I.
//   With ‖k‖ = 1, I − β k kᵀ has eigenvalues 1 − β (along k) and 1: for β ∈ [0, 2]
//   its spectral norm is ≤ 1, and ‖D_t‖₂ ≤ 1 (decays ≤ 1). Hence
//   (a) non-expansive in the state: two runs from S_0, S_0' with the same inputs
//       differ by D_T = Π (I − β k kᵀ) D_t · (S_0 − S_0'), so ‖ΔS_T‖_F ≤ ‖ΔS_0‖_F;
//   (b) ‖S_T‖_F ≤ ‖S_0‖_F + Σ_t β_t ‖k_t‖ ‖v_t‖ (triangle inequality, ‖k vᵀ‖_F = ‖k‖‖v‖).
//   Kaczmarz (KLA-Z eq. (3)) replaces β by β/(‖k‖² + eps): the coefficient of the
//   projection, β‖k‖²/(‖k‖² + eps), lies in [0, 1) for every key norm, so (a)
//   holds for raw keys, and (b) with the write β‖k‖‖v‖/(‖k‖² + eps).
//   The preconditioned layers write along k̃ = B ⊙ k with B ∈ [1/x, x] (PDN eq. (9),
//   App. E): I − β k̃ kᵀ is not normal and only ‖I − β k̃ kᵀ‖₂ ≤ 1 + β x ‖k‖² holds,
//   giving ‖S_t‖ ≤ (1 + β_t x ‖k_t‖²) ‖S_{t-1}‖ + β_t x ‖k_t‖ ‖v_t‖ (keys are
//   L2-normalised in the kernel: ‖k‖ ≤ 1).
// Gated linear (PDN §2.1, §3.4): S_t = D_t S_{t-1} + k_t v_tᵀ with D_t ⪯ I, so
//   ‖S_T‖_F ≤ ‖S_0‖_F + Σ ‖k_t‖‖v_t‖ and, with v = 0, ‖S_T‖_F ≤ ‖S_0‖_F.
//
// The runs are in MPFR-128 (run_layer's mpfr tier, outputs rounded to double):
// inequalities are checked with a relative slack of 1e-12 (double rounding of
// the outputs and of the norms computed here: ≤ (KV + 4)u ≈ 1e-14 for K, V ≤ 4).
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/gen/layer_inputs.hpp"
#include "properties/support/run.hpp"

namespace ttr::prop {
namespace {

constexpr double kSlack = 1e-12;

bool leq(double lhs, double rhs) { return lhs <= rhs * (1 + kSlack) + 1e-300; }

// Draws a fresh h0 [B,H,K,V].
Tensor<double> draw_state(const gen::LayerCase& c) {
  Tensor<double> h({c.dims.at("B"), c.dims.at("H"), c.dims.at("K"), c.dims.at("V")}, 0.0);
  h.data = gen::draw_role(Role::state, h.numel());
  return h;
}

// Unit keys and β ∈ [0, β_max] drawn afresh (edges 0 and β_max exact), h0 drawn.
gen::LayerCase unit_key_case(const std::string& layer, double beta_max) {
  gen::InputOptions opt;
  opt.optional_inputs = false;
  auto c = *gen::layer_case(layer, opt);
  if (layer != "kaczmarz_delta_rule") normalise_keys(c.in.at("k"));  // Kaczmarz: any key norm
  for (double& b : c.in.at("beta").data) b = beta_max * *gen::beta();
  c.in["h0"] = draw_state(c);
  return c;
}

RC_GTEST_PROP(DeltaFamily, NonExpansiveInTheState, ()) {
  const std::string layer = *gen::choose_uniform(gen::family_layers("delta", false, true));
  // β ∈ [0, 2] for the plain delta rule (the whole non-expansive range, β = 2 a
  // reflection); the spec's [0, 1] for the others.
  auto c = unit_key_case(layer, layer == "delta_rule" ? 2.0 : 1.0);
  auto c2 = c;
  c2.in["h0"] = draw_state(c);
  RC_TAG(layer);
  const auto r1 = run(c, kMpfr128), r2 = run(c2, kMpfr128);
  const auto &h1 = r1.values.at("ht"), &h2 = r2.values.at("ht");
  for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
    for (std::int64_t h = 0; h < c.dims.at("H"); ++h) {
      const double d0 = block_fro_diff(c.in.at("h0"), c2.in.at("h0"), b, h);
      const double dT = block_fro_diff(h1, h2, b, h);
      // dT also carries the rounding of the two states: ≤ u(‖S_T‖ + ‖S_T'‖).
      RC_ASSERT(dT <= d0 * (1 + kSlack) + 4 * kU * (block_fro(h1, b, h) + block_fro(h2, b, h)));
    }
}

RC_GTEST_PROP(DeltaFamily, StateBoundedByInitialStatePlusWrites, ()) {
  const std::string layer = *gen::choose_uniform(gen::family_layers("delta"));
  auto c = unit_key_case(layer, 1.0);
  RC_TAG(layer);
  const auto r = run(c, kMpfr128);
  const Config cfg = Config::make(find_layer(layer).spec, c.sets);
  const auto &k = c.in.at("k"), &v = c.in.at("v"), &beta = c.in.at("beta");
  for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
    for (std::int64_t h = 0; h < c.dims.at("H"); ++h) {
      double bound = block_fro(c.in.at("h0"), b, h);
      for (std::int64_t t = 0; t < c.dims.at("T"); ++t) {
        const double kn = row_norm(k, b, t, h), vn = row_norm(v, b, t, h), bt = at3(beta, b, t, h);
        if (layer == "kaczmarz_delta_rule") {
          bound += bt * kn * vn / (kn * kn + cfg.number("eps"));
        } else if (layer.rfind("precond", 0) == 0) {
          const double x = cfg.number("x");  // ‖k‖ ≤ 1 after the kernel's L2 normalisation
          bound = (1 + bt * x) * bound + bt * x * vn;
        } else {
          bound += bt * kn * vn;
        }
      }
      RC_ASSERT(leq(block_fro(r.values.at("ht"), b, h), bound));
    }
}

RC_GTEST_PROP(GatedLinear, StateBoundedByInitialStatePlusWrites, ()) {
  const std::string layer = *gen::choose_uniform(gen::family_layers("gated_linear"));
  gen::InputOptions opt;
  opt.optional_inputs = false;
  auto c = *gen::layer_case(layer, opt);
  c.in["h0"] = draw_state(c);
  const bool no_values = *gen::choose<bool>({{3, false}, {1, true}});
  if (no_values)
    for (double& x : c.in.at("v").data) x = 0;
  RC_TAG(layer, no_values ? "v = 0" : "v drawn");
  const auto r = run(c, kMpfr128);
  for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
    for (std::int64_t h = 0; h < c.dims.at("H"); ++h) {
      double bound = block_fro(c.in.at("h0"), b, h);
      for (std::int64_t t = 0; t < c.dims.at("T"); ++t)
        bound += row_norm(c.in.at("k"), b, t, h) * row_norm(c.in.at("v"), b, t, h);
      RC_ASSERT(leq(block_fro(r.values.at("ht"), b, h), bound));
    }
}

// Decays only shrink: with v = 0 each row i of S is multiplied by e^{Σ g_{t,i}}, so
// S_T = Diag(e^{G_T}) S_0 exactly (gla per key, simple_gla per head), whatever the keys.
RC_GTEST_PROP(GatedLinear, WithoutValuesTheStateOnlyDecays, ()) {
  const std::string layer = *gen::choose_uniform(gen::family_layers("gated_linear", true));
  gen::InputOptions opt;
  opt.optional_inputs = false;
  auto c = *gen::layer_case(layer, opt);
  c.in["h0"] = draw_state(c);
  for (double& x : c.in.at("v").data) x = 0;
  const auto r = run(c, kMpfr128);
  const auto& g = c.in.at("g");
  const std::int64_t K = c.dims.at("K"), V = c.dims.at("V");
  for (std::int64_t b = 0; b < c.dims.at("B"); ++b)
    for (std::int64_t h = 0; h < c.dims.at("H"); ++h)
      for (std::int64_t i = 0; i < K; ++i) {
        double G = 0;  // Σ_t g_{t,(i)}: exact enough (≤ T terms, relative u each)
        for (std::int64_t t = 0; t < c.dims.at("T"); ++t)
          G += layer == "gla" ? row(g, b, t, h)[i] : at3(g, b, t, h);
        for (std::int64_t j = 0; j < V; ++j) {
          const std::size_t e = static_cast<std::size_t>(((b * c.dims.at("H") + h) * K + i) * V + j);
          const double want = std::exp(G) * c.in.at("h0").data[e];
          // exp of a sum with relative error ≤ T·u·|G| (|G| ≤ 69·T): ≤ 1e-11 relative for T ≤ 24.
          RC_ASSERT(std::fabs(r.values.at("ht").data[e] - want) <= 1e-10 * std::fabs(want) + 1e-300);
        }
      }
}

}  // namespace
}  // namespace ttr::prop
