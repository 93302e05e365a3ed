// kla_kalman's chunk and scan backward forms (reference/kla_kalman/scan_backward.hpp)
// where the precision Λ leaves the formats' ranges. chunk_backward_test.cpp proves
// both against the exact adjoint on the shared regimes (random, edges, initial
// states, p̄ = 0 with ā = 0.5); here:
//
//  * Beyond float64 in MPFR-256: p̄ = 0 with ā = 2^-40 (Λ_t ~ 2^{80t}, Λ_T ~ 2^2960
//    at T = 37) and p̄ = 2^-1000 (Λ saturates near 1/p̄ ≈ 2^1000 after ~12 tokens,
//    where p̄Λ ≈ ā² and the c-terms of dā, dp̄ are the whole gradient), every
//    cotangent given (do, do_var, dlambda_T, deta_T) and the initial states: both
//    forms equal the sequential adjoint (backward.hpp, moment coordinates; checked
//    against 2048 bits and central differences in kla_precision_backward_test) to
//    1e-60 for C ∈ {1, 2, 3, 16, 64, T, T+5} and the whole-sequence tree. Why 1e-60:
//    as chunk_backward_test.cpp, both are exact algorithms at 257 bits whose every
//    step is a product, quotient or sum of quantities at their natural scale (the
//    Scaled exponents are exact), so they differ by O(T·N·D) roundings of 4e-78
//    times the O(1)–O(10) condition of these problems.
//
//  * Why the backward is scaled too (the measured case of the header): p̄ = 0,
//    ā = 2^-8, T = 7, Λ_0 = 1: Λ_T ≈ 2^112 is an fp32 number, so the forward
//    (scaled or not) is finite, but the final-state cotangents in moment
//    coordinates, Λ_T dη_T·η_T and Λ_T² dΛ_T, are ≈ 2^168 and 2^220: an adjoint in
//    plain fp32 (the sequential adjoint in fp32, which is also what the scan
//    backward would compute without its Scaled numbers) returns NaN/inf in
//    gradients whose exact value is an ordinary fp32 number; the scaled scan and
//    chunk backward return none, and pass their gradient error model in fp32 and
//    bf16 (dp̄'s exact value, ~2^240, is beyond fp32 itself: its ±inf is the faithful
//    result, docs/error-model.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "tests/support/kla_finding.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/vectors_fixture.hpp"

