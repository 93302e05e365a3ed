// Backward pass of GKA (reference/gka/backward.hpp), exact solve (implicit
// differentiation), Chebyshev (reverse pass over stored iterates, and GKA Alg. 2)
// and CG (reverse mode over its recorded iterates), in MPFR at 512 bits, against
//  * reverse mode through the forward reference code (≤ 1e-70): for Chebyshev this
//    includes the dependence of the bounds L = ‖H‖_F + λ, μ = λ on H; the variant
//    that holds them constant (GKA App. C.1) is checked against reverse mode of a
//    forward written here with the bounds detached from the tape;
//  * central differences with h = 2^-120 (≤ 1e-60; tests/support/grad_check.hpp);
//  * GKA eq. (6): Chebyshev run to convergence (r = 80, κ ≤ (a+1)/a = 3, error
//    factor ≈ 0.27^80 ≈ 1e-46) has the exact solve's gradients to ≤ 1e-30, the bounds'
//    contribution vanishing with the iteration error.
// CG runs r = 2 < K steps (GKA's regime r ≪ K; at r ≥ K CG has converged and its
// further steps divide rounding noise by rounding noise, cg_backward.hpp).
// hkk0's gradient is compared folded, (i, j) + (j, i): the Cholesky solve reads one
// triangle of the symmetric H, the hand adjoint treats H as a general matrix, and the
// two agree on every symmetric perturbation (the only ones H_0 = Σ kkᵀ can make).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "reference/gka/backward.hpp"
#include "reference/gka/sequential.hpp"
#include "tests/support/grad_check.hpp"

