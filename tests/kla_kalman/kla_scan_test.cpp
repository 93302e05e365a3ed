// kla_kalman scan forms (reference/kla_kalman/scan.hpp) against the sequential
// information form (reference/kla_kalman/sequential.hpp), called directly:
//  * the two compositions they rest on — Möbius matrices (KLA-K Thm 1, Cor. 1.1)
//    and affine pairs (Thm 2, Cor. 2.1) — are associative and act as the
//    one-step recursions compose, exactly over the rationals (RapidCheck);
//  * over the rationals both forms ARE the sequential form (exact equality):
//    they only re-bracket compositions and apply P_t to Λ_0 once;
//  * in MPFR-256 they agree with it to 1e-60 relative for C ∈ {1, 2, 3, 16, 64,
//    T, T + 5}, T ∈ {37, 70} and adversarial inputs (p̄ = 0 with ā = 0.5 over
//    T = 600, where Λ grows like 4^t to ~10^361, past float64's range; ā = 1;
//    λv ~ 1e-30; lambda_init and eta_init present);
//  * in fp32 and bf16 (fp32 accumulation) they really round, within the error
//    the unit roundoff predicts, and the fp32 Möbius products stay in range
//    where their unscaled entries would overflow.
//
// Error model for MPFR-256 (u = 2^-256 ≈ 8.6e-78). The entries of M_t are ≥ 0, so
// every composed matrix entry is a sum of products of non-negative numbers: the
// computed entry has relative error ≤ (number of roundings on its path) · u ≤
// 4T·u whatever the bracketing, and Λ_t = (aΛ_0 + b)/(cΛ_0 + d) adds 4u. The
// affine prefixes (A_{1:t}, b_{1:t}) are the same sums as the sequential η_t, with
// signed terms; both sides carry ≲ 4T·u relative to the terms' magnitude. At
// T = 600 that is ≈ 2e-73: the tolerance 1e-60 per element leaves 10^13 for
// cancellation in o = Σ_n q_n μ_n or η_T (none of that size in these data).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "reference/core/multiprecision.hpp"
#include "reference/core/policy.hpp"
#include "reference/kla_kalman/scan.hpp"
#include "reference/kla_kalman/sequential.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"
#include "tests/support/rational.hpp"

