// kla_kalman beyond float64's exponent range (docs/layers.md: no exponent range is
// assumed: with p̄ = 0 precision grows like ā^{-2t}). p̄ = 0, ā = 0.5, T = 3000:
// Λ_t ≈ 4^t Λ_0 reaches ~10^1806 and η_t ≈ 2^t·c reaches ~10^903, while the posterior mean
// μ_t = η_t/Λ_t ≈ 2^-t tends to 0 and 1/Λ_t ≈ 4^-t too. The MPFR oracle must carry this
// (MPFR's exponent range is ±2^30 bits by default); float64 cannot.
//
// Independent expectations, both at 512 bits:
//  * the moment form (KLA-K Cor. 2.2, eq. (20), reference/kla_kalman/moment.hpp);
//  * a closed form derived here. With p̄ = 0, eq. (18) is linear: Λ_t = ā^{-2}Λ_{t-1} + φ_t,
//    and eq. (19) has f_t = ā^{-1}: η_t = ā^{-1}η_{t-1} + b_t, b_t = k_t λv_t v_t. Multiplying
//    by ā^{2t} resp. ā^t telescopes them:
//        Λ_t = ā^{-2t} D_t,   D_t = Λ_0 + Σ_{s≤t} ā^{2s} φ_s,
//        η_t = ā^{-t}  N_t,   N_t = η_0 + Σ_{s≤t} ā^{s}  b_s,
//        μ_t = ā^{t} N_t / D_t,
//    evaluated with prefix sums (the terms shrink geometrically; no cancellation beyond
//    that of the data in N_t).
// Tolerance: the information form at 256 bits accumulates ≲ 4·T·u ≈ 1e-73 relative error
// in Λ, η and μ (each step a few roundings, stable recursions; MPFR never underflows or
// overflows here); o is a sum of N = 2 terms q_n μ_n compared per element with 1e-60,
// a margin of 10^13 that only 13-digit cancellation between the two terms could use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/layers/kla_kalman.hpp"
#include "oracles/registry.hpp"
#include "reference/core/multiprecision.hpp"
#include "reference/kla_kalman/moment.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using ttr::test::PrecisionGuard;
using ttr::test::uniform;
using M = ttr::mpfr_real;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;

constexpr std::int64_t kT = 3000, kN = 2, kD = 3;

TensorMap<double> overflow_inputs() {
  TensorMap<double> in;
  in["q"] = uniform({1, kT, 1, kN}, 1, -1, 1);
  in["k"] = uniform({1, kT, 1, kN}, 2, -1, 1);
  in["v"] = uniform({1, kT, 1, kD}, 3, -1, 1);
  in["lambda_v"] = uniform({1, kT, 1, kD}, 4, 0.5, 2.0);
  in["a_bar"] = Tensor<double>({1, kN, kD}, 0.5);
  in["p_bar"] = Tensor<double>({1, kN, kD}, 0.0);
  return in;
}

TensorMap<M> to_mpfr(const TensorMap<double>& in) {
  TensorMap<M> out;
  for (const auto& [name, x] : in) {
    Tensor<M>& y = out[name];
    y.shape = x.shape;
    for (double e : x.data) y.data.emplace_back(e);
  }
  return out;
}

// Closed form above; lambda0 = 1, η_0 = 0, scale = 1 (the layer's defaults).
TensorMap<M> closed_form(const TensorMap<double>& in) {
  TensorMap<M> out;
  out["o"] = Tensor<M>({1, kT, 1, kD}, M(0));
  out["o_var"] = Tensor<M>({1, kT, 1, kD}, M(0));
  out["lambda_T"] = Tensor<M>({1, 1, kN, kD}, M(0));
  out["eta_T"] = Tensor<M>({1, 1, kN, kD}, M(0));
  for (std::int64_t n = 0; n < kN; ++n)
    for (std::int64_t d = 0; d < kD; ++d) {
      const M a(in.at("a_bar").data[static_cast<std::size_t>(n * kD + d)]);
      M Dt(1), Nt(0), as(1), a2s(1);  // D_0 = Λ_0 = 1, N_0 = η_0 = 0, ā^t and ā^{2t} at t = 0
      for (std::int64_t t = 1; t <= kT; ++t) {
        const M k(in.at("k").data[static_cast<std::size_t>((t - 1) * kN + n)]);
        const M lv(in.at("lambda_v").data[static_cast<std::size_t>((t - 1) * kD + d)]);
        const M v(in.at("v").data[static_cast<std::size_t>((t - 1) * kD + d)]);
        as *= a;
        a2s *= a * a;
        Dt += a2s * k * k * lv;
        Nt += as * k * lv * v;
        const M mu = as * Nt / Dt;    // μ_t = ā^t N_t / D_t
        const M inv_lambda = a2s / Dt;  // 1/Λ_t = ā^{2t}/D_t
        const M q(in.at("q").data[static_cast<std::size_t>((t - 1) * kN + n)]);
        const std::size_t od = static_cast<std::size_t>((t - 1) * kD + d);
        out["o"].data[od] += q * mu;
        out["o_var"].data[od] += q * q * inv_lambda;
        if (t == kT) {
          out["lambda_T"].data[static_cast<std::size_t>(n * kD + d)] = Dt / a2s;
          out["eta_T"].data[static_cast<std::size_t>(n * kD + d)] = Nt / as;
        }
      }
    }
  return out;
}

