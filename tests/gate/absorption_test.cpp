// The error model's absorption in 16-bit arithmetic (reference/core/mca.hpp;
// docs/error-model.md, "Absorption"):
//
//  * mca_absorbs(big, small, f) says that rounding to nearest in f returns `big`:
//    checked against the format's own rounding (BF16Format / FP16Format::round, an
//    independent implementation) on random pairs, and on hand-derived ties and
//    binade edges;
//  * the mechanism of the finding: GKA's Chebyshev solve takes L = ‖H‖_F + λ for
//    the top of the spectrum, which is tight for a rank-one H. Summed in bf16,
//    ‖H‖_F² comes out short (every key below: rounding to nearest drops the small
//    squares), and the model with absorption comes out short too, where the
//    unbiased model lands on either side of λ_max;
//  * the finding: with strong decay (g = bf16(−10), H ≈ k kᵀ) the bf16 sequential
//    forms of gka — the definition with every operation rounded, correct kernels —
//    were judged at ratios 9.4 (forward) and 9–38 (backward; study sweep-decay,
//    seeds 0–3) when the model perturbed absorbed sums around the exact sum. They
//    must pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gate/judge.hpp"
#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"
#include "reference/core/float16.hpp"
#include "reference/core/mca.hpp"

namespace ttr::test {
namespace {

template <class Format>
void expect_absorption_is_round_to_nearest(McaFormat f, int p) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(1.0, 2.0), sign(-1.0, 1.0);
  std::uniform_int_distribution<int> exp_big(-12, 14), gap(p - 3, p + 6);  // normal in both formats
  int absorbed = 0, tested = 0;
  for (int i = 0; i < 200000; ++i) {
    const double big = Format::round(std::ldexp(mant(rng), exp_big(rng)) * (sign(rng) < 0 ? -1 : 1));
    const double small = std::ldexp(mant(rng), std::ilogb(big) - gap(rng)) * (sign(rng) < 0 ? -1 : 1);
    ++tested;
    if (mca_absorbs(big, small, f)) {
      ++absorbed;
      ASSERT_EQ(Format::round(big + small), big) << "big " << big << " small " << small;
    }
    // Below a quarter ulp of big (the ulp of the binade below, halved), always absorbed.
    if (std::fabs(small) < std::ldexp(1.0, std::ilogb(big) - p - 1)) {
      ASSERT_TRUE(mca_absorbs(big, small, f)) << "big " << big << " small " << small;
    }
  }
  EXPECT_GT(absorbed, tested / 4);  // the gaps drawn straddle the threshold
  EXPECT_LT(absorbed, tested);
}

TEST(McaAbsorption, IsRoundToNearestLosingTheSmallerTerm) {
  expect_absorption_is_round_to_nearest<BF16Format>(McaFormat::bf16, 8);
  expect_absorption_is_round_to_nearest<FP16Format>(McaFormat::fp16, 11);
  // bf16 around 1 (ulp 2^-7 above, 2^-8 below): hand-derived.
  EXPECT_TRUE(mca_absorbs(1.0, 0x1p-10, McaFormat::bf16));
  EXPECT_FALSE(mca_absorbs(1.0, 0x1p-8, McaFormat::bf16));        // a tie: left to the perturbation
  EXPECT_TRUE(mca_absorbs(1.0, -0x1p-10, McaFormat::bf16));       // 1 − 2^-10: nearest is 1
  EXPECT_FALSE(mca_absorbs(1.0, -3 * 0x1p-10, McaFormat::bf16));  // nearest is 1 − 2^-8
  EXPECT_TRUE(mca_absorbs(1.5, -3 * 0x1p-10, McaFormat::bf16));   // not a power of two: half-ulp 2^-8
  EXPECT_FALSE(mca_absorbs(0x1p-10, 1.0, McaFormat::bf16));       // the larger term is never lost
  EXPECT_FALSE(mca_absorbs(1.0, 0x1p-30, McaFormat::fp32));       // 16-bit formats only
  EXPECT_FALSE(mca_absorbs(0x1p-130, 0x1p-150, McaFormat::bf16));  // below the normal range: absolute rounding
  EXPECT_FALSE(mca_absorbs(1.0, 0.0, McaFormat::bf16));
}

// ‖k kᵀ‖_F as the bf16 sequential form sums it: every product, square and partial
// sum rounded to bf16.
double bf16_frobenius(const std::vector<double>& k) {
  double s = 0.0;
  for (double a : k)
    for (double b : k) {
      const double h = BF16Format::round(a * b);
      s = BF16Format::round(s + BF16Format::round(h * h));
    }
  return BF16Format::round(std::sqrt(s));
}

// The same in the model: McaReal at u = 2^-8 with the run's key; op format bf16
// (absorbing), or `any` (every result perturbed around the exact one: the model
// before absorption, for contrast).
double model_frobenius(const std::vector<double>& k, std::uint64_t run, McaFormat f) {
  mca_seed(run, std::ldexp(1.0, -8), f, 0.0, McaFormat::any);
  McaReal s(0.0);
  for (double a : k)
    for (double b : k) {
      const McaReal h = McaReal(a) * McaReal(b);
      s = s + h * h;
    }
  const double r = sqrt(s).value();
  mca_seed(0, 0.0, McaFormat::any, 0.0, McaFormat::any);
  return r;
}

TEST(McaAbsorption, Bf16FrobeniusNormOfARankOneMatrixComesOutShortInTheModelToo) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n01;
  for (int key = 0; key < 8; ++key) {
    std::vector<double> k(16);
    for (double& x : k) x = BF16Format::round(n01(rng));
    double lmax = 0.0;  // λ_max(k kᵀ) = ‖k‖² = ‖k kᵀ‖_F, exactly
    for (double x : k) lmax += x * x;
    const double rn = bf16_frobenius(k);
    double mean = 0.0, unbiased = 0.0;
    for (std::uint64_t run = 1; run <= 32; ++run) {
      mean += model_frobenius(k, run, McaFormat::bf16) / 32;
      unbiased += model_frobenius(k, run, McaFormat::any) / 32;
    }
    std::printf("key %d: bf16 %+.4f, model mean %+.4f, unbiased model mean %+.4f (relative to lambda_max)\n", key,
                rn / lmax - 1, mean / lmax - 1, unbiased / lmax - 1);
    // Rounding to nearest comes out short (measured 0.35–3.0 % over these keys) and so
    // does the model (1.7–4.2 %: it drops what bf16 drops and keeps its spread, ~1 %
    // a run, ~0.2 % in a mean of 32); the unbiased model's mean stays within that
    // sampling error of λ_max.
    EXPECT_LT(rn, lmax) << "key " << key;
    EXPECT_LT(mean, lmax * (1 - 0.01)) << "key " << key;
    EXPECT_LT(std::fabs(unbiased / lmax - 1), 0.006) << "key " << key;

  }
}

