// kaczmarz_delta_rule (Kaczmarz linear attention), sequential form
// (reference/kaczmarz_delta_rule/sequential.hpp; adapter
// oracles/layers/kaczmarz_delta_rule.hpp), against independent expectations:
//  * a hand-derived case and exact rational arithmetic (GMP mpq) with unit decay
//    (g = 0: exp(0) = 1 is the one exact value tests/support/rational.hpp allows),
//    compared with the transition-matrix form
//      S_t = (I − β̃_t k_t k_tᵀ) Diag(γ_t) S_{t-1} + β̃_t k_t v_tᵀ,  β̃_t = η_t/(‖k_t‖² + eps);
//  * the exact projection property with η = 1, eps = 0 (KLA-Z Thm 1) in rationals;
//  * the same transition form at MPFR 512 bits with real decays, against the
//    oracle at 256 bits (tolerance 1e-70: both sides accurate to ~1e-75 relative
//    on these well-conditioned inputs, see gated_delta_rule_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/layers/kaczmarz_delta_rule.hpp"
#include "oracles/registry.hpp"
#include "reference/core/multiprecision.hpp"
#include "reference/kaczmarz_delta_rule/sequential.hpp"
#include "tests/support/rational.hpp"

namespace {

using Q = ttr::test::rational;
using R = ttr::mpfr_real;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;
using Sets = std::vector<std::pair<std::string, std::string>>;

std::size_t i4(const Shape& s, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  return static_cast<std::size_t>(((a * s[1] + b) * s[2] + c) * s[3] + d);
}
std::size_t i3(const Shape& s, std::int64_t a, std::int64_t b, std::int64_t c) {
  return static_cast<std::size_t>((a * s[1] + b) * s[2] + c);
}

// ---------------------------------------------------------------------------
// Exact rational part (unit decay).

struct QuarterGen {
  std::uint64_t s;
  Q next(int lo, int hi) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return Q(lo + static_cast<int>((s >> 33) % static_cast<std::uint64_t>(hi - lo + 1)), 4);
  }
};
Tensor<Q> quarters(Shape shape, std::uint64_t seed, int lo = -4, int hi = 4) {
  Tensor<Q> x(shape, Q(0));
  QuarterGen g{seed};
  for (auto& e : x.data) e = g.next(lo, hi);
  return x;
}
// Keys in multiples of 1/4 whose rows are never zero (token rows get a 1 in channel
// t mod K if they came out zero), so eps = 0 is admissible.
Tensor<Q> nonzero_keys(Shape shape, std::uint64_t seed) {
  Tensor<Q> k = quarters(shape, seed);
  const std::int64_t K = shape[3];
  for (std::int64_t r = 0; r < k.numel() / K; ++r) {
    bool zero = true;
    for (std::int64_t i = 0; i < K; ++i) zero = zero && k.data[r * K + i] == 0;
    if (zero) k.data[r * K + r % K] = 1;
  }
  return k;
}
Tensor<Q> from_values(Shape shape, std::vector<Q> values) {
  Tensor<Q> x(shape, Q(0));
  EXPECT_EQ(static_cast<std::size_t>(x.numel()), values.size());
  x.data = std::move(values);
  return x;
}
void expect_exact(const Tensor<Q>& got, const Tensor<Q>& want, const char* what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  for (std::size_t e = 0; e < want.data.size(); ++e)
    EXPECT_EQ(got.data[e], want.data[e]) << what << " element " << e << ": got " << got.data[e].str() << ", want "
                                         << want.data[e].str();
}