namespace {

using namespace ttr::test::grad;
using ttr::GkaOptions;
using ttr::GkaSolver;
using ttr::Tensor;
using ttr::TensorMap;

constexpr double kScale = 0.5;

struct Case {
  std::int64_t B, T, H, K, V;
  bool beta, alpha, h0, hkk0, dht, dhkk;
  std::uint64_t seed;
};

Problem make_problem(const Case& c) {
  Problem p;
  std::uint64_t s = c.seed;
  p.in["q"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 1);
  p.in["k"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 1);
  p.in["v"] = rand_mp({c.B, c.T, c.H, c.V}, s++, -1, 1);
  p.in["g"] = rand_mp({c.B, c.T, c.H}, s++, -0.7, 0);
  if (c.beta) p.in["beta"] = rand_mp({c.B, c.T, c.H}, s++, 0.25, 1);
  if (c.alpha) p.in["alpha"] = rand_mp({c.B, c.T, c.H}, s++, 0.2, 1);
  if (c.h0) p.in["h0"] = rand_mp({c.B, c.H, c.K, c.V}, s++, -1, 1);
  if (c.hkk0) {  // symmetric positive semidefinite: Σ of K outer products
    Tensor<mp> H0({c.B, c.H, c.K, c.K}, mp(0));
    const Tensor<mp> r = rand_mp({c.B, c.H, c.K, c.K}, s++, -1, 1);
    for (std::int64_t bh = 0; bh < c.B * c.H; ++bh)
      for (std::int64_t m = 0; m < c.K; ++m)
        for (std::int64_t i = 0; i < c.K; ++i)
          for (std::int64_t j = 0; j < c.K; ++j)
            H0.data[(bh * c.K + i) * c.K + j] += r.data[(bh * c.K + m) * c.K + i] * r.data[(bh * c.K + m) * c.K + j];
    p.in["hkk0"] = H0;
  }
  p.cot["o"] = rand_mp({c.B, c.T, c.H, c.V}, s++, -1, 1);
  if (c.dht) p.cot["ht"] = rand_mp({c.B, c.H, c.K, c.V}, s++, -1, 1);
  if (c.dhkk) p.cot["hkk"] = rand_mp({c.B, c.H, c.K, c.K}, s++, -1, 1);
  return p;
}

template <class S>
ttr::GkaInputs<S> gka_inputs(const TensorMap<S>& in) {
  return {in.at("q"),       in.at("k"),        in.at("v"),       in.at("g"),
          opt(in, "beta"),  opt(in, "alpha"),  opt(in, "h0"),    opt(in, "hkk0")};
}

struct Forward {
  GkaOptions o;
  template <class M>
  auto operator()(const M& in) const {
    using S = typename std::decay_t<decltype(in.at("q").data)>::value_type;
    ttr::GkaOutputs<S> out;
    ttr::gka_sequential(gka_inputs(in), o, ttr::from_double<S>(kScale), out);
    return TensorMap<S>{{"o", out.o}, {"ht", out.ht}, {"hkk", out.hkk}};
  }
};

// GKA's Chebyshev forward with the bounds L = ‖H‖_F + λ, μ = λ detached (their
// values only): the function whose gradient GKA App. C.1 computes. Written from
// GKA eq. (CH), eq. (4), Alg. 1 with the reference's Chebyshev iteration; no α, β.
struct DetachedBoundsForward {
  GkaOptions o;
  template <class M>
  auto operator()(const M& in) const {
    using S = typename std::decay_t<decltype(in.at("q").data)>::value_type;
    using std::exp;
    using std::sqrt;
    const Tensor<S>& q = in.at("q");
    const Tensor<S>& k = in.at("k");
    const Tensor<S>& v = in.at("v");
    const std::int64_t B = q.dim(0), T = q.dim(1), Hn = q.dim(2), K = q.dim(3), V = v.dim(3);
    TensorMap<S> out{{"o", Tensor<S>({B, T, Hn, V}, S(mp(0)))}, {"ht", Tensor<S>({B, Hn, K, V}, S(mp(0)))}};
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < Hn; ++h) {
        std::vector<S> Hm(K * K, S(mp(0))), Sm(K * V, S(mp(0))), sq(K);
        for (std::int64_t t = 0; t < T; ++t) {
          const std::int64_t row = (b * T + t) * Hn + h;
          const S gam = exp(in.at("g").data[row]);
          for (std::int64_t i = 0; i < K; ++i) {
            for (std::int64_t j = 0; j < K; ++j) Hm[i * K + j] = gam * Hm[i * K + j] + k.data[row * K + i] * k.data[row * K + j];
            for (std::int64_t j = 0; j < V; ++j) Sm[i * V + j] = gam * Sm[i * V + j] + k.data[row * K + i] * v.data[row * V + j];
          }
          const S fro = sqrt(dot(Hm.data(), Hm.data(), static_cast<int>(K * K)));
          const S lam = S(mp(o.a)) * fro;
          for (std::int64_t i = 0; i < K; ++i) sq[i] = S(mp(kScale)) * q.data[row * K + i];
          const ttr::ChebyshevParams<S> cp{S(mp(fro.v + lam.v)), S(lam.v), o.iters, S(mp(o.omega0))};
          auto apply = [&](const S* x, S* y) {
            for (std::int64_t i = 0; i < K; ++i) y[i] = dot(&Hm[i * K], x, static_cast<int>(K)) + lam * x[i];
          };
          const std::vector<S> x = ttr::chebyshev_forward(apply, sq.data(), static_cast<int>(K), cp).xi;
          for (std::int64_t j = 0; j < V; ++j) {
            S acc(mp(0));
            for (std::int64_t i = 0; i < K; ++i) acc += x[i] * Sm[i * V + j];
            out.at("o").data[row * V + j] = acc;
          }
        }
        for (std::int64_t e = 0; e < K * V; ++e) out.at("ht").data[(b * Hn + h) * K * V + e] = Sm[e];
      }
    return out;
  }
};

TensorMap<mp> hand(const Problem& p, const GkaOptions& o, bool bounds = true,
                   ttr::GkaChebyshevBackward route = ttr::GkaChebyshevBackward::unrolled) {
  ttr::GkaGrads<mp> g;
  ttr::GkaBackwardOptions bo;
  bo.chebyshev_bounds_gradient = bounds;
  bo.chebyshev = route;
  ttr::gka_backward(gka_inputs(p.in), o, mp(kScale), {p.cot.at("o"), opt(p.cot, "ht"), opt(p.cot, "hkk")}, g, bo);
  TensorMap<mp> r{{"q", g.dq}, {"k", g.dk}, {"v", g.dv}, {"g", g.dg}};
  if (p.in.count("beta")) r["beta"] = g.dbeta;
  if (p.in.count("alpha")) r["alpha"] = g.dalpha;
  if (p.in.count("h0")) r["h0"] = g.dh0;
  if (p.in.count("hkk0")) r["hkk0"] = g.dhkk0;
  return r;
}

// (i, j) and (j, i) of every K×K block of hkk0 added (the gradient on symmetric matrices).
TensorMap<mp> folded(TensorMap<mp> g) {
  if (auto it = g.find("hkk0"); it != g.end()) {
    Tensor<mp>& x = it->second;
    const std::int64_t K = x.shape[3];
    for (std::int64_t bh = 0; bh < x.shape[0] * x.shape[1]; ++bh)
      for (std::int64_t i = 0; i < K; ++i)
        for (std::int64_t j = 0; j < i; ++j) {
          mp& lo = x.data[(bh * K + i) * K + j];
          mp& up = x.data[(bh * K + j) * K + i];
          lo += up;
          up = 0;
        }
  }
  return g;
}

