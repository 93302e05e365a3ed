// Backward passes of the preconditioned delta rules (reference/precond_gated_delta_rule/
// backward.hpp for both decays; the ATK adjoint of
// reference/family/atk_backward.hpp), in MPFR at 512 bits, against reverse mode
// through the forward reference code (≤ 1e-70) and central differences with
// h = 2^-120 (≤ 1e-60; tests/support/grad_check.hpp says why). Gradients: q, k, v,
// g, beta, g_atk, beta_atk, h0, initial_A_state, and the centre log_atk_scale [H]
// as a tensor input; cotangents of o, ht and final_A_state (each optional but o).
// Every compared gradient is checked to be non-zero: an ATK adjoint that dropped
// the carried dA (the A recurrence), the squash derivative 1/(1+|r|)², or the
// direct path B⊙dk̃ would miss by O(1) relative.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "reference/gated_delta_rule/backward.hpp"
#include "reference/kda/backward.hpp"
#include "reference/precond_gated_delta_rule/backward.hpp"
#include "reference/precond_gated_delta_rule/sequential.hpp"
#include "tests/support/grad_check.hpp"

namespace {

using namespace ttr::test::grad;
using ttr::Decay;
using ttr::Tensor;
using ttr::TensorMap;

constexpr double kScale = 0.5;
constexpr double kX = 1.5;    // squash range [1/x, x] (FLA default)
constexpr double kEps = 1e-6;  // inside the log (FLA default)

struct Case {
  std::int64_t B, T, H, K, V;
  bool h0, A0, dht, dAt;
  std::uint64_t seed;
};

// Keys |k_i| ≤ 0.8, β ≤ 0.75 (β‖k̃‖‖k‖ < 2 with B ≤ 1.5 for K ≤ 3 keeps the delta
// step tame); A_0 ∈ [0.05, 1] and β_atk ∈ [0.1, 1] keep log(A + eps) away from the
// squash centre's kink only generically (r = 0 has probability 0).
Problem make_problem(const Case& c, Decay decay) {
  Problem p;
  std::uint64_t s = c.seed;
  p.in["q"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 1);
  p.in["k"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -0.8, 0.8);
  p.in["v"] = rand_mp({c.B, c.T, c.H, c.V}, s++, -1, 1);
  p.in["beta"] = rand_mp({c.B, c.T, c.H}, s++, 0.05, 0.75);
  p.in["g"] = decay == Decay::per_key ? rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 0) : rand_mp({c.B, c.T, c.H}, s++, -1, 0);
  p.in["g_atk"] = rand_mp({c.B, c.T, c.H}, s++, -1, 0);
  p.in["beta_atk"] = rand_mp({c.B, c.T, c.H}, s++, 0.1, 1);
  p.in["log_atk_scale"] = rand_mp({c.H}, s++, -0.7, 0.3);
  if (c.h0) p.in["h0"] = rand_mp({c.B, c.H, c.K, c.V}, s++, -1, 1);
  if (c.A0) p.in["initial_A_state"] = rand_mp({c.B, c.H, c.K}, s++, 0.05, 1);
  p.cot["o"] = rand_mp({c.B, c.T, c.H, c.V}, s++, -1, 1);
  if (c.dht) p.cot["ht"] = rand_mp({c.B, c.H, c.K, c.V}, s++, -1, 1);
  if (c.dAt) p.cot["final_A_state"] = rand_mp({c.B, c.H, c.K}, s++, -1, 1);
  return p;
}

struct Forward {
  Decay decay;
  template <class M>
  auto operator()(const M& in) const {
    using S = typename std::decay_t<decltype(in.at("q").data)>::value_type;
    using std::log;
    TensorMap<S> out;
    const ttr::PrecondDelta<S> a{decay,
                                 in.at("q"),
                                 in.at("k"),
                                 in.at("v"),
                                 in.at("g"),
                                 in.at("beta"),
                                 opt(in, "h0"),
                                 ttr::from_double<S>(kScale),
                                 in.at("g_atk"),
                                 in.at("beta_atk"),
                                 in.at("log_atk_scale").data,
                                 opt(in, "initial_A_state"),
                                 log(ttr::from_double<S>(kX)),
                                 ttr::from_double<S>(kEps)};
    ttr::precond_delta_sequential<S>(a, {out["o"], out["ht"], out["final_A_state"]});
    return out;
  }
};

