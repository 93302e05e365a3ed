// precond_kda (PKDA), sequential form (reference/precond_kda/sequential.hpp and
// reference/family/atk.hpp, through the oracle adapter oracles/layers/precond_kda.hpp),
// against an independent formulation at MPFR 512 bits:
//   preconditioner (own implementation of the ATK formula, FLA semantics as in
//   LAYERS.md / the spec notes; A is updated before it is used at token t):
//     A_t = e^{g_atk,t} A_{t-1} + β_atk,t k_t²,  r = log(A_t + eps) − c_h,
//     s = r/(1 + |r|),  B_t = x^{−s}  (computed with pow, where the code uses
//     exp(−log(x)·s)),  k̃_t = B_t ⊙ k_t;
//   state, transition-matrix form with explicit K×K matrices:
//     S_t = (I − β_t k̃_t k_tᵀ) Diag(γ_t) S_{t-1} + β_t k̃_t v_tᵀ,  o_t = S_tᵀ(scale q_t),
//   γ_t = e^{g_t} ∈ R^K decaying the K rows of the state (KDA's per-key decay),
// with q, k normalised as x/sqrt(‖x‖² + 1e-6) when use_qk_l2norm_in_kernel (default
// true for this layer). final_A_state is checked too.
//
// Tolerance 1e-70 relative (normwise): the oracle at 256 bits and the expectation at
// 512 bits are each accurate to ~1e-75 on these inputs (B_t ∈ [1/x, x] with x ≤ 2
// and β ≤ 0.5 keep every transition well conditioned; log/exp/pow are correctly
// rounded in MPFR), leaving a 10^5 margin; a real defect gives ≳ 1e-17.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/layers/precond_kda.hpp"
#include "oracles/registry.hpp"
#include "reference/core/multiprecision.hpp"

