// The guaranteed domains of the Sherman–Morrison layers (pdn_exact,
// kalman_filter) and of KLA-K (kla_kalman), at the worst cases of their
// derivations (docs/domains.md, "Ridge regression", "KLA-K"): soundness just
// inside the domain (the exact trace finds nothing beyond its format, the form's
// outputs are finite in the dtype) and the tightness f* at the first amplitude
// where the trace finds a value beyond (tests/domain/domain_probe.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gate/range.hpp"
#include "oracles/domain.hpp"
#include "oracles/registry.hpp"
#include "tests/domain/domain_probe.hpp"

namespace ttr::test {
namespace {

using namespace domain_probe;

// Sherman–Morrison worst case: λ = 2^-12, η = 1, q = e₁, k = 2^-10 e₁, v = a e₁,
// (backward) do = a e₁, scale = 1. The key is small against λ, so Φ_t stays near
// I/λ (Σ ‖k‖²/λ = T·2^-8 = 1/16) and the state S_t = t·2^-10 a/(λ + t·2^-20) e₁e₁ᵀ
// nearly reaches its bound B_t = t·2^-10 a/λ: at t = T the ratio is 1 + 1/16.
constexpr double kSmLambda = 0x1p-12, kSmKey = 0x1p-10;

TensorMap<double> sherman_morrison_worst(const LayerSpec& s, Direction d, double a) {
  TensorMap<double> in;
  in["q"] = tensor({1, kT, 1, kK}, 0.0);
  in["k"] = tensor({1, kT, 1, kK}, 0.0);
  in["v"] = tensor({1, kT, 1, kV}, 0.0);
  for (std::int64_t t = 0; t < kT; ++t) {
    in["q"].data[t * kK] = 1.0;
    in["k"].data[t * kK] = kSmKey;
    in["v"].data[t * kV] = a;
  }
  if (s.input("eta")) in["eta"] = tensor({1, kT, 1}, 1.0);
  if (d == Direction::backward) {
    in["do"] = tensor({1, kT, 1, kV}, 0.0);
    for (std::int64_t t = 0; t < kT; ++t) in["do"].data[t * kV] = a;
  }
  return in;
}

Config sherman_morrison_config(const LayerEntry& e) {
  return Config::make(e.spec, {{"scale", "1"}, {"lambda", "0.000244140625"}});  // 2^-12
}

TEST(Domain, ShermanMorrisonWorstCaseIsSoundAndTight) {
  for (const char* name : {"pdn_exact", "kalman_filter"}) {
    const LayerEntry& e = find_layer(name);
    for (Direction dir : {Direction::forward, Direction::backward})
      for (Form form : e.form_list(dir))
        for (Tier dtype : {Tier::fp32, Tier::bf16, Tier::fp16}) {
          const Probe p{e, dir, form, dtype, sherman_morrison_worst, sherman_morrison_config(e)};
          ASSERT_TRUE(p.dom.covers(p.ctx())) << p.label();
          // Forward: the state (and the output S_tᵀq) is within 1 + 1/16 of the bound
          // `state`. Backward: the gradient bounds multiply norm bounds of the state,
          // the adjoints dS, dΦ and the residual (printed, not asserted).
          walk(p, dir == Direction::forward);
        }
  }
}

// KLA-K, N = D = 4 (q, k: N; v, λv: D), one head, p̄ = 0. Amplitude a scales one
// input per worst case (docs/domains.md, "KLA-K"):
//  * mean: ā = 1, k = λv = q = 1, v = a, Λ_0 = 2^-10: η_t = t·a = H_t exactly, the
//    first value beyond of the sequential and unscaled forms (the scaled forms hold
//    η_T only as the output eta_T, condition `final states`, not an intermediate);
//  * readout: as mean with k = 1/8: η_t = t·a/8 and μ_t = (t·a/8)/(Λ_0 + t/64) =
//    H_t/ℓ_t = m_t, so o_t = N·μ_t (≈ 32a) is its bound and the first value beyond in
//    every form;
//  * variance: ā = 1, k = λv = 1, v = 0, Λ_0 = 1, q = a: o_var_1 = N a²/2 = its
//    bound Σ q²/ℓ_1 (ℓ_t = Λ_t exactly at p̄ = 0), in every form;
//  * precision: ā = 3/4, k = λv = q = v = 1, Λ_0 = a: Λ_t = ā^{−2t}(a + Σ ā^{2s}) =
//    L_t, the first value beyond of the sequential and unscaled forms.
constexpr std::int64_t kN = 4, kD = 4;

struct Kla {
  double abar = 1.0, lambda_init = 1.0, q = 1.0, k = 1.0, v = 1.0;
};

TensorMap<double> kla_inputs(const Kla& x, std::int64_t T = kT) {
  TensorMap<double> in;
  in["q"] = tensor({1, T, 1, kN}, x.q);
  in["k"] = tensor({1, T, 1, kN}, x.k);
  in["v"] = tensor({1, T, 1, kD}, x.v);
  in["lambda_v"] = tensor({1, T, 1, kD}, 1.0);
  in["a_bar"] = tensor({1, kN, kD}, x.abar);
  in["p_bar"] = tensor({1, kN, kD}, 0.0);
  in["lambda_init"] = tensor({1, 1, kN, kD}, x.lambda_init);
  return in;
}

TensorMap<double> kla_mean_worst(const LayerSpec&, Direction, double a) {
  return kla_inputs({.abar = 1.0, .lambda_init = 0x1p-10, .v = a});
}
TensorMap<double> kla_readout_worst(const LayerSpec&, Direction, double a) {
  return kla_inputs({.abar = 1.0, .lambda_init = 0x1p-10, .k = 0.125, .v = a});
}
TensorMap<double> kla_variance_worst(const LayerSpec&, Direction, double a) {
  return kla_inputs({.abar = 1.0, .lambda_init = 1.0, .q = a, .v = 0.0});
}
TensorMap<double> kla_precision_worst(const LayerSpec&, Direction, double a) {
  return kla_inputs({.abar = 0.75, .lambda_init = a});
}

bool scaled(Form f) { return f == Form::chunk || f == Form::scan; }

TEST(Domain, KlaWorstCasesAreSoundAndTight) {
  const LayerEntry& e = find_layer("kla_kalman");
  for (Form form : e.form_list(Direction::forward))
    for (Tier dtype : {Tier::fp32, Tier::bf16, Tier::fp16}) {
      // Every bound these cases reach is attained (see above): f* ≤ 2 everywhere.
      walk(Probe{e, Direction::forward, form, dtype, kla_readout_worst}, true);
      walk(Probe{e, Direction::forward, form, dtype, kla_variance_worst}, true);
      if (scaled(form)) continue;
      walk(Probe{e, Direction::forward, form, dtype, kla_mean_worst}, true);
      walk(Probe{e, Direction::forward, form, dtype, kla_precision_worst}, true);
    }
}

// KLA-K backward: ā = 1, p̄ = 0, Λ_0 = 1, k = λv = q = v = 1 and every cotangent
// (do, do_var, dlambda_T, deta_T) = a, so every adjoint and gradient grows like a.
// The gradient bounds multiply factor bounds taken at their maxima and add the
// adjoints' reads without their signs (printed, not asserted).
TensorMap<double> kla_backward_worst(const LayerSpec&, Direction, double a) {
  TensorMap<double> in = kla_inputs({});
  for (const char* name : {"do", "do_var"}) in[name] = tensor({1, kT, 1, kD}, a);
  for (const char* name : {"dlambda_T", "deta_T"}) in[name] = tensor({1, 1, kN, kD}, a);
  return in;
}

TEST(Domain, KlaBackwardIsSound) {
  const LayerEntry& e = find_layer("kla_kalman");
  for (Form form : e.form_list(Direction::backward))
    for (Tier dtype : {Tier::fp32, Tier::bf16, Tier::fp16}) {
      const Probe p{e, Direction::backward, form, dtype, kla_backward_worst};
      ASSERT_TRUE(p.dom.covers(p.ctx())) << p.label();
      walk(p, false);
    }
}

// The scaled forms (docs/kla-scaled.md) claim no condition on Λ_t but on the
// output lambda_T: at the precision worst case with Λ_0 = 2^120, where the
// unscaled forms' trace leaves fp32 (their `precision` condition is violated), the
// scaled forms violate `final states` only — Λ_T is beyond fp32, its inf the
// faithful output — their trace finds nothing beyond, and o, o_var are finite.
TEST(Domain, KlaScaledFormsNeedNoPrecisionCondition) {
  const LayerEntry& e = find_layer("kla_kalman");
  const int n = 8 * 120;
  for (Tier dtype : {Tier::fp32, Tier::bf16, Tier::fp16})
    for (Form form : {Form::chunk, Form::scan}) {
      const Probe p{e, Direction::forward, form, dtype, kla_precision_worst};
      std::vector<std::string> names;
      for (const DomainViolation& v : p.violations(n)) names.push_back(v.condition);
      EXPECT_EQ(names, std::vector<std::string>{"final states"}) << p.label();
      EXPECT_FALSE(p.beyond(n)) << p.label();
      const LayerResult r = run_layer(e, form, {dtype, 0}, p.at(n), p.cfg, kChunk, Direction::forward);
      for (const char* out : {"o", "o_var"})
        for (double x : r.values.at(out).data) EXPECT_TRUE(std::isfinite(x)) << p.label() << " " << out;
      const Form unscaled = form == Form::chunk ? Form::chunk_unscaled : Form::scan_unscaled;
      const Probe u{e, Direction::forward, unscaled, dtype, kla_precision_worst};
      EXPECT_TRUE(u.beyond(n)) << u.label();
      bool precision = false;
      for (const DomainViolation& v : u.violations(n)) precision = precision || v.condition == "precision";
      EXPECT_TRUE(precision) << u.label();
    }
}

// chunk_unscaled stores each chunk aggregate in the 16-bit format; a chunk of one
// token stores its raw Möbius leaf (blelloch.hpp), whose entry p̄ is not rescaled.
// p̄ = 2^17 > 65504: with T = 16 and C = 8 nothing is beyond fp16, with T = 17 the
// last chunk's leaf is — and the condition `stored Möbius leaf` says so.
TEST(Domain, KlaUnscaledStoresAOneTokenChunksLeaf) {
  const LayerEntry& e = find_layer("kla_kalman");
  const Config cfg = Config::make(e.spec, {});
  for (std::int64_t T : {16, 17}) {
    TensorMap<double> in = kla_inputs({.abar = 0.5}, T);
    in["p_bar"] = tensor({1, kN, kD}, 0x1p17);
    ModelSpec ms;
    ms.form = Form::chunk_unscaled;
    ms.dtype = Tier::fp16;
    ms.chunk_size = kChunk;
    const RangeNote note = trace_range(e, in, cfg, ms);
    std::vector<std::string> violated;
    for (const DomainViolation& v :
         domain_violations(*layer_domain("kla_kalman"), {e.spec, in, cfg}, {ms.form, ms.direction, ms.dtype, kChunk}))
      violated.push_back(v.condition);
    if (T == 16) {
      EXPECT_FALSE(note.beyond) << note.intermediate << " = " << note.value;
      EXPECT_TRUE(violated.empty()) << violated.front();
    } else {
      EXPECT_TRUE(note.beyond);
      EXPECT_EQ(note.operation, "store");
      EXPECT_EQ(violated, std::vector<std::string>{"stored Möbius leaf"});
    }
  }
}

}  // namespace
}  // namespace ttr::test
