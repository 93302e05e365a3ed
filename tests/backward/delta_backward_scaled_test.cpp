// The delta core's adjoint with the decay kept out of the states
// (reference/family/delta_backward_scaled.hpp), which the MPFR and MPFI tiers run,
// against the definition's layout (delta_backward.hpp; itself checked against the
// tape and finite differences per layer, tests/backward/delta_backward_test.cpp):
//  * the same gradients to 256-bit precision: normwise relative difference
//    ≤ 1e-70. Both are 256-bit evaluations of one function (u = 2^-256 ≈ 8.6e-78);
//    on these short, well-scaled cases each carries a forward error of a few
//    hundred u at most, so 1e-70 (~10^7 u) leaves room and still fails any slip of
//    algebra (a lost factor e_i or c̄_i is an O(1) difference);
//  * in the range regime, where the row factors leave [2^-256, 2^256] and fold back
//    into their rows: g_t ∈ [−200, −150] folds at every second token (e^{-175} ≈
//    2^-252.5, its square 2^-505), g_t ∈ [−30, −20] about every tenth, and a growing
//    state g_t ∈ [20, 30] (c past 2^256) likewise; the definition's layout has no
//    such factors, so agreement there is a check of the folding;
//  * bit for bit the same for every checkpoint spacing C (the folding decisions
//    depend on c and e alone, and S′, c are checkpointed together), in MPFR and, run
//    explicitly in this layout, in float64;
//  * the automatic choice: mpfr_real and mpfi_real take the scaled layout, float64
//    keeps the definition's (bit for bit the definition; its dd partner must run the
//    same operations, docs/oracle-tiers.md), and an MPFI run encloses the 512-bit
//    MPFR gradients.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "reference/family/delta_backward.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using ttr::DeltaGrads;
using ttr::DeltaLayout;
using ttr::Tensor;
using ttr::test::mp;

struct Case {
  ttr::Decay decay;
  std::int64_t T;
  bool preconditioned, states;
  double g_lo, g_hi;
  std::uint64_t seed;
};

template <class S>
Tensor<S> rand_t(ttr::Shape shape, std::uint64_t seed, double lo, double hi) {
  return ttr::test::uniform_as<S>(std::move(shape), seed, lo, hi);
}

template <class S>
DeltaGrads<S> run(const Case& c, DeltaLayout layout, std::int64_t C = 0) {
  constexpr std::int64_t B = 1, H = 2, K = 3, V = 4;
  const std::uint64_t s = c.seed;
  const Tensor<S> q = rand_t<S>({B, c.T, H, K}, s, -1, 1), k = rand_t<S>({B, c.T, H, K}, s + 1, -1, 1),
                  w = c.preconditioned ? rand_t<S>({B, c.T, H, K}, s + 2, -1, 1) : k,
                  v = rand_t<S>({B, c.T, H, V}, s + 3, -1, 1), beta = rand_t<S>({B, c.T, H}, s + 4, 0, 1),
                  g = c.decay == ttr::Decay::per_key ? rand_t<S>({B, c.T, H, K}, s + 5, c.g_lo, c.g_hi)
                                                     : rand_t<S>({B, c.T, H}, s + 5, c.g_lo, c.g_hi),
                  h0 = rand_t<S>({B, H, K, V}, s + 6, -1, 1), dout = rand_t<S>({B, c.T, H, V}, s + 7, -1, 1),
                  dht = rand_t<S>({B, H, K, V}, s + 8, -1, 1);
  DeltaGrads<S> out;
  ttr::delta_backward<S>(c.decay, q, k, w, v, beta, &g, c.states ? &h0 : nullptr, ttr::from_double<S>(0.375), dout,
                         c.states ? &dht : nullptr, out, C, layout);
  return out;
}

template <class S>
std::vector<std::pair<const char*, const Tensor<S>*>> tensors(const DeltaGrads<S>& g) {
  return {{"dq", &g.dq}, {"dk", &g.dk}, {"dw", &g.dw}, {"dv", &g.dv},
          {"dbeta", &g.dbeta}, {"dg", &g.dg}, {"dh0", &g.dh0}};
}

bool same_bits(const Tensor<mp>& a, const Tensor<mp>& b) {
  if (a.shape != b.shape) return false;
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    const auto* x = a.data[i].backend().data();
    const auto* y = b.data[i].backend().data();
    if (!mpfr_equal_p(x, y) || mpfr_signbit(x) != mpfr_signbit(y)) return false;
  }
  return true;
}
bool same_bits(const Tensor<double>& a, const Tensor<double>& b) {
  return a.shape == b.shape &&
         (a.data.empty() || std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(double)) == 0);
}

std::vector<Case> cases(double g_lo, double g_hi, std::uint64_t seed) {
  std::vector<Case> out;
  for (const auto decay : {ttr::Decay::scalar, ttr::Decay::per_key})
    for (const std::int64_t T : {1, 5, 17, 40})
      for (const bool pre : {false, true}) out.push_back({decay, T, pre, T % 2 == 1, g_lo, g_hi, seed += 10});
  return out;
}

std::string name(const Case& c) {
  return "T = " + std::to_string(c.T) + (c.decay == ttr::Decay::per_key ? ", per-key" : ", scalar") +
         (c.preconditioned ? ", w != k" : "") + (c.states ? ", h0 and dht" : "") + ", g in [" +
         std::to_string(c.g_lo) + ", " + std::to_string(c.g_hi) + "]";
}