void expect_rel(const Tensor<M>& got, const Tensor<M>& ref, const M& tol, const std::string& what) {
  ASSERT_EQ(got.shape, ref.shape) << what;
  int bad = 0;
  for (std::size_t i = 0; i < ref.data.size(); ++i) {
    const M err = abs(got.data[i] - ref.data[i]);
    if (!(err <= tol * abs(ref.data[i])) && ++bad <= 3)
      ADD_FAILURE() << what << "[" << i << "]: got " << got.data[i].str(20) << ", expected " << ref.data[i].str(20);
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(KlaKalmanOverflow, MpfrOracleCarriesPrecisionBeyondFloat64) {
  PrecisionGuard guard;
  const TensorMap<double> in = overflow_inputs();
  const ttr::Config cfg = ttr::Config::make(ttr::find_layer("kla_kalman").spec, {});

  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  TensorMap<M> got;
  ttr::layers::kla_kalman::sequential<M>(to_mpfr(in), cfg, ttr::FormOptions{}, got);

  // o and o_var are finite after rounding to double (μ_t ≈ 2^-t underflows to 0 or a
  // subnormal for large t: finite); Λ_T exceeds float64's range.
  for (const char* name : {"o", "o_var"})
    for (const M& x : got.at(name).data) ASSERT_TRUE(std::isfinite(ttr::to_double(x))) << name << " = " << x.str(10);
  const M dbl_max(std::numeric_limits<double>::max());
  long largest_exp10 = 0;
  for (const M& x : got.at("lambda_T").data) {
    EXPECT_GT(x, dbl_max) << "lambda_T should exceed 1.8e308 at T = 3000";
    using std::log10;
    largest_exp10 = std::max(largest_exp10, static_cast<long>(ttr::to_double(M(log10(x)))));
  }
  // Λ_T ≈ 4^3000·D_∞ with D_∞ ∈ (1, 2): log10 ≈ 1806.2.
  EXPECT_GE(largest_exp10, 1805);
  EXPECT_LE(largest_exp10, 1807);
  const double rounded = ttr::to_double(got.at("lambda_T").data[0]);
  RecordProperty("lambda_T_log10", std::to_string(largest_exp10));
  RecordProperty("lambda_T_as_double", std::to_string(rounded));
  std::printf("[ info ] p̄ = 0, ā = 0.5, T = %lld: largest lambda_T = 10^%ld (as double: %g)\n",
              static_cast<long long>(kT), largest_exp10, rounded);

  // The two independent routes at 512 bits.
  ASSERT_GE(ttr::precision_control<M>::set_bits(512), 512u);
  const TensorMap<M> cf = closed_form(in);
  const TensorMap<M> t512 = to_mpfr(in);
  const ttr::KlaInputs<M> ki{t512.at("q"), t512.at("k"), t512.at("v"), t512.at("lambda_v"),
                             t512.at("a_bar"), t512.at("p_bar"), nullptr, nullptr};
  ttr::KlaOutputs<M> mom;
  ttr::kla_kalman_moment(ki, M(1), M(1), mom);
  const TensorMap<M> moment = {{"o", mom.o}, {"o_var", mom.o_var}, {"lambda_T", mom.lambda_T}, {"eta_T", mom.eta_T}};
  for (const char* n : {"o", "o_var", "lambda_T", "eta_T"}) {
    expect_rel(got.at(n), cf.at(n), M(1e-60), std::string("closed form: ") + n);
    expect_rel(got.at(n), moment.at(n), M(1e-60), std::string("moment form: ") + n);
  }
  // Not vacuous: the late outputs are far below double's range yet nonzero in MPFR.
  using std::log10;
  EXPECT_LT(log10(abs(got.at("o").data.back())), M(-800));
}

// The point of the case: the float64 tier overflows. Λ reaches +inf near t = 512
// (4^512 = 2^1024), η near t ≈ 1024 (2^t), after which η/Λ = inf/inf = NaN in o.
TEST(KlaKalmanOverflow, Float64TierIsNonFinite) {
  const TensorMap<double> in = overflow_inputs();
  const ttr::LayerResult r = ttr::run_layer(ttr::find_layer("kla_kalman"), ttr::Form::sequential,
                                            {ttr::Tier::fp64, 53}, in, ttr::Config::make(ttr::find_layer("kla_kalman").spec, {}));
  int nonfinite_o = 0;
  for (double x : r.values.at("o").data) nonfinite_o += !std::isfinite(x);
  EXPECT_GT(nonfinite_o, 0) << "fp64 should produce NaN in o once η and Λ have both overflowed";
  for (double x : r.values.at("lambda_T").data) EXPECT_FALSE(std::isfinite(x));
  // ... while the early tokens, before any overflow, are still finite.
  for (std::int64_t i = 0; i < 100 * kD; ++i) EXPECT_TRUE(std::isfinite(r.values.at("o").data[i]));
}

}  // namespace