namespace {

using ttr::Tensor;
using ttr::TensorMap;
using ttr::test::PrecisionGuard;
using ttr::test::rational;
using ttr::test::uniform;
using M = ttr::mpfr_real;
using BF16 = ttr::Mixed16Policy<ttr::BF16Format>;
using FP32 = ttr::ExactPolicy<float>;

struct Dims {
  std::int64_t B, T, H, N, D;
};

struct Opts {
  double p_lo = 0.01, p_hi = 0.5;  // p̄ range; p_hi = 0: p̄ = 0
  double a_lo = 0.5, a_hi = 1.0;   // ā range; a_lo = a_hi: that value exactly
  double k_lo = -1, k_hi = 1;
  double lv_lo = 0.2, lv_hi = 3.0;
  bool init = false;               // lambda_init, eta_init present
};

TensorMap<double> make_inputs(const Dims& d, std::uint64_t seed, const Opts& o) {
  TensorMap<double> in;
  in["q"] = uniform({d.B, d.T, d.H, d.N}, seed + 1, -1, 1);
  in["k"] = uniform({d.B, d.T, d.H, d.N}, seed + 2, o.k_lo, o.k_hi);
  in["v"] = uniform({d.B, d.T, d.H, d.D}, seed + 3, -1, 1);
  in["lambda_v"] = uniform({d.B, d.T, d.H, d.D}, seed + 4, o.lv_lo, o.lv_hi);
  in["a_bar"] = o.a_lo == o.a_hi ? Tensor<double>({d.H, d.N, d.D}, o.a_lo) : uniform({d.H, d.N, d.D}, seed + 5, o.a_lo, o.a_hi);
  in["p_bar"] = o.p_hi > 0 ? uniform({d.H, d.N, d.D}, seed + 6, o.p_lo, o.p_hi) : Tensor<double>({d.H, d.N, d.D}, 0.0);
  if (o.init) {
    in["lambda_init"] = uniform({d.B, d.H, d.N, d.D}, seed + 7, 0.1, 5.0);
    in["eta_init"] = uniform({d.B, d.H, d.N, d.D}, seed + 8, -2.0, 2.0);
  }
  return in;
}

template <class T>
TensorMap<T> convert(const TensorMap<double>& in) {  // exact for MPFR, RNE for float (as run_in_tier)
  TensorMap<T> out;
  for (const auto& [name, x] : in) {
    Tensor<T>& y = out[name];
    y.shape = x.shape;
    for (double e : x.data) y.data.push_back(ttr::from_double<T>(e));
  }
  return out;
}

template <class T>
ttr::KlaInputs<T> kla_inputs(const TensorMap<T>& t) {
  const auto opt = [&](const char* n) { return t.count(n) ? &t.at(n) : nullptr; };
  return {t.at("q"), t.at("k"), t.at("v"), t.at("lambda_v"), t.at("a_bar"), t.at("p_bar"), opt("lambda_init"),
          opt("eta_init")};
}

const char* const kOutputs[] = {"o", "o_var", "lambda_T", "eta_T"};

template <class T>
TensorMap<T> as_map(ttr::KlaOutputs<T>& r) {
  return {{"o", std::move(r.o)}, {"o_var", std::move(r.o_var)}, {"lambda_T", std::move(r.lambda_T)},
          {"eta_T", std::move(r.eta_T)}};
}

// A form: 0 = sequential, -1 = scan (whole-sequence Blelloch), C ≥ 1 = chunk of C.
constexpr int kSequential = 0, kScan = -1;

template <class P>
TensorMap<typename P::acc> run(const TensorMap<typename P::acc>& t, int form, double lambda0 = 1.0,
                               double scale = 1.0) {
  using A = typename P::acc;
  const ttr::KlaInputs<A> in = kla_inputs(t);
  const A l0 = ttr::from_double<A>(lambda0), sc = ttr::from_double<A>(scale);
  ttr::KlaOutputs<A> r;
  if (form == kSequential)
    ttr::kla_kalman_sequential(in, l0, sc, r);
  else if (form == kScan)
    ttr::kla_kalman_scan<P>(in, l0, sc, r);
  else
    ttr::kla_kalman_chunk<P>(in, l0, sc, form, r);
  return as_map(r);
}

std::string form_name(int form) {
  return form == kScan ? "scan" : form == kSequential ? "sequential" : "chunk " + std::to_string(form);
}

// max_i |got_i − want_i| / |want_i| (|got_i − want_i| where want_i = 0).
template <class T>
M max_rel(const Tensor<T>& got, const Tensor<M>& want) {
  EXPECT_EQ(got.shape, want.shape);
  M worst = 0;
  for (std::size_t i = 0; i < want.data.size(); ++i) {
    const M err = abs(M(got.data[i]) - want.data[i]);
    worst = std::max(worst, want.data[i] == 0 ? err : M(err / abs(want.data[i])));
  }
  return worst;
}
double to_d(const M& x) { return x.convert_to<double>(); }

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

std::vector<int> chunk_forms(std::int64_t T) {
  return {kScan, 1, 2, 3, 16, 64, static_cast<int>(T), static_cast<int>(T) + 5};
}

// ------------------------------------------------------------ compositions, exactly

rc::Gen<rational> small_rational(int lo, int hi) {
  return rc::gen::map(rc::gen::pair(rc::gen::inRange(lo, hi + 1), rc::gen::inRange(1, 9)),
                      [](const std::pair<int, int>& p) { return rational(p.first, p.second); });
}
rc::Gen<std::vector<rational>> rationals(std::size_t n, int lo, int hi) {
  return rc::gen::container<std::vector<rational>>(n, small_rational(lo, hi));
}

constexpr std::size_t kSlots = 3;

ttr::MobiusBlock<rational> any_mobius() {
  return {*rationals(kSlots, -9, 9), *rationals(kSlots, -9, 9), *rationals(kSlots, -9, 9), *rationals(kSlots, -9, 9)};
}
// M_t of KLA-K eq. (17) from ā ∈ (0, 1], p̄ ≥ 0, φ ≥ 0.
ttr::MobiusBlock<rational> kla_mobius() {
  ttr::MobiusBlock<rational> m = ttr::MobiusBlock<rational>::identity(kSlots);
  for (std::size_t s = 0; s < kSlots; ++s) {
    const rational a = *small_rational(1, 8) / 8, p = *small_rational(0, 4), phi = *small_rational(0, 9);
    m.a[s] = 1 + p * phi;
    m.b[s] = a * a * phi;
    m.c[s] = p;
    m.d[s] = a * a;
  }
  return m;
}
ttr::DiagonalAffine<rational> any_affine(int width) {
  return {width, *rationals(kSlots, -9, 9), *rationals(kSlots * width, -9, 9)};
}

template <class E, class Compose>
E composed(const E& earlier, const E& later, Compose compose) {
  E out = later;
  compose(earlier, later, out);
  return out;
}

RC_GTEST_PROP(KlaScanCompositions, MobiusCompositionIsAssociative, ()) {
  const auto x = any_mobius(), y = any_mobius(), z = any_mobius();
  const auto c = ttr::compose_mobius<rational>;
  const auto left = composed(composed(x, y, c), z, c), right = composed(x, composed(y, z, c), c);
  RC_ASSERT(left.a == right.a && left.b == right.b && left.c == right.c && left.d == right.d);
}

// (later ∘ earlier)(Λ) = later(earlier(Λ)) for KLA's matrices and Λ > 0 (Thm 1 → Cor. 1.1),
// and each M_t acts as eq. (18): Λ/(ā² + p̄Λ) + φ.
RC_GTEST_PROP(KlaScanCompositions, MobiusCompositionActsAsTheRecursion, ()) {
  const auto e = kla_mobius(), l = kla_mobius();
  const auto lam = rationals(kSlots, 1, 9);
  const auto c = composed(e, l, ttr::compose_mobius<rational>);
  for (std::size_t s = 0; s < kSlots; ++s) {
    const rational lam0 = *small_rational(1, 9);
    rational once, twice, both, scratch;
    ttr::apply_mobius(e, s, lam0, once, scratch);
    ttr::apply_mobius(l, s, once, twice, scratch);
    ttr::apply_mobius(c, s, lam0, both, scratch);
    RC_ASSERT(both == twice);
    const rational phi = e.b[s] / e.d[s];  // ā²φ / ā²
    RC_ASSERT(once == lam0 / (e.d[s] + e.c[s] * lam0) + phi);
  }
}

RC_GTEST_PROP(KlaScanCompositions, AffineCompositionIsAssociativeAndActsAsTheRecursion, ()) {
  const auto x = any_affine(1), y = any_affine(1), z = any_affine(1);
  const auto c = ttr::compose_affine<rational>;
  const auto left = composed(composed(x, y, c), z, c), right = composed(x, composed(y, z, c), c);
  RC_ASSERT(left.A == right.A && left.B == right.B);
  const auto xy = composed(x, y, c);
  for (std::size_t s = 0; s < kSlots; ++s) {
    const rational eta0 = *small_rational(-9, 9);
    const rational step = y.A[s] * (x.A[s] * eta0 + x.B[s]) + y.B[s];  // η_2 = f_2 (f_1 η_0 + b_1) + b_2
    RC_ASSERT(xy.A[s] * eta0 + xy.B[s] == step);
  }
}

// ------------------------------------------------------------ exact over the rationals

TEST(KlaScan, EqualsSequentialExactlyOverRationals) {
  using Q = ttr::ExactPolicy<rational>;
  const std::int64_t B = 1, T = 20, H = 1, N = 2, D = 2;
  for (bool init : {false, true}) {
    SCOPED_TRACE(init ? "with lambda_init, eta_init" : "lambda0");
    TensorMap<rational> t;
    t["q"] = ttr::test::quarters({B, T, H, N}, 1);
    t["k"] = ttr::test::quarters({B, T, H, N}, 2);
    t["v"] = ttr::test::quarters({B, T, H, D}, 3);
    t["lambda_v"] = ttr::test::quarters({B, T, H, D}, 4, 1, 8);
    t["a_bar"] = ttr::test::quarters({H, N, D}, 5, 1, 4);
    t["p_bar"] = ttr::test::quarters({H, N, D}, 6, 0, 2);
    if (init) {
      t["lambda_init"] = ttr::test::quarters({B, H, N, D}, 7, 1, 12);
      t["eta_init"] = ttr::test::quarters({B, H, N, D}, 8);
    }
    const auto want = run<Q>(t, kSequential, 1.5, 0.75);
    for (int form : {kScan, 1, 3, 7, 20, 25}) {
      const auto got = run<Q>(t, form, 1.5, 0.75);
      for (const char* name : kOutputs) ttr::test::expect_exact(got.at(name), want.at(name), name);
    }
  }
}

// ------------------------------------------------------------ MPFR-256

struct MpCase {
  const char* name;
  Dims dims;
  Opts opts;
  double lambda0 = 1.0, scale = 1.0;
};

std::vector<MpCase> mp_cases() {
  Opts zero_noise;
  zero_noise.p_hi = 0;
  zero_noise.a_lo = zero_noise.a_hi = 0.5;
  Opts unit_a;
  unit_a.a_lo = unit_a.a_hi = 1.0;
  Opts tiny_lv;
  tiny_lv.lv_lo = 1e-30;
  tiny_lv.lv_hi = 2e-30;
  Opts init;
  init.init = true;
  return {{"random T=37", {2, 37, 2, 3, 4}, {}},
          {"random T=70", {1, 70, 2, 3, 4}, {}},
          {"p=0 a=0.5 T=600 (Λ ~ 4^t)", {1, 600, 1, 2, 3}, zero_noise},
          {"a=1", {1, 37, 2, 3, 2}, unit_a},
          {"lambda_v ~ 1e-30", {1, 37, 1, 3, 3}, tiny_lv},
          {"lambda_init, eta_init, lambda0, scale", {2, 37, 1, 2, 3}, init, 2.5, 0.375}};
}

TEST(KlaScan, ScanAndChunkEqualSequentialInMpfr256) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  using E = ttr::ExactPolicy<M>;
  M overall = 0;
  for (const MpCase& c : mp_cases()) {
    SCOPED_TRACE(c.name);
    const TensorMap<M> t = convert<M>(make_inputs(c.dims, 40, c.opts));
    const TensorMap<M> want = run<E>(t, kSequential, c.lambda0, c.scale);
    M worst = 0;
    for (int form : chunk_forms(c.dims.T)) {
      const TensorMap<M> got = run<E>(t, form, c.lambda0, c.scale);
      for (const char* name : kOutputs) {
        const M e = max_rel(got.at(name), want.at(name));
        EXPECT_LT(e, M(1e-60)) << form_name(form) << ", " << name << ": " << e.str(3);
        worst = std::max(worst, e);
      }
    }
    std::printf("[ measured ] %-40s max relative error (scan, chunks) vs sequential: %s\n", c.name,
                worst.str(3).c_str());
    overall = std::max(overall, worst);
  }
  EXPECT_GT(overall, M(0)) << "different bracketings should round differently somewhere";
}

