// Scan form of linear_attn, simple_gla and gla (reference/family/gated_linear_scan.hpp
// through reference/<layer>/scan.hpp) against their sequential forms, called directly:
//  * the affine pairs (Diag(D), B) compose associatively and act on the K×V state as
//    the recurrence does, exactly over the rationals (RapidCheck);
//  * over the rationals the scan IS the sequential form (linear_attn; simple_gla and
//    gla with g = 0, where e^g = 1 is exact), whole-sequence and chunked;
//  * in MPFR-256 it agrees with the sequential form to 1e-60 (normwise) with and
//    without h0, for T ∈ {37, 70}, with the landmark decays of gated_inputs
//    (token 1: decay exactly 1; token 3: decay 1e-30), with every decay exactly 1,
//    and with every decay near 0 (~1e-30), for the whole-sequence scan and the
//    chunked plan with C ∈ {1, 2, 3, 16, 64, T, T + 5};
//  * in fp32 and bf16 (fp32 accumulation) it really rounds, within the error the
//    unit roundoff predicts.
//
// Error model for MPFR-256 (u = 2^-256 ≈ 8.6e-78): S_t = Σ_s (Π_{r>s} d_r) k_s v_sᵀ
// (+ Π d_r S_0) is a sum of ≤ T + 1 products of ≤ T + 2 factors; any bracketing of
// it rounds each term ≲ 2T times, so both forms are within ~2T·u·Σ|terms| ≈ 1e-74
// of the exact state for T = 70, |terms| ≤ 1 and a few tens of them; the readout adds
// K roundings. Normwise over the tensor (max|Δ|/max|want|), 1e-60 leaves 10^13 for
// cancellation between Σ|terms| and max|o|.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "reference/core/multiprecision.hpp"
#include "reference/core/policy.hpp"
#include "reference/family/gated_linear_scan.hpp"
#include "reference/gla/scan.hpp"
#include "reference/gla/sequential.hpp"
#include "reference/linear_attn/scan.hpp"
#include "reference/linear_attn/sequential.hpp"
#include "reference/simple_gla/scan.hpp"
#include "reference/simple_gla/sequential.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/rational.hpp"

namespace {

using ttr::Tensor;
using ttr::TensorMap;
using ttr::test::PrecisionGuard;
using ttr::test::rational;
using M = ttr::mpfr_real;
using BF16 = ttr::Mixed16Policy<ttr::BF16Format>;
using FP32 = ttr::ExactPolicy<float>;

enum class Layer { linear_attn, simple_gla, gla };
const Layer kLayers[] = {Layer::linear_attn, Layer::simple_gla, Layer::gla};
const char* name_of(Layer l) {
  return l == Layer::linear_attn ? "linear_attn" : l == Layer::simple_gla ? "simple_gla" : "gla";
}

TensorMap<double> make_inputs(Layer l, std::int64_t T, bool with_h0, std::uint64_t seed) {
  return ttr::test::gated_inputs(1, T, 2, 4, 3, seed,
                                 {.beta = false, .per_key_gate = l == Layer::gla, .with_h0 = with_h0});
}

template <class T>
TensorMap<T> convert(const TensorMap<double>& in) {  // exact for MPFR, RNE for float
  TensorMap<T> out;
  for (const auto& [name, x] : in) {
    Tensor<T>& y = out[name];
    y.shape = x.shape;
    for (double e : x.data) y.data.push_back(ttr::from_double<T>(e));
  }
  return out;
}

template <class T>
const Tensor<T>* h0_of(const TensorMap<T>& t) {
  return t.count("h0") ? &t.at("h0") : nullptr;
}

template <class T>
TensorMap<T> run_sequential(Layer l, const TensorMap<T>& t, double scale) {
  TensorMap<T> out;
  const T sc = ttr::from_double<T>(scale);
  if (l == Layer::linear_attn)
    ttr::linear_attn_sequential<T>(t.at("q"), t.at("k"), t.at("v"), h0_of(t), sc, out["o"], out["ht"]);
  else if (l == Layer::simple_gla)
    ttr::simple_gla_sequential<T>(t.at("q"), t.at("k"), t.at("v"), t.at("g"), h0_of(t), sc, out["o"], out["ht"]);
  else
    ttr::gla_sequential<T>(t.at("q"), t.at("k"), t.at("v"), t.at("g"), h0_of(t), sc, out["o"], out["ht"]);
  return out;
}

// chunk == 0: the layer's scan form; chunk ≥ 1: the chunked plan of the same scan.
template <class P>
TensorMap<typename P::acc> run_scan(Layer l, const TensorMap<typename P::acc>& t, double scale, int chunk = 0) {
  using A = typename P::acc;
  TensorMap<A> out;
  const A sc = ttr::from_double<A>(scale);
  if (chunk > 0) {
    const ttr::Decay kind = l == Layer::linear_attn ? ttr::Decay::none
                            : l == Layer::simple_gla ? ttr::Decay::scalar
                                                     : ttr::Decay::per_key;
    ttr::gated_linear_scan_forward<P>(kind, t.at("q"), t.at("k"), t.at("v"),
                                      l == Layer::linear_attn ? nullptr : &t.at("g"), h0_of(t), sc, out["o"],
                                      out["ht"], ttr::ScanPlan::chunked(chunk));
  } else if (l == Layer::linear_attn) {
    ttr::linear_attn_scan<P>(t.at("q"), t.at("k"), t.at("v"), h0_of(t), sc, out["o"], out["ht"]);
  } else if (l == Layer::simple_gla) {
    ttr::simple_gla_scan<P>(t.at("q"), t.at("k"), t.at("v"), t.at("g"), h0_of(t), sc, out["o"], out["ht"]);
  } else {
    ttr::gla_scan<P>(t.at("q"), t.at("k"), t.at("v"), t.at("g"), h0_of(t), sc, out["o"], out["ht"]);
  }
  return out;
}

// max_i |got_i − want_i| / max_i |want_i|.
template <class T>
double normwise(const Tensor<T>& got, const Tensor<M>& want) {
  EXPECT_EQ(got.shape, want.shape);
  M num = 0, den = 0;
  for (std::size_t i = 0; i < want.data.size(); ++i) {
    num = std::max(num, M(abs(M(got.data[i]) - want.data[i])));
    den = std::max(den, M(abs(want.data[i])));
  }
  return M(den == 0 ? num : M(num / den)).convert_to<double>();
}

// ------------------------------------------------------------ compositions, exactly

constexpr int kRows = 3, kWidth = 2;

rc::Gen<std::vector<rational>> rationals(std::size_t n) {
  return rc::gen::container<std::vector<rational>>(
      n, rc::gen::map(rc::gen::pair(rc::gen::inRange(-9, 10), rc::gen::inRange(1, 9)),
                      [](const std::pair<int, int>& p) { return rational(p.first, p.second); }));
}
ttr::DiagonalAffine<rational> any_pair() { return {kWidth, *rationals(kRows), *rationals(kRows * kWidth)}; }
ttr::DiagonalAffine<rational> composed(const ttr::DiagonalAffine<rational>& e, const ttr::DiagonalAffine<rational>& l) {
  ttr::DiagonalAffine<rational> out = l;
  ttr::compose_affine(e, l, out);
  return out;
}
// (D, B) acting on a kRows × kWidth state: Diag(D) S + B.
std::vector<rational> act(const ttr::DiagonalAffine<rational>& e, const std::vector<rational>& S) {
  std::vector<rational> out(S.size());
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kWidth; ++j) out[i * kWidth + j] = e.A[i] * S[i * kWidth + j] + e.B[i * kWidth + j];
  return out;
}