namespace {

using R = ttr::mpfr_real;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;
using Sets = std::vector<std::pair<std::string, std::string>>;

constexpr const char* kLayer = "precond_kda";

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
std::size_t i4(const Shape& s, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  return static_cast<std::size_t>(((a * s[1] + b) * s[2] + c) * s[3] + d);
}
std::size_t i3(const Shape& s, std::int64_t a, std::int64_t b, std::int64_t c) {
  return static_cast<std::size_t>((a * s[1] + b) * s[2] + c);
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
  const auto cfg = ttr::Config::make(ttr::find_layer(kLayer).spec, sets);
  TensorMap<R> out;
  ttr::layers::precond_kda::sequential<R>(to_mp(in), cfg, ttr::RunOptions{}, out);
  return out;
}

struct Params {
  double scale = -1;  // <= 0: default K^-1/2
  bool l2norm = true;  // the layer's default
  double x = 1.5, eps = 1e-6, center = -0.2;  // config defaults; center unused with the tensor
};
std::vector<R> row(const Tensor<double>& t, std::int64_t b, std::int64_t s, std::int64_t h) {
  std::vector<R> r;
  for (std::int64_t f = 0; f < t.dim(3); ++f) r.emplace_back(t.data[i4(t.shape, b, s, h, f)]);
  return r;
}
std::vector<R> normalised(std::vector<R> x) {  // x / sqrt(‖x‖² + 1e-6)
  R n2 = 0;
  for (const R& e : x) n2 += e * e;
  const R d = sqrt(n2 + R(1e-6));
  for (R& e : x) e /= d;
  return x;
}

TensorMap<R> transition_form(const TensorMap<double>& in, const Params& p) {
  EXPECT_GE(ttr::precision_control<R>::set_bits(512), 512u);
  const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v"), &g = in.at("g"), &beta = in.at("beta");
  const auto &g_atk = in.at("g_atk"), &beta_atk = in.at("beta_atk");
  const Tensor<double>* h0 = in.count("h0") ? &in.at("h0") : nullptr;
  const Tensor<double>* A0 = in.count("initial_A_state") ? &in.at("initial_A_state") : nullptr;
  const Tensor<double>* c = in.count("log_atk_scale") ? &in.at("log_atk_scale") : nullptr;
  const auto B = q.dim(0), T = q.dim(1), H = q.dim(2), K = q.dim(3), V = v.dim(3);
  const R scale = p.scale > 0 ? R(p.scale) : R(1) / sqrt(R(static_cast<double>(K)));
  const R x(p.x), eps(p.eps);
  TensorMap<R> out;
  out["o"] = Tensor<R>({B, T, H, V}, R(0));
  out["ht"] = Tensor<R>({B, H, K, V}, R(0));
  out["final_A_state"] = Tensor<R>({B, H, K}, R(0));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const R center = c ? R(c->data[static_cast<std::size_t>(h)]) : R(p.center);
      std::vector<std::vector<R>> S(K, std::vector<R>(V, R(0)));
      if (h0)
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) S[i][j] = R(h0->data[i4(h0->shape, b, h, i, j)]);
      std::vector<R> A(K, R(0));
      if (A0)
        for (std::int64_t i = 0; i < K; ++i) A[i] = R(A0->data[i3(A0->shape, b, h, i)]);
      for (std::int64_t t = 0; t < T; ++t) {
        auto qt = row(q, b, t, h), kt = row(k, b, t, h);
        const auto vt = row(v, b, t, h);
        if (p.l2norm) {
          qt = normalised(qt);
          kt = normalised(kt);
        }
        const R alpha = exp(R(g_atk.data[i3(g_atk.shape, b, t, h)]));
        const R w = R(beta_atk.data[i3(beta_atk.shape, b, t, h)]);
        std::vector<R> kw(K);  // write key k̃
        for (std::int64_t i = 0; i < K; ++i) {
          A[i] = alpha * A[i] + w * kt[i] * kt[i];
          const R r = log(A[i] + eps) - center;
          const R s = r / (1 + abs(r));
          kw[i] = pow(x, -s) * kt[i];
        }
        std::vector<R> gamma;  // per key channel
        for (const R& gl : row(g, b, t, h)) gamma.push_back(exp(gl));
        const R bt = R(beta.data[i3(beta.shape, b, t, h)]);
        std::vector<std::vector<R>> next(K, std::vector<R>(V, R(0)));
        for (std::int64_t i = 0; i < K; ++i)
          for (std::int64_t j = 0; j < V; ++j) {
            for (std::int64_t l = 0; l < K; ++l) next[i][j] += ((i == l ? R(1) : R(0)) - bt * kw[i] * kt[l]) * gamma[l] * S[l][j];
            next[i][j] += bt * kw[i] * vt[j];
          }
        S = next;
        for (std::int64_t j = 0; j < V; ++j) {
          R acc = 0;
          for (std::int64_t i = 0; i < K; ++i) acc += S[i][j] * (scale * qt[i]);
          out["o"].data[i4(out["o"].shape, b, t, h, j)] = acc;
        }
      }
      for (std::int64_t i = 0; i < K; ++i) {
        out["final_A_state"].data[i3(out["final_A_state"].shape, b, h, i)] = A[i];
        for (std::int64_t j = 0; j < V; ++j) out["ht"].data[i4(out["ht"].shape, b, h, i, j)] = S[i][j];
      }
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
  for (const char* name : {"o", "ht", "final_A_state"}) {
    const double e = rel_err(got.at(name), want.at(name));
    EXPECT_LT(e, tol) << name << ": relative error " << e;
  }
}