// The adversarial p̄ = 0 case really leaves float's range (so only MPFR carries it).
TEST(KlaScan, ZeroNoiseCaseExceedsFloat64Range) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const MpCase c = mp_cases()[2];
  const auto got = run<ttr::ExactPolicy<M>>(convert<M>(make_inputs(c.dims, 40, c.opts)), kScan);
  for (const M& lam : got.at("lambda_T").data) EXPECT_GT(lam, M(DBL_MAX));
}

TEST(KlaScan, EmptySequenceKeepsTheInitialState) {
  const TensorMap<double> in = make_inputs({1, 0, 2, 2, 3}, 7, {.init = true});
  for (int form : {kScan, 4}) {
    const auto got = run<ttr::ExactPolicy<double>>(in, form);
    EXPECT_EQ(got.at("o").shape, (ttr::Shape{1, 0, 2, 3}));
    EXPECT_EQ(got.at("lambda_T").data, in.at("lambda_init").data);
    EXPECT_EQ(got.at("eta_T").data, in.at("eta_init").data);
  }
}

TEST(KlaScan, ChunkSizeMustBePositive) {
  const TensorMap<double> in = make_inputs({1, 5, 1, 2, 2}, 7, {});
  EXPECT_THROW(run<ttr::ExactPolicy<double>>(in, -7), std::invalid_argument);
}