// Transition-matrix form with γ = 1, over the rationals, with explicit K×K matrices.
void transition_form_q(const Tensor<Q>& q, const Tensor<Q>& k, const Tensor<Q>& v, const Tensor<Q>& eta,
                       const Q& eps, const Tensor<Q>* h0, const Q& scale, Tensor<Q>& o, Tensor<Q>& ht) {
  using Mat = std::vector<std::vector<Q>>;
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  o = Tensor<Q>({B, T, H, V}, Q(0));
  ht = Tensor<Q>({B, H, K, V}, Q(0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      Mat S(K, std::vector<Q>(V, Q(0)));
      if (h0)
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) S[i][j] = h0->data[i4(ht.shape, b, h, i, j)];
      for (std::int64_t t = 0; t < T; ++t) {
        std::vector<Q> kt(K);
        Q energy = 0;
        for (std::int64_t i = 0; i < K; ++i) {
          kt[i] = k.data[i4(k.shape, b, t, h, i)];
          energy += kt[i] * kt[i];
        }
        const Q bt = eta.data[i3(eta.shape, b, t, h)] / (energy + eps);
        Mat M(K, std::vector<Q>(K, Q(0)));
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t l = 0; l < K; ++l) M[i][l] = (i == l ? Q(1) : Q(0)) - bt * kt[i] * kt[l];
        Mat next(K, std::vector<Q>(V, Q(0)));
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) {
            for (std::int64_t l = 0; l < K; ++l) next[i][j] += M[i][l] * S[l][j];
            next[i][j] += bt * kt[i] * v.data[i4(v.shape, b, t, h, j)];
          }
        S = next;
        for (std::int64_t j = 0; j < V; ++j) {
          Q acc = 0;
          for (std::int64_t i = 0; i < K; ++i) acc += S[i][j] * scale * q.data[i4(q.shape, b, t, h, i)];
          o.data[i4(o.shape, b, t, h, j)] = acc;
        }
      }
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t j = 0; j < V; ++j) ht.data[i4(ht.shape, b, h, i, j)] = S[i][j];
    }
}

// Hand derivation (K=2, V=1, T=2, η=1, eps=0, g=0, scale=1, S_0=0):
//   t=1: k=(1,1) v=2 q=(1,0):  β̃ = 1/‖k‖² = 1/2, u = 0, δ = ½·2 = 1, S_1 = (1,1)ᵀ,  o_1 = 1
//        (projection: S_1ᵀk = 2 = v ✓)
//   t=2: k=(2,0) v=−2 q=(0,1): β̃ = 1/4, u = S_1ᵀk = 2, δ = ¼(−2 − 2) = −1,
//        S_2 = (1,1)ᵀ − (2,0)ᵀ = (−1,1)ᵀ,  o_2 = 1   (S_2ᵀk = −2 = v ✓)
TEST(KaczmarzDeltaRule, HandDerivedTwoTokens) {
  const auto q = from_values({1, 2, 1, 2}, {1, 0, 0, 1});
  const auto k = from_values({1, 2, 1, 2}, {1, 1, 2, 0});
  const auto v = from_values({1, 2, 1, 1}, {2, -2});
  const Tensor<Q> g({1, 2, 1}, Q(0)), eta({1, 2, 1}, Q(1));
  Tensor<Q> o, ht;
  ttr::kaczmarz_delta_rule_sequential<Q>(q, k, v, g, eta, Q(0), nullptr, Q(1), o, ht);
  expect_exact(o, from_values({1, 2, 1, 1}, {1, 1}), "o");
  expect_exact(ht, from_values({1, 1, 2, 1}, {-1, 1}), "ht");
}