RC_GTEST_PROP(GatedLinearScanCompositions, AffinePairCompositionIsAssociative, ()) {
  const auto x = any_pair(), y = any_pair(), z = any_pair();
  const auto left = composed(composed(x, y), z), right = composed(x, composed(y, z));
  RC_ASSERT(left.A == right.A && left.B == right.B);
}

RC_GTEST_PROP(GatedLinearScanCompositions, CompositionActsAsTwoRecurrenceSteps, ()) {
  const auto x = any_pair(), y = any_pair();
  const auto S0 = *rationals(kRows * kWidth);
  RC_ASSERT(act(composed(x, y), S0) == act(y, act(x, S0)));
}

// ------------------------------------------------------------ exact over the rationals

TEST(GatedLinearScan, EqualsSequentialExactlyOverRationals) {
  using Q = ttr::ExactPolicy<rational>;
  const std::int64_t B = 1, T = 23, H = 2, K = 3, V = 2;
  for (Layer l : kLayers)
    for (bool with_h0 : {false, true}) {
      SCOPED_TRACE(std::string(name_of(l)) + (with_h0 ? " with h0" : ""));
      TensorMap<rational> t;
      t["q"] = ttr::test::quarters({B, T, H, K}, 11);
      t["k"] = ttr::test::quarters({B, T, H, K}, 12);
      t["v"] = ttr::test::quarters({B, T, H, V}, 13);
      t["g"] = l == Layer::gla ? Tensor<rational>({B, T, H, K}, rational(0)) : Tensor<rational>({B, T, H}, rational(0));
      if (with_h0) t["h0"] = ttr::test::quarters({B, H, K, V}, 14);
      const auto want = run_sequential(l, t, 0.5);
      for (int chunk : {0, 1, 2, 5, 23, 30}) {
        const auto got = run_scan<Q>(l, t, 0.5, chunk);
        for (const char* name : {"o", "ht"}) ttr::test::expect_exact(got.at(name), want.at(name), name);
      }
    }
}

// ------------------------------------------------------------ MPFR-256

struct DecayCase {
  const char* name;
  double g_lo, g_hi;  // g_lo = g_hi = 1: keep gated_inputs' gates (with their landmarks)
};