// ------------------------------------------------------------ fp32 and bf16

// Error model (normwise for o and eta_T, per element for the positive o_var and
// lambda_T). fp32: u = 2^-24 ≈ 6e-8. The inputs are rounded to float (≤ u each),
// every composed Möbius entry is a non-negative sum (relative error ≤ 3u per
// composition along its path), the Blelloch tree puts ≤ 2·log2(T) ≈ 13 of them
// on any prefix's path (T = 70), the chunked scan ≤ C + 2·log2(T/C) + 1: a
// few tens of u, ~1e-6, plus the readout's cancellation in o. bf16: q, k, v
// and every stored composition are rounded to 8 bits (u = 2^-8 ≈ 3.9e-3): the
// inputs alone perturb φ = k²λv by up to 2u and b = kλv v by 2u, and each stored
// composition adds ≤ u, so errors of a few u, ~1e-2, are expected — and at least
// ~u/16, far above anything fp32 rounding could produce. Bounds: fp32 ≤ 64u_32,
// bf16 ≤ 16u_bf16 ≈ 0.06 and ≥ u_bf16/16.
constexpr double kU32 = 0x1.0p-24, kUbf16 = 0x1.0p-8;

struct LowErrors {
  double o, o_var, lambda_T, eta_T;
  double max() const { return std::max({o, o_var, lambda_T, eta_T}); }
};