// β ≤ 0.5 with |k| ≤ 0.6 (K ≤ 4) keeps β‖k̃‖‖k‖ ≤ 2·0.5·1.44 < 2 even with x = 2 and
// unnormalised keys; g (per channel), g_atk in [−1, 0]; token 1 has γ = 1 on every channel,
// token 3 has γ ≈ 1e-30 on channel 0 and γ = 1 on channel 1.
TensorMap<double> make_inputs(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V,
                              std::uint64_t seed) {
  TensorMap<double> in;
  in["q"] = uniform({B, T, H, K}, seed, -1, 1);
  in["k"] = uniform({B, T, H, K}, seed + 1, -0.6, 0.6);
  in["v"] = uniform({B, T, H, V}, seed + 2, -1, 1);
  in["beta"] = uniform({B, T, H}, seed + 3, 0.05, 0.5);
  in["g"] = uniform({B, T, H, K}, seed + 4, -1, 0);
  in["g_atk"] = uniform({B, T, H}, seed + 5, -1, 0);
  in["beta_atk"] = uniform({B, T, H}, seed + 6, 0, 1);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      if (T > 1)
        for (std::int64_t i = 0; i < K; ++i) in["g"].data[i4(in["g"].shape, b, 1, h, i)] = 0.0;
      if (T > 3) {
        in["g"].data[i4(in["g"].shape, b, 3, h, 0)] = std::log(1e-30);
        in["g"].data[i4(in["g"].shape, b, 3, h, 1)] = 0.0;
      }
    }
  return in;
}

TEST(PrecondKda, MpfrMatchesIndependentFormWithDefaults) {
  PrecisionGuard guard;
  // l2norm on, x = 1.5, eps = 1e-6, centre −0.2 from config, A_0 = 0, h0 = 0, scale 3^-1/2.
  const auto in = make_inputs(2, 6, 2, 3, 2, 3101);
  expect_close(oracle(in, {}), transition_form(in, {}), 1e-70);
}

TEST(PrecondKda, MpfrMatchesWithStatesCentreTensorAndExplicitConfig) {
  PrecisionGuard guard;
  auto in = make_inputs(2, 6, 3, 4, 3, 3102);
  in["h0"] = uniform({2, 3, 4, 3}, 3103, -1, 1);
  in["initial_A_state"] = uniform({2, 3, 4}, 3104, 0, 2);
  in["log_atk_scale"] = Tensor<double>({3}, 0.0);
  in["log_atk_scale"].data = {-1.0, 0.3, 2.5};
  const Sets sets = {{"use_qk_l2norm_in_kernel", "false"}, {"x", "2"}, {"eps", "0.001"}, {"scale", "0.5"},
                     {"log_atk_scale", "7"}};  // the tensor wins over the config key
  Params p;
  p.scale = 0.5;
  p.l2norm = false;
  p.x = 2;
  p.eps = 0.001;
  expect_close(oracle(in, sets), transition_form(in, p), 1e-70);
}

// The centre from the config key equals a tensor holding that value for every head
// (bit-identical: the same double reaches the same code), and a per-head tensor is
// honoured (a different function).
TEST(PrecondKda, CentreTensorAndConfigKeyAgree) {
  auto in = make_inputs(1, 5, 2, 3, 2, 3105);
  const auto& layer = ttr::find_layer(kLayer);
  const auto cfg = ttr::Config::make(layer.spec, {{"log_atk_scale", "0.4"}});
  const auto by_key = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0}, in, cfg);
  in["log_atk_scale"] = Tensor<double>({2}, 0.4);
  const auto by_tensor = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0}, in, cfg);
  for (const char* name : {"o", "ht", "final_A_state"})
    EXPECT_EQ(by_key.values.at(name).data, by_tensor.values.at(name).data) << name;
  in["log_atk_scale"].data = {0.4, -3.0};
  const auto per_head = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::fp64, 0}, in, cfg);
  EXPECT_NE(by_key.values.at("ht").data, per_head.values.at("ht").data);
}

