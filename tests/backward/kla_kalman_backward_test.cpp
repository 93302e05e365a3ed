// Backward pass of Kalman linear attention (reference/kla_kalman/backward.hpp), in
// MPFR at 512 bits, against reverse mode through the forward reference code
// (≤ 1e-70) and central differences with h = 2^-120 (≤ 1e-60; tests/support/
// grad_check.hpp says why), with and without the optional initial states and the
// optional cotangents (o_var, lambda_T, eta_T). One identity by hand: for one token
// and only an o_var cotangent, o_var_d = scale² Σ_n q_n²/Λ_1 gives
// dq_n = 2 scale² Σ_d do_var_d q_n / Λ_{1,n,d} with Λ_1 = Λ_0/(ā² + p̄Λ_0) + k_n² λv_d.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "reference/kla_kalman/backward.hpp"
#include "reference/kla_kalman/sequential.hpp"
#include "tests/support/grad_check.hpp"

namespace {

using namespace ttr::test::grad;
using ttr::Tensor;
using ttr::TensorMap;

constexpr double kScale = 0.5;
constexpr double kLambda0 = 1.25;

struct Case {
  std::int64_t B, T, H, N, D;
  bool init, cot_all;
  std::uint64_t seed;
};

Problem make_problem(const Case& c) {
  Problem p;
  std::uint64_t s = c.seed;
  p.in["q"] = rand_mp({c.B, c.T, c.H, c.N}, s++, -1, 1);
  p.in["k"] = rand_mp({c.B, c.T, c.H, c.N}, s++, -1, 1);
  p.in["v"] = rand_mp({c.B, c.T, c.H, c.D}, s++, -1, 1);
  p.in["lambda_v"] = rand_mp({c.B, c.T, c.H, c.D}, s++, 0.5, 2);
  p.in["a_bar"] = rand_mp({c.H, c.N, c.D}, s++, 0.5, 1);
  p.in["p_bar"] = rand_mp({c.H, c.N, c.D}, s++, 0.05, 0.5);
  if (c.init) {
    p.in["lambda_init"] = rand_mp({c.B, c.H, c.N, c.D}, s++, 0.5, 2);
    p.in["eta_init"] = rand_mp({c.B, c.H, c.N, c.D}, s++, -1, 1);
  }
  p.cot["o"] = rand_mp({c.B, c.T, c.H, c.D}, s++, -1, 1);
  if (c.cot_all) {
    p.cot["o_var"] = rand_mp({c.B, c.T, c.H, c.D}, s++, -1, 1);
    p.cot["lambda_T"] = rand_mp({c.B, c.H, c.N, c.D}, s++, -1, 1);
    p.cot["eta_T"] = rand_mp({c.B, c.H, c.N, c.D}, s++, -1, 1);
  }
  return p;
}

struct Forward {
  template <class M>
  auto operator()(const M& in) const {
    using S = typename std::decay_t<decltype(in.at("q").data)>::value_type;
    const ttr::KlaInputs<S> x{in.at("q"),      in.at("k"),     in.at("v"),           in.at("lambda_v"),
                              in.at("a_bar"),  in.at("p_bar"), opt(in, "lambda_init"), opt(in, "eta_init")};
    ttr::KlaOutputs<S> o;
    ttr::kla_kalman_sequential(x, ttr::from_double<S>(kLambda0), ttr::from_double<S>(kScale), o);
    return TensorMap<S>{{"o", o.o}, {"o_var", o.o_var}, {"lambda_T", o.lambda_T}, {"eta_T", o.eta_T}};
  }
};

TensorMap<mp> hand(const Problem& p) {
  const auto& in = p.in;
  const ttr::KlaInputs<mp> x{in.at("q"),     in.at("k"),     in.at("v"),           in.at("lambda_v"),
                             in.at("a_bar"), in.at("p_bar"), opt(in, "lambda_init"), opt(in, "eta_init")};
  ttr::KlaGrads<mp> g;
  ttr::kla_kalman_backward(x, mp(kLambda0), mp(kScale),
                           {p.cot.at("o"), opt(p.cot, "o_var"), opt(p.cot, "lambda_T"), opt(p.cot, "eta_T")}, g);
  TensorMap<mp> r{{"q", g.dq},         {"k", g.dk},         {"v", g.dv},
                  {"lambda_v", g.dlambda_v}, {"a_bar", g.da_bar}, {"p_bar", g.dp_bar}};
  if (in.count("lambda_init")) r["lambda_init"] = g.dlambda_init;
  if (in.count("eta_init")) r["eta_init"] = g.deta_init;
  return r;
}

TEST(KlaKalmanBackward, MatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  const Case cases[] = {{1, 7, 1, 3, 3, true, true, 501},
                        {2, 5, 2, 3, 4, false, false, 502},
                        {1, 9, 2, 4, 3, true, false, 503},
                        {2, 6, 1, 4, 4, false, true, 504}};
  for (const Case& c : cases) {
    SCOPED_TRACE("seed " + std::to_string(c.seed));
    const Problem p = make_problem(c);
    const TensorMap<mp> got = hand(p);
    expect_grads_close(got, tape_gradient(Forward{}, p.in, p.cot), kTapeTol, "vs reverse mode");
    if (c.seed == 501 || c.seed == 502)
      expect_grads_close(got, fd_gradient(Forward{}, p.in, p.cot, fd_step()), kFdTol, "vs central differences");
  }
}

TEST(KlaKalmanBackward, OneTokenVarianceReadoutDq) {
  Mp512 prec;
  const Case c{2, 1, 2, 3, 4, true, false, 511};
  Problem p = make_problem(c);
  p.cot["o"] = Tensor<mp>(p.cot.at("o").shape, mp(0));
  p.cot["o_var"] = rand_mp({c.B, c.T, c.H, c.D}, 512, -1, 1);
  const TensorMap<mp> got = hand(p);
  Tensor<mp> want(p.in.at("q").shape, mp(0));
  const auto& in = p.in;
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t h = 0; h < c.H; ++h)
      for (std::int64_t n = 0; n < c.N; ++n)
        for (std::int64_t d = 0; d < c.D; ++d) {
          const std::size_t s = static_cast<std::size_t>((h * c.N + n) * c.D + d);
          const std::size_t s0 = static_cast<std::size_t>(((b * c.H + h) * c.N + n) * c.D + d);
          const mp& L0 = in.at("lambda_init").data[s0];
          const mp& a = in.at("a_bar").data[s];
          const mp& kn = in.at("k").data[(b * c.H + h) * c.N + n];
          const mp L1 = L0 / (a * a + in.at("p_bar").data[s] * L0) + kn * kn * in.at("lambda_v").data[(b * c.H + h) * c.D + d];
          const mp& qn = in.at("q").data[(b * c.H + h) * c.N + n];
          want.data[(b * c.H + h) * c.N + n] +=
              2 * mp(kScale) * mp(kScale) * p.cot.at("o_var").data[(b * c.H + h) * c.D + d] * qn / L1;
        }
  EXPECT_LT(rel_err(got.at("q"), want), 1e-140);
  EXPECT_GT(max_abs(want), 1e-6);
}

}  // namespace