template <class P>
LowErrors low_errors(const TensorMap<double>& in, int form, const TensorMap<M>& want) {
  const auto got = run<P>(convert<float>(in), form);
  return {normwise(got.at("o"), want.at("o")), to_d(max_rel(got.at("o_var"), want.at("o_var"))),
          to_d(max_rel(got.at("lambda_T"), want.at("lambda_T"))),
          normwise(got.at("eta_T"), want.at("eta_T"))};
}

TEST(KlaScanPrecision, Fp32AndBf16RoundWithinTheirUnitRoundoff) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const Dims d{1, 70, 2, 4, 4};
  const TensorMap<double> in = make_inputs(d, 60, {});
  const TensorMap<M> want = run<ttr::ExactPolicy<M>>(convert<M>(in), kSequential);
  for (int form : {kScan, 16, 1}) {
    SCOPED_TRACE(form_name(form));
    const LowErrors f32 = low_errors<FP32>(in, form, want), b16 = low_errors<BF16>(in, form, want);
    std::printf("[ measured ] %-9s fp32: o %.2e o_var %.2e lambda_T %.2e eta_T %.2e | bf16: o %.2e o_var %.2e "
                "lambda_T %.2e eta_T %.2e\n",
                form_name(form).c_str(), f32.o, f32.o_var, f32.lambda_T, f32.eta_T, b16.o, b16.o_var, b16.lambda_T,
                b16.eta_T);
    for (double e : {f32.o, f32.o_var, f32.lambda_T, f32.eta_T}) {
      EXPECT_GT(e, 0.0);
      EXPECT_LT(e, 64 * kU32);
    }
    for (double e : {b16.o, b16.o_var, b16.lambda_T, b16.eta_T}) {
      EXPECT_GT(e, kUbf16 / 16);
      EXPECT_LT(e, 16 * kUbf16);
    }
    EXPECT_GT(b16.max(), 100 * f32.max());
    const auto r32 = run<FP32>(convert<float>(in), form), r16 = run<BF16>(convert<float>(in), form);
    EXPECT_NE(r32.at("o").data, r16.at("o").data);
    for (float x : r16.at("o").data) EXPECT_EQ(x, ttr::round_float_to_bf16(x)) << "o is stored in bf16";
  }
}