// The finding's case: gka, B = 1, T = 64, H = 2, K = V = 16, every gate bf16(−10)
// (H_t ≈ k_t k_tᵀ), Chebyshev with 30 iterations from ω₀ = 2 (the gate's config);
// the bf16 sequential forward and backward judged under their own models against
// the MPFR oracle. On these inputs the forms' relative errors are O(1) (o: 3.8;
// dq: 18): bf16 arithmetic has no digit to give here, and the model must say that
// a correct kernel makes such errors, not fail it.
TEST(McaAbsorption, GkaStrongDecayBf16SequentialFormsPass) {
  const LayerEntry& e = find_layer("gka");
  const Dims dims{{"B", 1}, {"T", 64}, {"H", 2}, {"K", 16}, {"V", 16}};
  const Config cfg = Config::make(e.spec, {{"solver", "chebyshev"}});
  double worst = 0.0;
  for (std::uint64_t seed : {1, 2, 3}) {
    for (Direction dir : {Direction::forward, Direction::backward}) {
      const VectorCase vc{"strong_decay", "", dims, Regime{}, {{"solver", "chebyshev"}}};
      TensorMap<double> in =
          dir == Direction::backward ? generate_backward_inputs(e.spec, vc, seed) : generate_inputs(e.spec, vc, seed);
      for (double& x : in.at("g").data) x = BF16Format::round(-10.0);
      Judge judge(e, in, cfg, Arith{Tier::mpfr, 256}, dir);
      ModelSpec ms;
      ms.form = Form::sequential;
      ms.direction = dir;
      ms.dtype = Tier::bf16;
      ms.seed = seed;
      const TensorMap<double> cand = run_layer(e, Form::sequential, Arith{Tier::bf16, 0}, in, cfg, 64, dir).values;
      const CheckResult r = judge(cand, ms);
      for (const TensorVerdict& t : r.tensors) {
        if (!t.present) continue;
        EXPECT_TRUE(t.pass) << "seed " << seed << (dir == Direction::backward ? " backward " : " forward ") << t.name
                            << " ratio " << t.max_ratio;
        worst = std::max(worst, t.max_ratio);
      }
    }
  }
  EXPECT_GT(worst, 0.0);
  RecordProperty("worst_ratio", std::to_string(worst));
  std::printf("worst ratio over o, hkk, ht, dq, dk, dv, dg, 3 seeds: %.3g\n", worst);
}

}  // namespace
}  // namespace ttr::test