GkaOptions options(GkaSolver s, double a, bool fixed, int iters) {
  GkaOptions o;
  o.solver = s;
  o.a = a;
  o.fixed_lambda = fixed;
  o.lambda = 0.3;
  o.iters = iters;
  return o;
}

void check(const GkaOptions& o, ttr::GkaChebyshevBackward route = ttr::GkaChebyshevBackward::unrolled) {
  const Case cases[] = {{1, 6, 1, 3, 3, true, true, true, true, true, true, 601},
                        {2, 5, 2, 3, 2, false, false, false, false, false, false, 602},
                        {1, 7, 2, 4, 3, true, false, true, false, true, false, 603},
                        {2, 5, 1, 3, 3, false, true, false, true, false, true, 604}};
  for (const Case& c : cases) {
    SCOPED_TRACE("seed " + std::to_string(c.seed));
    const Problem p = make_problem(c);
    const TensorMap<mp> got = folded(hand(p, o, true, route));
    expect_grads_close(got, folded(tape_gradient(Forward{o}, p.in, p.cot)), kTapeTol, "vs reverse mode");
    if (c.seed == 601 || c.seed == 602)
      expect_grads_close(got, folded(fd_gradient(Forward{o}, p.in, p.cot, fd_step())), kFdTol,
                         "vs central differences");
  }
}

TEST(GkaBackward, ExactSolveAdaptiveRidgeMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(options(GkaSolver::exact, 0.1, false, 0));
}

TEST(GkaBackward, ExactSolveFixedRidgeMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(options(GkaSolver::exact, 0.1, true, 0));
}

TEST(GkaBackward, ChebyshevAdaptiveRidgeMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(options(GkaSolver::chebyshev, 0.1, false, 6));
}

TEST(GkaBackward, ChebyshevFixedRidgeMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(options(GkaSolver::chebyshev, 0.1, true, 4));
}

TEST(GkaBackward, ChebyshevByAlg2MatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(options(GkaSolver::chebyshev, 0.1, false, 6), ttr::GkaChebyshevBackward::alg2);
}

TEST(GkaBackward, ConjugateGradientAdaptiveRidgeMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(options(GkaSolver::cg, 0.1, false, 2));
}

TEST(GkaBackward, ConjugateGradientFixedRidgeMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(options(GkaSolver::cg, 0.1, true, 2));
}

// GKA App. C.1's variant: the bounds are constants of the backward.
TEST(GkaBackward, ChebyshevWithConstantBoundsMatchesReverseModeOfTheDetachedForward) {
  Mp512 prec;
  const GkaOptions o = options(GkaSolver::chebyshev, 0.1, false, 6);
  for (const Case& c : {Case{1, 6, 1, 3, 3, false, false, false, false, true, false, 611},
                        Case{2, 5, 2, 4, 2, false, false, false, false, false, false, 612}}) {
    const Problem p = make_problem(c);
    const TensorMap<mp> got = hand(p, o, false);
    expect_grads_close(got, tape_gradient(DetachedBoundsForward{o}, p.in, p.cot), kTapeTol, "constant bounds");
    expect_grads_close(hand(p, o, false, ttr::GkaChebyshevBackward::alg2), got, 1e-70, "constant bounds, Alg. 2");
    // and the bounds matter: the full adjoint differs.
    EXPECT_GT(rel_err(hand(p, o, true).at("k"), got.at("k")), 1e-8);
  }
}

// Chebyshev to convergence has the exact solve's (implicit-differentiation) gradients.
TEST(GkaBackward, ConvergedChebyshevHasTheImplicitDifferentiationGradients) {
  Mp512 prec;
  const Problem p = make_problem({2, 6, 2, 3, 3, true, true, true, true, true, true, 621});
  const TensorMap<mp> exact = folded(hand(p, options(GkaSolver::exact, 0.5, false, 0)));
  const TensorMap<mp> cheb = folded(hand(p, options(GkaSolver::chebyshev, 0.5, false, 80)));
  expect_grads_close(cheb, exact, 1e-30, "Chebyshev r = 80 vs exact");
  const TensorMap<mp> short_run = folded(hand(p, options(GkaSolver::chebyshev, 0.5, false, 3)));
  EXPECT_GT(rel_err(short_run.at("k"), exact.at("k")), 1e-6);  // the agreement is convergence, not identity
}

}  // namespace