void agrees_with_definition(double g_lo, double g_hi, std::uint64_t seed) {
  ttr::test::PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<mp>::set_bits(256), 256u);
  for (const Case& c : cases(g_lo, g_hi, seed)) {
    SCOPED_TRACE(name(c));
    const DeltaGrads<mp> want = run<mp>(c, DeltaLayout::definition), got = run<mp>(c, DeltaLayout::scaled);
    const auto w = tensors(want), g = tensors(got);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double e = ttr::test::rel_err(*g[i].second, *w[i].second);
      EXPECT_LE(e, 1e-70) << w[i].first;
    }
  }
}

TEST(DeltaBackwardScaled, EqualsTheDefinitionInMpfr) { agrees_with_definition(-0.5, 0.0, 3100); }
TEST(DeltaBackwardScaled, FoldsAtEverySecondTokenUnderStrongDecay) { agrees_with_definition(-200.0, -150.0, 3200); }
TEST(DeltaBackwardScaled, FoldsEveryFewTokens) { agrees_with_definition(-30.0, -20.0, 3300); }
TEST(DeltaBackwardScaled, FoldsAGrowingState) { agrees_with_definition(20.0, 30.0, 3400); }

template <class S>
void same_for_every_spacing(double g_lo, double g_hi, std::uint64_t seed) {
  for (const Case& c : cases(g_lo, g_hi, seed)) {
    const DeltaGrads<S> all = run<S>(c, DeltaLayout::scaled, c.T);
    for (const std::int64_t C : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{0}, c.T + 3}) {
      SCOPED_TRACE(name(c) + ", C = " + std::to_string(C));
      const DeltaGrads<S> got = run<S>(c, DeltaLayout::scaled, C);
      const auto a = tensors(all), b = tensors(got);
      for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(*b[i].second, *a[i].second)) << a[i].first;
    }
  }
}

TEST(DeltaBackwardScaled, BitIdenticalForEverySpacing) {
  same_for_every_spacing<double>(-0.5, 0.0, 3500);
  same_for_every_spacing<double>(-200.0, -150.0, 3600);
  ttr::test::PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<mp>::set_bits(256), 256u);
  same_for_every_spacing<mp>(-0.5, 0.0, 3700);
  same_for_every_spacing<mp>(-30.0, -20.0, 3800);
}

TEST(DeltaBackwardScaled, TheTierChooses) {
  static_assert(ttr::reorders_for_speed<ttr::mpfr_real>::value && ttr::reorders_for_speed<ttr::mpfi_real>::value);
  static_assert(!ttr::reorders_for_speed<double>::value && !ttr::reorders_for_speed<float>::value);
  const Case c{ttr::Decay::per_key, 17, true, true, -0.5, 0.0, 3900};
  const DeltaGrads<double> def = run<double>(c, DeltaLayout::definition), aut = run<double>(c, DeltaLayout::automatic);
  for (std::size_t i = 0; i < 7; ++i) EXPECT_TRUE(same_bits(*tensors(aut)[i].second, *tensors(def)[i].second));
  ttr::test::PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<mp>::set_bits(256), 256u);
  const DeltaGrads<mp> sc = run<mp>(c, DeltaLayout::scaled), am = run<mp>(c, DeltaLayout::automatic),
                       de = run<mp>(c, DeltaLayout::definition);
  bool differs = false;
  for (std::size_t i = 0; i < 7; ++i) {
    EXPECT_TRUE(same_bits(*tensors(am)[i].second, *tensors(sc)[i].second)) << tensors(sc)[i].first;
    differs = differs || !same_bits(*tensors(de)[i].second, *tensors(sc)[i].second);
  }
  EXPECT_TRUE(differs) << "the scaled layout rounds differently somewhere; identical bits would mean it did not run";
}

TEST(DeltaBackwardScaled, MpfiEnclosesTheMpfrGradients) {
  ttr::test::PrecisionGuard guard;
  struct MpfiGuard {
    unsigned saved = ttr::mpfi_real::default_precision();
    ~MpfiGuard() { ttr::mpfi_real::default_precision(saved); }
  } mpfi_guard;
  for (const Case& c : {Case{ttr::Decay::scalar, 17, false, true, -0.5, 0.0, 4000},
                        Case{ttr::Decay::per_key, 17, true, true, -30.0, -20.0, 4100}}) {
    SCOPED_TRACE(name(c));
    ASSERT_GE(ttr::precision_control<mp>::set_bits(512), 512u);
    const DeltaGrads<mp> point = run<mp>(c, DeltaLayout::definition);
    ttr::precision_control<ttr::mpfi_real>::set_bits(256);
    const DeltaGrads<ttr::mpfi_real> box = run<ttr::mpfi_real>(c, DeltaLayout::automatic);
    const auto p = tensors(point);
    const auto b = tensors(box);
    for (std::size_t i = 0; i < p.size(); ++i)
      for (std::size_t e = 0; e < p[i].second->data.size(); ++e) {
        const auto* iv = b[i].second->data[e].backend().data();
        const auto* x = p[i].second->data[e].backend().data();
        EXPECT_TRUE(mpfi_is_inside_fr(x, iv) > 0) << p[i].first << "[" << e << "] outside its enclosure";
      }
  }
}

}  // namespace