TEST(GatedLinearScan, EqualsSequentialInMpfr256) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  using E = ttr::ExactPolicy<M>;
  const DecayCase decays[] = {{"landmarks: decay 1 at token 1, 1e-30 at token 3", 1, 1},
                              {"every decay exactly 1", 0, 0},
                              {"every decay ~1e-30", std::log(2e-30), std::log(5e-31)}};
  double worst = 0;
  for (Layer l : kLayers)
    for (const DecayCase& dc : decays)
      for (std::int64_t T : {37, 70})
        for (bool with_h0 : {false, true}) {
          SCOPED_TRACE(std::string(name_of(l)) + ", " + dc.name + ", T = " + std::to_string(T) +
                       (with_h0 ? ", h0" : ""));
          if (l == Layer::linear_attn && dc.g_lo != 1) continue;  // no gate to vary
          TensorMap<double> in = make_inputs(l, T, with_h0, 300 + T);
          if (dc.g_lo != 1) in["g"] = ttr::test::uniform(in["g"].shape, 77, dc.g_lo, dc.g_hi);
          const TensorMap<M> t = convert<M>(in);
          const TensorMap<M> want = run_sequential(l, t, 0.625);
          for (int chunk : {0, 1, 2, 3, 16, 64, static_cast<int>(T), static_cast<int>(T) + 5}) {
            const TensorMap<M> got = run_scan<E>(l, t, 0.625, chunk);
            for (const char* name : {"o", "ht"}) {
              const double e = normwise(got.at(name), want.at(name));
              EXPECT_LT(e, 1e-60) << (chunk ? "chunk " + std::to_string(chunk) : "scan") << ", " << name;
              worst = std::max(worst, e);
            }
          }
        }
  std::printf("[ measured ] gated linear scan/chunked vs sequential, MPFR-256: max normwise relative error %.3g\n",
              worst);
}

TEST(GatedLinearScan, EmptySequenceReturnsTheInitialState) {
  for (Layer l : kLayers) {
    const TensorMap<double> in = make_inputs(l, 0, true, 5);
    const auto got = run_scan<ttr::ExactPolicy<double>>(l, in, 0.5);
    EXPECT_EQ(got.at("o").shape, (ttr::Shape{1, 0, 2, 3})) << name_of(l);
    EXPECT_EQ(got.at("ht").data, in.at("h0").data) << name_of(l);
  }
}

// ------------------------------------------------------------ fp32 and bf16

// Error model (normwise): fp32 u = 2^-24 ≈ 6e-8. Inputs rounded to float (≤ u);
// the Blelloch tree puts ≤ 2·log2(T) ≈ 13 compositions (two roundings each) on a
// prefix's path, the readout K = 4 more; relative to Σ|terms| ≲ √T·max|o| for
// these random signs, a bound of 64u is generous. bf16 (u = 2^-8 ≈ 3.9e-3): q, k,
// v rounded (a product k v q carries up to 3u), every stored composition's B
// rounded (≤ u per level) and o rounded (u): a few u expected; at least u/16,
// which fp32 rounding alone could not reach. Bounds: fp32 (0, 64u_32),
// bf16 (u_bf16/16, 16u_bf16), bf16 ≥ 100 × fp32.
constexpr double kU32 = 0x1.0p-24, kUbf16 = 0x1.0p-8;

TEST(GatedLinearScanPrecision, Fp32AndBf16RoundWithinTheirUnitRoundoff) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  for (Layer l : kLayers) {
    SCOPED_TRACE(name_of(l));
    const TensorMap<double> in = make_inputs(l, 70, true, 900);
    const TensorMap<M> want = run_sequential(l, convert<M>(in), 0.5);
    const auto r32 = run_scan<FP32>(l, convert<float>(in), 0.5), r16 = run_scan<BF16>(l, convert<float>(in), 0.5);
    const double o32 = normwise(r32.at("o"), want.at("o")), h32 = normwise(r32.at("ht"), want.at("ht"));
    const double o16 = normwise(r16.at("o"), want.at("o")), h16 = normwise(r16.at("ht"), want.at("ht"));
    std::printf("[ measured ] %-11s scan fp32: o %.2e ht %.2e | bf16: o %.2e ht %.2e\n", name_of(l), o32, h32, o16,
                h16);
    for (double e : {o32, h32}) {
      EXPECT_GT(e, 0.0);
      EXPECT_LT(e, 64 * kU32);
    }
    for (double e : {o16, h16}) {
      EXPECT_GT(e, kUbf16 / 16);
      EXPECT_LT(e, 16 * kUbf16);
    }
    EXPECT_GT(std::max(o16, h16), 100 * std::max(o32, h32));
    EXPECT_NE(r32.at("o").data, r16.at("o").data);
    for (float x : r16.at("o").data) EXPECT_EQ(x, ttr::round_float_to_bf16(x)) << "o is stored in bf16";
  }
}

}  // namespace