TensorMap<mp> hand(Decay decay, const Problem& p, double x = kX) {
  const auto& in = p.in;
  TensorMap<mp> g;
  const ttr::PrecondDelta<mp> a{decay,      in.at("q"),         in.at("k"),   in.at("v"),       in.at("g"),
                                in.at("beta"), opt(in, "h0"),   mp(kScale),   in.at("g_atk"),   in.at("beta_atk"),
                                in.at("log_atk_scale").data,    opt(in, "initial_A_state"),       log(mp(x)),
                                mp(kEps)};
  ttr::PrecondDeltaGrads<mp> d;
  ttr::precond_delta_backward<mp>(a, {p.cot.at("o"), opt(p.cot, "ht"), opt(p.cot, "final_A_state")}, d);
  g["q"] = d.dq, g["k"] = d.dk, g["v"] = d.dv, g["g"] = d.dg, g["beta"] = d.dbeta, g["g_atk"] = d.dg_atk;
  g["beta_atk"] = d.dbeta_atk, g["log_atk_scale"] = d.dlog_atk_scale;
  if (in.count("h0")) g["h0"] = d.dh0;
  if (in.count("initial_A_state")) g["initial_A_state"] = d.dA0;
  return g;
}

void check(Decay decay) {
  const Case cases[] = {{1, 7, 1, 3, 3, true, true, true, true, 5},
                        {2, 5, 2, 3, 4, false, false, false, false, 6},
                        {1, 8, 2, 4, 3, true, false, false, true, 7},
                        {2, 6, 1, 4, 4, false, true, true, false, 8}};
  const Forward fwd{decay};
  for (const Case& c : cases) {
    SCOPED_TRACE("seed " + std::to_string(c.seed));
    const Problem p = make_problem(c, decay);
    const TensorMap<mp> got = hand(decay, p);
    expect_grads_close(got, tape_gradient(fwd, p.in, p.cot), kTapeTol, "vs reverse mode");
    if (c.seed == 5 || c.seed == 6)
      expect_grads_close(got, fd_gradient(fwd, p.in, p.cot, fd_step()), kFdTol, "vs central differences");
  }
}

TEST(PrecondBackward, PrecondGatedDeltaRuleMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(Decay::scalar);
}

TEST(PrecondBackward, PrecondKdaMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(Decay::per_key);
}

// x = 1 makes the preconditioner the identity (B_t = e^{−0·s} = 1, k̃ = k): the
// gradients are gated_delta_rule's / kda's, and, without a cotangent on
// final_A_state, the preconditioner's own inputs get exactly zero. With one, A_T
// still depends on k, g_atk, beta_atk and A_0 (not on the centre), and dA_0 is the
// cotangent carried back through the decays alone: Π_t e^{g_atk,t} dA_T.
TEST(PrecondBackward, UnitRangeIsThePlainLayer) {
  Mp512 prec;
  for (const Decay decay : {Decay::scalar, Decay::per_key})
    for (const bool dAt : {false, true}) {
      const Problem p = make_problem({2, 6, 2, 3, 3, true, true, true, dAt, 9}, decay);
      const TensorMap<mp> got = hand(decay, p, 1.0);
      const auto& in = p.in;
      TensorMap<mp> want;
      const auto plain = decay == Decay::scalar ? &ttr::gated_delta_rule_backward<mp> : &ttr::kda_backward<mp>;
      plain(in.at("q"), in.at("k"), in.at("v"), in.at("g"), in.at("beta"), &in.at("h0"), mp(kScale), p.cot.at("o"),
            &p.cot.at("ht"), want["q"], want["k"], want["v"], want["g"], want["beta"], want["h0"], ttr::SequentialDeltaCore{});
      if (dAt) want.erase("k");
      for (const auto& [name, w] : want) EXPECT_LT(rel_err(got.at(name), w), 1e-140) << name;
      EXPECT_EQ(max_abs(got.at("log_atk_scale")), 0.0);
      Tensor<mp> dA0({2, 2, 3}, mp(0));
      if (dAt) {
        dA0 = p.cot.at("final_A_state");
        const auto& ga = in.at("g_atk");
        for (std::int64_t b = 0; b < 2; ++b)
          for (std::int64_t h = 0; h < 2; ++h)
            for (std::int64_t t = 0; t < 6; ++t)
              for (std::int64_t i = 0; i < 3; ++i) dA0.data[(b * 2 + h) * 3 + i] *= exp(ga.data[(b * 6 + t) * 2 + h]);
        EXPECT_GT(max_abs(got.at("g_atk")), 1e-6);
      } else {
        EXPECT_EQ(max_abs(got.at("g_atk")), 0.0);
        EXPECT_EQ(max_abs(got.at("beta_atk")), 0.0);
      }
      EXPECT_LT(rel_err(got.at("initial_A_state"), dA0), 1e-140);
    }
}

}  // namespace