TEST(KaczmarzDeltaRule, ExactRationalUnitDecayMatchesTransitionForm) {
  struct Case {
    std::int64_t B, T, H, K, V;
    bool with_h0;
    Q eps, scale;
    std::uint64_t seed;
  };
  for (const Case& c : {Case{2, 5, 2, 3, 2, true, Q(1, 1000), Q(1, 2), 2101}, Case{1, 6, 2, 4, 3, false, Q(0), Q(1), 2102},
                        Case{3, 4, 1, 2, 2, true, Q(1, 8), Q(3, 4), 2103}}) {
    SCOPED_TRACE(testing::Message() << "B=" << c.B << " T=" << c.T << " H=" << c.H << " K=" << c.K << " V=" << c.V
                                    << " eps=" << c.eps.str());
    const auto q = quarters({c.B, c.T, c.H, c.K}, c.seed);
    const auto k = nonzero_keys({c.B, c.T, c.H, c.K}, c.seed + 100);
    const auto v = quarters({c.B, c.T, c.H, c.V}, c.seed + 200);
    const auto eta = quarters({c.B, c.T, c.H}, c.seed + 300, 1, 8);  // η ∈ {1/4, …, 2}
    const auto h0 = quarters({c.B, c.H, c.K, c.V}, c.seed + 400);
    const Tensor<Q> g({c.B, c.T, c.H}, Q(0));
    const Tensor<Q>* h0p = c.with_h0 ? &h0 : nullptr;
    Tensor<Q> o, ht, o_want, ht_want;
    ttr::kaczmarz_delta_rule_sequential<Q>(q, k, v, g, eta, c.eps, h0p, c.scale, o, ht);
    transition_form_q(q, k, v, eta, c.eps, h0p, c.scale, o_want, ht_want);
    expect_exact(o, o_want, "o");
    expect_exact(ht, ht_want, "ht");
  }
}

// KLA-Z Thm 1 with η = 1, eps = 0: S_tᵀ k_t = v_t exactly, on every prefix.
TEST(KaczmarzDeltaRule, ExactProjectionInRationals) {
  const std::int64_t B = 1, T = 6, H = 2, K = 3, V = 2;
  const auto q = quarters({B, T, H, K}, 2201), k = nonzero_keys({B, T, H, K}, 2202);
  const auto v = quarters({B, T, H, V}, 2203), h0 = quarters({B, H, K, V}, 2204);
  const Tensor<Q> g({B, T, H}, Q(0)), eta({B, T, H}, Q(1));
  for (std::int64_t len = 1; len <= T; ++len) {
    auto prefix = [&](const Tensor<Q>& x) {
      Tensor<Q> y = x;
      y.shape[1] = len;
      y.data.resize(static_cast<std::size_t>(y.numel()));  // B = 1: the prefix is a leading block
      return y;
    };
    Tensor<Q> o, ht;
    ttr::kaczmarz_delta_rule_sequential<Q>(prefix(q), prefix(k), prefix(v), prefix(g), prefix(eta), Q(0), &h0, Q(1), o,
                                           ht);
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t j = 0; j < V; ++j) {
        Q read = 0;
        for (std::int64_t i = 0; i < K; ++i) read += ht.data[i4(ht.shape, 0, h, i, j)] * k.data[i4(k.shape, 0, len - 1, h, i)];
        EXPECT_EQ(read, v.data[i4(v.shape, 0, len - 1, h, j)]) << "prefix " << len << " head " << h << " column " << j;
      }
  }
}

// ---------------------------------------------------------------------------
// MPFR part (real decays).