TEST(PrecondKda, RegistryMpfrRunnerRoundsTheOracleCorrectly) {
  PrecisionGuard guard;
  auto in = make_inputs(2, 5, 2, 3, 2, 3106);
  in["initial_A_state"] = uniform({2, 2, 3}, 3107, 0, 1);
  const auto& layer = ttr::find_layer(kLayer);
  const auto r = ttr::run_layer(layer, ttr::Form::sequential, {ttr::Tier::mpfr, 256}, in,
                                ttr::Config::make(layer.spec, {}));
  const auto want = transition_form(in, {});
  for (const char* name : {"o", "ht", "final_A_state"}) {
    ASSERT_EQ(r.values.at(name).shape, want.at(name).shape) << name;
    for (std::size_t e = 0; e < want.at(name).data.size(); ++e)
      EXPECT_EQ(r.values.at(name).data[e], ttr::to_double(want.at(name).data[e])) << name << " element " << e;
  }
}

// β = 0 and g = 0: the state is untouched bit for bit (δ = 0, γ = 1) while the
// preconditioner state A still evolves (it does not depend on β): A_T matches the
// independent ATK recursion.
TEST(PrecondKda, ZeroBetaUnitDecayLeavesStateButNotPreconditioner) {
  PrecisionGuard guard;
  auto in = make_inputs(2, 4, 2, 3, 2, 3108);
  for (auto& e : in["beta"].data) e = 0.0;
  for (auto& e : in["g"].data) e = 0.0;
  in["h0"] = uniform({2, 2, 3, 2}, 3109, -1, 1);
  const auto& layer = ttr::find_layer(kLayer);
  for (const ttr::Arith a : {ttr::Arith{ttr::Tier::fp64, 0}, ttr::Arith{ttr::Tier::mpfr, 256}}) {
    const auto r = ttr::run_layer(layer, ttr::Form::sequential, a, in, ttr::Config::make(layer.spec, {}));
    EXPECT_EQ(r.values.at("ht").data, in.at("h0").data) << ttr::arith_name(a);
  }
  const auto got = oracle(in, {});
  const auto want = transition_form(in, {});
  EXPECT_LT(rel_err(got.at("final_A_state"), want.at("final_A_state")), 1e-70);
  R amax = 0;
  for (const R& a : want.at("final_A_state").data) amax = std::max(amax, R(abs(a)));
  EXPECT_GT(amax, 0.01);
}

// A per-channel gate constant across channels is precond_gated_delta_rule: the
// decay factors exp(g_{t,i}) = exp(g_t) are the same numbers and everything else is
// the same code in the same order, so the outputs are bit-identical (fp64 and MPFR).
TEST(PrecondKda, ChannelConstantGateEqualsPrecondGatedDeltaRuleBitForBit) {
  const std::int64_t B = 2, T = 5, H = 2, K = 3, V = 2;
  auto in = make_inputs(B, T, H, K, V, 3110);
  in["h0"] = uniform({B, H, K, V}, 3111, -1, 1);
  TensorMap<double> scalar_in = in;
  scalar_in["g"] = uniform({B, T, H}, 3112, -2, 0);
  for (std::int64_t r = 0; r < B * T * H; ++r)
    for (std::int64_t i = 0; i < K; ++i) in["g"].data[r * K + i] = scalar_in["g"].data[r];
  const auto& pkda = ttr::find_layer("precond_kda");
  const auto& pgdn = ttr::find_layer("precond_gated_delta_rule");
  for (const ttr::Arith a : {ttr::Arith{ttr::Tier::fp64, 0}, ttr::Arith{ttr::Tier::mpfr, 256}}) {
    const auto r1 = ttr::run_layer(pkda, ttr::Form::sequential, a, in, ttr::Config::make(pkda.spec, {}));
    const auto r2 = ttr::run_layer(pgdn, ttr::Form::sequential, a, scalar_in, ttr::Config::make(pgdn.spec, {}));
    for (const char* name : {"o", "ht", "final_A_state"})
      EXPECT_EQ(r1.values.at(name).data, r2.values.at(name).data) << name << " " << ttr::arith_name(a);
  }
}

}  // namespace