namespace ttr::test {
namespace {

TEST(KlaScanBackward, EqualsTheAdjointBeyondFloat64RangeInMpfr256) {
  const std::string layer = "kla_kalman";
  const LayerSpec& spec = find_layer(layer).spec;
  const Config cfg = Config::make(spec, {{"scale", "0.5"}});
  const std::int64_t T = 37;
  struct Regime {
    const char* name;
    double a_bar, p_bar;
  };
  for (const Regime& r : {Regime{"no noise, a = 2^-40", std::ldexp(1.0, -40), 0.0},
                          Regime{"saturating, a = 2^-40, p = 2^-1000", std::ldexp(1.0, -40), std::ldexp(1.0, -1000)}}) {
    const TensorMap<double> in = kla_backward_case(T, r.a_bar, r.p_bar, 1.0);
    const TensorMap<mp> want = mpfr_form(layer, "sequential", in, cfg, 256, 64, Direction::backward);
    ASSERT_EQ(want.size(), 8u);  // dq, dk, dv, dlambda_v, da_bar, dp_bar, dlambda_init, deta_init
    // The regime is what it claims: some gradient beyond float64's range.
    bool beyond = false;
    for (const auto& [name, w] : want)
      for (const mp& x : w.data) beyond = beyond || !std::isfinite(static_cast<double>(x));
    EXPECT_TRUE(beyond) << r.name;
    double worst = 0.0;
    for (const char* form : {"scan", "chunk"})
      for (int C : {1, 2, 3, 16, 64, int(T), int(T) + 5}) {
        if (std::string(form) == "scan" && C != 1) continue;  // one Blelloch tree: C unused
        const std::string what = std::string(form) + " C=" + std::to_string(C) + " " + r.name;
        const TensorMap<mp> got = mpfr_form(layer, form, in, cfg, 256, C, Direction::backward);
        ASSERT_EQ(got.size(), want.size()) << what;
        for (const auto& [name, w] : want) {
          ASSERT_TRUE(got.count(name)) << what << ": missing " << name;
          const double e = rel_err(got.at(name), w);
          EXPECT_LT(e, 1e-60) << what << ": " << name << " relative error " << e;
          worst = std::max(worst, e);
        }
      }
    std::printf("%s: largest relative error of a gradient %.2g\n", r.name, worst);
  }
}

TEST(KlaScanBackward, ScaledBackwardIsFiniteWhereAPlainFp32AdjointOverflows) {
  const LayerEntry& e = find_layer("kla_kalman");
  const Config cfg = Config::make(e.spec, {{"scale", "0.5"}});
  const TensorMap<double> in = kla_backward_case(7, std::ldexp(1.0, -8), 0.0, 0.0625);
  Judge judge(e, in, cfg, Arith{Tier::mpfr, 256}, Direction::backward);
  const TensorMap<double>& oracle = judge.oracle();
  // The exact gradients: every one but dp̄ an ordinary fp32 number; dp̄ beyond fp32.
  const double fp32_max = 3.4028234663852886e38;
  for (const auto& [name, w] : oracle)
    for (double x : w.data) {
      if (name == "dp_bar") {
        EXPECT_GT(std::fabs(x), fp32_max) << name;
      } else {
        EXPECT_LT(std::fabs(x), fp32_max / 8) << name;
      }
    }
  // A plain fp32 adjoint (the sequential form in fp32): non-finite where the truth is finite.
  {
    ModelSpec ms;
    ms.form = Form::sequential;
    ms.direction = Direction::backward;
    ms.dtype = Tier::fp32;
    const TensorMap<double> plain = run_layer(e, Form::sequential, Arith{Tier::fp32, 0}, in, cfg, 64, Direction::backward).values;
    const CheckResult r = judge(plain, ms);
    std::int64_t failures = 0;
    for (const TensorVerdict& t : r.tensors) failures += t.nonfinite_failures;
    EXPECT_GT(failures, 0) << "the plain fp32 adjoint was expected to overflow here";
    EXPECT_TRUE(r.range.beyond) << "its overflow is a range finding of the sequential form in fp32";
    std::printf("plain fp32 sequential adjoint: %lld non-finite gradient entries where the exact value is finite\n",
                static_cast<long long>(failures));
  }
  for (Form form : {Form::scan, Form::chunk})
    for (Tier dtype : {Tier::fp32, Tier::bf16}) {
      ModelSpec ms;
      ms.form = form;
      ms.direction = Direction::backward;
      ms.dtype = dtype;
      ms.chunk_size = 3;  // T = 7: three chunks, the last one partial
      const TensorMap<double> cand = run_layer(e, form, Arith{dtype, 0}, in, cfg, ms.chunk_size, Direction::backward).values;
      const CheckResult r = judge(cand, ms);
      const std::string what = std::string(form_name(form)) + " " + tier_name(dtype);
      EXPECT_TRUE(r.pass) << what;
      EXPECT_FALSE(r.range.beyond) << what;
      double worst = 0.0;
      for (const TensorVerdict& t : r.tensors) {
        EXPECT_EQ(t.nonfinite_failures, 0) << what << ": " << t.name;
        EXPECT_TRUE(t.pass) << what << ": " << t.name << " ratio " << t.max_ratio;
        if (t.name != "dp_bar") {
          EXPECT_EQ(t.nan_count + t.inf_count, 0) << what << ": " << t.name;
        }
        worst = std::max(worst, t.max_ratio);
      }
      std::printf("%s: worst gradient ratio %.3g\n", what.c_str(), worst);
    }
}

}  // namespace
}  // namespace ttr::test