struct PrecisionGuard {
  unsigned saved = R::default_precision();
  ~PrecisionGuard() { R::default_precision(saved); }
};
struct Uniform {  // splitmix64
  std::uint64_t s;
  double next(double lo, double hi) {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};
Tensor<double> uniform(Shape shape, std::uint64_t seed, double lo, double hi) {
  Tensor<double> x(shape, 0.0);
  Uniform u{seed};
  for (auto& e : x.data) e = u.next(lo, hi);
  return x;
}
TensorMap<R> to_mp(const TensorMap<double>& in) {
  TensorMap<R> out;
  for (const auto& [name, x] : in) {
    auto& y = out[name];
    y.shape = x.shape;
    for (double d : x.data) y.data.emplace_back(d);
  }
  return out;
}
TensorMap<R> oracle(const TensorMap<double>& in, const Sets& sets) {
  EXPECT_GE(ttr::precision_control<R>::set_bits(256), 256u);
  const auto cfg = ttr::Config::make(ttr::find_layer("kaczmarz_delta_rule").spec, sets);
  TensorMap<R> out;
  ttr::layers::kaczmarz_delta_rule::sequential<R>(to_mp(in), cfg, ttr::RunOptions{}, out);
  return out;
}

struct Params {
  double scale = -1;  // <= 0: default K^-1/2
  bool l2norm = false;
  double eps = 1e-6;  // the config default, as a double
};
std::vector<R> row(const Tensor<double>& x, std::int64_t b, std::int64_t t, std::int64_t h) {
  std::vector<R> r;
  for (std::int64_t f = 0; f < x.dim(3); ++f) r.emplace_back(x.data[i4(x.shape, b, t, h, f)]);
  return r;
}
std::vector<R> normalised(std::vector<R> x) {  // x / sqrt(‖x‖² + 1e-6)
  R n2 = 0;
  for (const R& e : x) n2 += e * e;
  const R d = sqrt(n2 + R(1e-6));
  for (R& e : x) e /= d;
  return x;
}

// Transition-matrix form at 512 bits: M_t = (I − β̃ k kᵀ) γ, S_t = M_t S_{t-1} + β̃ k vᵀ.
TensorMap<R> transition_form(const TensorMap<double>& in, const Params& p) {
  EXPECT_GE(ttr::precision_control<R>::set_bits(512), 512u);
  const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v"), &g = in.at("g"), &eta = in.at("beta");
  const Tensor<double>* h0 = in.count("h0") ? &in.at("h0") : nullptr;
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  const R scale = p.scale > 0 ? R(p.scale) : R(1) / sqrt(R(static_cast<double>(K)));
  TensorMap<R> out;
  out["o"] = Tensor<R>({B, T, H, V}, R(0));
  out["ht"] = Tensor<R>({B, H, K, V}, R(0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      std::vector<std::vector<R>> S(K, std::vector<R>(V, R(0)));
      if (h0)
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) S[i][j] = R(h0->data[i4(h0->shape, b, h, i, j)]);
      for (std::int64_t t = 0; t < T; ++t) {
        auto qt = row(q, b, t, h), kt = row(k, b, t, h);
        const auto vt = row(v, b, t, h);
        if (p.l2norm) {
          qt = normalised(qt);
          kt = normalised(kt);
        }
        R energy = 0;
        for (const R& e : kt) energy += e * e;
        const R bt = R(eta.data[i3(eta.shape, b, t, h)]) / (energy + R(p.eps));
        const R gamma = exp(R(g.data[i3(g.shape, b, t, h)]));
        std::vector<std::vector<R>> next(K, std::vector<R>(V, R(0)));
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) {
            for (std::int64_t l = 0; l < K; ++l) next[i][j] += ((i == l ? R(1) : R(0)) - bt * kt[i] * kt[l]) * gamma * S[l][j];
            next[i][j] += bt * kt[i] * vt[j];
          }
        S = next;
        for (std::int64_t j = 0; j < V; ++j) {
          R acc = 0;
          for (std::int64_t i = 0; i < K; ++i) acc += S[i][j] * (scale * qt[i]);
          out["o"].data[i4(out["o"].shape, b, t, h, j)] = acc;
        }
      }
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t j = 0; j < V; ++j) out["ht"].data[i4(out["ht"].shape, b, h, i, j)] = S[i][j];
    }
  return out;
}

double rel_err(const Tensor<R>& got, const Tensor<R>& want) {  // max|Δ| / max|want|
  EXPECT_EQ(got.shape, want.shape);
  if (got.shape != want.shape) return 1.0;
  R num = 0, den = 0;
  for (std::size_t e = 0; e < want.data.size(); ++e) {
    num = std::max(num, R(abs(got.data[e] - want.data[e])));
    den = std::max(den, R(abs(want.data[e])));
  }
  return (den == 0 ? num : R(num / den)).convert_to<double>();
}
void expect_close(const TensorMap<R>& got, const TensorMap<R>& want, double tol) {
  for (const char* name : {"o", "ht"}) {
    const double e = rel_err(got.at(name), want.at(name));
    EXPECT_LT(e, tol) << name << ": relative error " << e;
  }
}

