// Backward passes of gated linear attention (reference/linear_attn, simple_gla,
// gla backward.hpp over family/gated_linear_backward.hpp), in MPFR at 512 bits,
// against reverse mode through the forward reference code (≤ 1e-70), central
// differences with h = 2^-120 (≤ 1e-60; tests/support/grad_check.hpp says why),
// and identities checkable by hand:
//   * linear_attn: dh0 = Σ_t scale·q_t do_tᵀ + dht (no decay: every o_t reads h0 whole);
//   * gla with channel-constant gates is simple_gla, and Σ_i dg_{t,i} is simple_gla's dg_t;
//   * simple_gla at g = 0 is linear_attn.
// Every compared gradient is checked to be non-zero; an adjoint that dropped dS's
// decay, the read's q̂ doᵀ, or dht would miss by O(1) relative.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "reference/gla/backward.hpp"
#include "reference/gla/sequential.hpp"
#include "reference/linear_attn/backward.hpp"
#include "reference/linear_attn/sequential.hpp"
#include "reference/simple_gla/backward.hpp"
#include "reference/simple_gla/sequential.hpp"
#include "tests/support/grad_check.hpp"

namespace {

using namespace ttr::test::grad;
using ttr::Tensor;
using ttr::TensorMap;

constexpr double kScale = 0.375;

enum class Gate { none, scalar, per_key };

struct Case {
  std::int64_t B, T, H, K, V;
  bool h0, dht;
  std::uint64_t seed;
};

Problem make_problem(const Case& c, Gate gate) {
  Problem p;
  std::uint64_t s = c.seed;
  p.in["q"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 1);
  p.in["k"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 1);
  p.in["v"] = rand_mp({c.B, c.T, c.H, c.V}, s++, -1, 1);
  if (gate == Gate::scalar) p.in["g"] = rand_mp({c.B, c.T, c.H}, s++, -1, 0);
  if (gate == Gate::per_key) p.in["g"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 0);
  if (c.h0) p.in["h0"] = rand_mp({c.B, c.H, c.K, c.V}, s++, -1, 1);
  p.cot["o"] = rand_mp({c.B, c.T, c.H, c.V}, s++, -1, 1);
  if (c.dht) p.cot["ht"] = rand_mp({c.B, c.H, c.K, c.V}, s++, -1, 1);
  return p;
}

struct Forward {
  Gate gate;
  template <class M>
  auto operator()(const M& in) const {
    using S = typename std::decay_t<decltype(in.at("q").data)>::value_type;
    TensorMap<S> out;
    const S scale = ttr::from_double<S>(kScale);
    if (gate == Gate::none)
      ttr::linear_attn_sequential<S>(in.at("q"), in.at("k"), in.at("v"), opt(in, "h0"), scale, out["o"], out["ht"]);
    else if (gate == Gate::scalar)
      ttr::simple_gla_sequential<S>(in.at("q"), in.at("k"), in.at("v"), in.at("g"), opt(in, "h0"), scale, out["o"],
                                    out["ht"]);
    else
      ttr::gla_sequential<S>(in.at("q"), in.at("k"), in.at("v"), in.at("g"), opt(in, "h0"), scale, out["o"],
                             out["ht"]);
    return out;
  }
};

TensorMap<mp> hand(Gate gate, const Problem& p) {
  const auto& in = p.in;
  const Tensor<mp>* dht = opt(p.cot, "ht");
  const mp scale(kScale);
  TensorMap<mp> g;
  Tensor<mp> dh0;
  if (gate == Gate::none)
    ttr::linear_attn_backward(in.at("q"), in.at("k"), in.at("v"), opt(in, "h0"), scale, p.cot.at("o"), dht, g["q"],
                              g["k"], g["v"], dh0);
  else if (gate == Gate::scalar)
    ttr::simple_gla_backward(in.at("q"), in.at("k"), in.at("v"), in.at("g"), opt(in, "h0"), scale, p.cot.at("o"), dht,
                             g["q"], g["k"], g["v"], g["g"], dh0);
  else
    ttr::gla_backward(in.at("q"), in.at("k"), in.at("v"), in.at("g"), opt(in, "h0"), scale, p.cot.at("o"), dht,
                      g["q"], g["k"], g["v"], g["g"], dh0);
  if (in.count("h0")) g["h0"] = dh0;
  return g;
}

void check(Gate gate) {
  const Case cases[] = {{1, 7, 1, 4, 3, true, true, 301},
                        {2, 5, 2, 3, 4, false, false, 302},
                        {1, 9, 2, 4, 4, true, false, 303},
                        {2, 6, 1, 3, 3, false, true, 304}};
  for (const Case& c : cases) {
    SCOPED_TRACE("seed " + std::to_string(c.seed));
    const Problem p = make_problem(c, gate);
    const TensorMap<mp> got = hand(gate, p);
    expect_grads_close(got, tape_gradient(Forward{gate}, p.in, p.cot), kTapeTol, "vs reverse mode");
    if (c.seed == 301 || c.seed == 302)
      expect_grads_close(got, fd_gradient(Forward{gate}, p.in, p.cot, fd_step()), kFdTol, "vs central differences");
  }
}

TEST(GatedLinearBackward, LinearAttnMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(Gate::none);
}

TEST(GatedLinearBackward, SimpleGlaMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(Gate::scalar);
}

TEST(GatedLinearBackward, GlaMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(Gate::per_key);
}

// linear_attn: o_t = (h0 + Σ_{s≤t} k_s v_sᵀ)ᵀ scale·q_t and ht = h0 + Σ_s k_s v_sᵀ,
// so ∂L/∂h0 = Σ_t scale·q_t do_tᵀ + dht.
TEST(GatedLinearBackward, LinearAttnDh0IsTheSumOfReads) {
  Mp512 prec;
  for (const Case& c : {Case{2, 7, 2, 4, 3, true, true, 311}, Case{1, 5, 1, 3, 4, true, false, 312}}) {
    const Problem p = make_problem(c, Gate::none);
    const TensorMap<mp> got = hand(Gate::none, p);
    Tensor<mp> want = c.dht ? p.cot.at("ht") : Tensor<mp>({c.B, c.H, c.K, c.V}, mp(0));
    const auto& q = p.in.at("q").data;
    const auto& d = p.cot.at("o").data;
    for (std::int64_t b = 0; b < c.B; ++b)
      for (std::int64_t h = 0; h < c.H; ++h)
        for (std::int64_t t = 0; t < c.T; ++t)
          for (std::int64_t i = 0; i < c.K; ++i)
            for (std::int64_t j = 0; j < c.V; ++j)
              want.data[((b * c.H + h) * c.K + i) * c.V + j] +=
                  mp(kScale) * q[((b * c.T + t) * c.H + h) * c.K + i] * d[((b * c.T + t) * c.H + h) * c.V + j];
    EXPECT_LT(rel_err(got.at("h0"), want), 1e-140);
    EXPECT_GT(max_abs(want), 1e-6);
  }
}

// gla with g_{t,i} = g_t is simple_gla; ∂/∂g_t = Σ_i ∂/∂g_{t,i}.
TEST(GatedLinearBackward, GlaWithChannelConstantGatesIsSimpleGla) {
  Mp512 prec;
  for (const Case& c : {Case{1, 7, 2, 4, 3, true, true, 321}, Case{2, 5, 1, 3, 4, false, false, 322}}) {
    const Problem p = make_problem(c, Gate::scalar);
    Problem pk = p;
    Tensor<mp>& gk = pk.in.at("g");
    gk = Tensor<mp>({c.B, c.T, c.H, c.K}, mp(0));
    for (std::size_t r = 0; r < p.in.at("g").data.size(); ++r)
      for (std::int64_t i = 0; i < c.K; ++i) gk.data[r * c.K + i] = p.in.at("g").data[r];
    const TensorMap<mp> sg = hand(Gate::scalar, p);
    const TensorMap<mp> gl = hand(Gate::per_key, pk);
    for (const auto& [name, x] : sg) {
      if (name != "g") {
        EXPECT_LT(rel_err(gl.at(name), x), 1e-140) << name;
      }
    }
    Tensor<mp> summed = sg.at("g");
    for (std::size_t r = 0; r < summed.data.size(); ++r) {
      summed.data[r] = 0;
      for (std::int64_t i = 0; i < c.K; ++i) summed.data[r] += gl.at("g").data[r * c.K + i];
    }
    EXPECT_LT(rel_err(summed, sg.at("g")), 1e-140);
  }
}

// simple_gla at g = 0 (every decay exactly 1) is linear_attn.
TEST(GatedLinearBackward, SimpleGlaAtZeroGateIsLinearAttn) {
  Mp512 prec;
  Problem p = make_problem({2, 6, 2, 3, 4, true, true, 331}, Gate::scalar);
  for (auto& e : p.in.at("g").data) e = 0;
  const TensorMap<mp> sg = hand(Gate::scalar, p);
  p.in.erase("g");
  const TensorMap<mp> la = hand(Gate::none, p);
  for (const auto& [name, x] : la) EXPECT_LT(rel_err(sg.at(name), x), 1e-140) << name;
}

}  // namespace