// p̄φ ≥ 0.5 per token (≈ 3.5 on average): the entries of the unscaled prefix
// products grow at least like Π(1 + p̄φ_t), past FLT_MAX within 200 tokens, while
// Λ_t stays near its fixed point; the power-of-two rescaling
// keeps fp32 (and bf16, same exponent range) finite and accurate.
TEST(KlaScanPrecision, Fp32MobiusProductsStayInRange) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const Dims d{1, 200, 1, 2, 3};
  Opts big;
  big.p_lo = 0.5;
  big.p_hi = 1.0;
  big.k_lo = 1.0;
  big.k_hi = 2.0;
  big.lv_lo = 1.0;
  big.lv_hi = 3.0;
  const TensorMap<double> in = make_inputs(d, 80, big);
  // Unscaled P_T of slot 0 in MPFR, multiplied out here (compose_mobius rescales
  // wherever the scalar has an exponent, MPFR included): its largest entry exceeds FLT_MAX.
  const TensorMap<M> t = convert<M>(in);
  M pa = 1, pb = 0, pc = 0, pd = 1;  // P = M_s ⋯ M_1
  const M a = t.at("a_bar").data[0], p = t.at("p_bar").data[0];
  for (std::int64_t s = 0; s < d.T; ++s) {
    const M& kn = t.at("k").data[static_cast<std::size_t>(s * d.N)];
    const M phi = kn * kn * t.at("lambda_v").data[static_cast<std::size_t>(s * d.D)];
    const M ma = 1 + p * phi, mb = a * a * phi, mc = p, md = a * a;
    const M na = ma * pa + mb * pc, nb = ma * pb + mb * pd, nc = mc * pa + md * pc, nd = mc * pb + md * pd;
    pa = na, pb = nb, pc = nc, pd = nd;
  }
  EXPECT_GT(pa, M(FLT_MAX)) << "the case should overflow without rescaling";

  const TensorMap<M> want = run<ttr::ExactPolicy<M>>(t, kSequential);
  for (int form : {kScan, 16}) {
    const auto got = run<FP32>(convert<float>(in), form);
    for (const char* name : kOutputs)
      for (float x : got.at(name).data) ASSERT_TRUE(std::isfinite(x)) << form_name(form) << " " << name;
    const LowErrors e = low_errors<FP32>(in, form, want);
    std::printf("[ measured ] fp32 %-9s with p̄φ ≥ 0.5, T = 200: max error %.2e\n", form_name(form).c_str(), e.max());
    EXPECT_LT(e.max(), 64 * kU32) << form_name(form);
    const LowErrors b = low_errors<BF16>(in, form, want);
    EXPECT_LT(b.max(), 16 * kUbf16) << form_name(form);
  }
}

}  // namespace