// η in [0.1, 1.9] (the contractive range (0, 2)); keys of any norm (the step
// normalises by ‖k‖²); g in [−1, 0] with γ = 1 at token 1 and γ ≈ 1e-30 at token 3.
TensorMap<double> make_inputs(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V,
                              bool with_h0, std::uint64_t seed) {
  TensorMap<double> in;
  in["q"] = uniform({B, T, H, K}, seed, -1, 1);
  in["k"] = uniform({B, T, H, K}, seed + 1, -2, 2);
  in["v"] = uniform({B, T, H, V}, seed + 2, -1, 1);
  in["beta"] = uniform({B, T, H}, seed + 3, 0.1, 1.9);
  in["g"] = uniform({B, T, H}, seed + 4, -1, 0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      if (T > 1) in["g"].data[i3(in["g"].shape, b, 1, h)] = 0.0;
      if (T > 3) in["g"].data[i3(in["g"].shape, b, 3, h)] = std::log(1e-30);
    }
  if (with_h0) in["h0"] = uniform({B, H, K, V}, seed + 5, -1, 1);
  return in;
}

TEST(KaczmarzDeltaRule, MpfrMatchesTransitionFormWithH0DefaultEpsExplicitScale) {
  PrecisionGuard guard;
  const auto in = make_inputs(2, 6, 2, 3, 2, true, 2301);
  expect_close(oracle(in, {{"scale", "0.75"}}), transition_form(in, {0.75, false, 1e-6}), 1e-70);
}

TEST(KaczmarzDeltaRule, MpfrMatchesTransitionFormWithL2NormDefaultScaleAndEps) {
  PrecisionGuard guard;
  const auto in = make_inputs(1, 5, 3, 3, 2, false, 2302);
  const auto want = transition_form(in, {-1, true, 0.25});
  expect_close(oracle(in, {{"use_qk_l2norm_in_kernel", "true"}, {"eps", "0.25"}}), want, 1e-70);
  // eps is honoured: the default eps gives a different function.
  EXPECT_GT(rel_err(oracle(in, {{"use_qk_l2norm_in_kernel", "true"}}).at("o"), want.at("o")), 1e-3);
}

TEST(KaczmarzDeltaRule, RegistryMpfrRunnerRoundsTheOracleCorrectly) {
  PrecisionGuard guard;
  const auto in = make_inputs(2, 5, 2, 4, 3, true, 2303);
  const auto& layer = ttr::find_layer("kaczmarz_delta_rule");
  const auto r = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::mpfr, 256}, in,
                                ttr::Config::make(layer.spec, {}));
  const auto want = transition_form(in, {});
  for (const char* name : {"o", "ht"}) {
    ASSERT_EQ(r.values.at(name).shape, want.at(name).shape);
    for (std::size_t e = 0; e < want.at(name).data.size(); ++e)
      EXPECT_EQ(r.values.at(name).data[e], ttr::to_double(want.at(name).data[e])) << name << " element " << e;
  }
}

// η = 0 and g = 0: β̃ = 0/(‖k‖² + eps) = 0 and γ = 1 exactly: ht == h0 bit for bit.
TEST(KaczmarzDeltaRule, ZeroEtaUnitDecayLeavesStateUnchanged) {
  auto in = make_inputs(2, 4, 2, 3, 2, true, 2304);
  for (auto& e : in["beta"].data) e = 0.0;
  for (auto& e : in["g"].data) e = 0.0;
  const auto& layer = ttr::find_layer("kaczmarz_delta_rule");
  for (const ttr::Arith a : {ttr::Arith{ttr::Tier::fp64, 0}, ttr::Arith{ttr::Tier::mpfr, 256}}) {
    const auto r = ttr::run_layer(layer, ttr::Form::sequential, a, in, ttr::Config::make(layer.spec, {}));
    EXPECT_EQ(r.values.at("ht").data, in.at("h0").data) << ttr::arith_name(a);
  }
}

}  // namespace
