// Backward passes of the Sherman–Morrison layers (reference/pdn_exact/backward.hpp,
// reference/kalman_filter/backward.hpp over family/sherman_morrison_backward.hpp),
// in MPFR at 512 bits, against reverse mode through the forward reference code
// (≤ 1e-70), central differences with h = 2^-120 (≤ 1e-60; tests/support/
// grad_check.hpp says why), and the closed form of the ridge solution:
//   from S_0 = 0, S_t = (G_t + λI)⁻¹ Σ_{s≤t} η_s k_s v_sᵀ with G_t = Σ_{s≤t} η_s k_s k_sᵀ
//   (PDN Thm 3.1, GKA eq. (3)), so o_t = Σ_{s≤t} η_s (k_sᵀ x_t) v_s with
//   x_t = (G_t + λI)⁻¹ scale·q_t, and dv_s = η_s Σ_{t≥s} (k_sᵀ x_t) do_t (dht absent),
// with x_t from a dense Gaussian elimination written here.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "reference/kalman_filter/backward.hpp"
#include "reference/kalman_filter/sequential.hpp"
#include "reference/pdn_exact/backward.hpp"
#include "reference/pdn_exact/sequential.hpp"
#include "tests/support/grad_check.hpp"

namespace {

using namespace ttr::test::grad;
using ttr::Tensor;
using ttr::TensorMap;

constexpr double kScale = 0.5;
constexpr double kLambda = 0.75;

struct Case {
  std::int64_t B, T, H, K, V;
  bool eta, h0, dht;
  std::uint64_t seed;
};

Problem make_problem(const Case& c) {
  Problem p;
  std::uint64_t s = c.seed;
  p.in["q"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 1);
  p.in["k"] = rand_mp({c.B, c.T, c.H, c.K}, s++, -1, 1);
  p.in["v"] = rand_mp({c.B, c.T, c.H, c.V}, s++, -1, 1);
  if (c.eta) p.in["eta"] = rand_mp({c.B, c.T, c.H}, s++, 0.25, 2);
  if (c.h0) p.in["h0"] = rand_mp({c.B, c.H, c.K, c.V}, s++, -1, 1);
  p.cot["o"] = rand_mp({c.B, c.T, c.H, c.V}, s++, -1, 1);
  if (c.dht) p.cot["ht"] = rand_mp({c.B, c.H, c.K, c.V}, s++, -1, 1);
  return p;
}

struct Forward {
  template <class M>
  auto operator()(const M& in) const {
    using S = typename std::decay_t<decltype(in.at("q").data)>::value_type;
    TensorMap<S> out;
    ttr::kalman_filter_sequential<S>(in.at("q"), in.at("k"), in.at("v"), opt(in, "eta"), opt(in, "h0"),
                                     ttr::from_double<S>(kLambda), ttr::from_double<S>(kScale), out["o"], out["ht"]);
    return out;
  }
};

TensorMap<mp> hand(const Problem& p) {
  const auto& in = p.in;
  TensorMap<mp> g;
  Tensor<mp> dh0, deta;
  if (in.count("eta"))
    ttr::kalman_filter_backward(in.at("q"), in.at("k"), in.at("v"), &in.at("eta"), opt(in, "h0"), mp(kLambda),
                                mp(kScale), p.cot.at("o"), opt(p.cot, "ht"), g["q"], g["k"], g["v"], deta, dh0);
  else
    ttr::pdn_exact_backward(in.at("q"), in.at("k"), in.at("v"), opt(in, "h0"), mp(kLambda), mp(kScale), p.cot.at("o"),
                            opt(p.cot, "ht"), g["q"], g["k"], g["v"], dh0);
  if (in.count("eta")) g["eta"] = deta;
  if (in.count("h0")) g["h0"] = dh0;
  return g;
}

void check(bool eta) {
  const Case cases[] = {{1, 7, 1, 3, 3, eta, true, true, 401},
                        {2, 5, 2, 3, 4, eta, false, false, 402},
                        {1, 9, 2, 4, 3, eta, true, false, 403},
                        {2, 6, 1, 4, 4, eta, false, true, 404}};
  for (const Case& c : cases) {
    SCOPED_TRACE("seed " + std::to_string(c.seed));
    const Problem p = make_problem(c);
    const TensorMap<mp> got = hand(p);
    expect_grads_close(got, tape_gradient(Forward{}, p.in, p.cot), kTapeTol, "vs reverse mode");
    if (c.seed == 401 || c.seed == 402)
      expect_grads_close(got, fd_gradient(Forward{}, p.in, p.cot, fd_step()), kFdTol, "vs central differences");
  }
}

TEST(ShermanMorrisonBackward, PdnExactMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(false);
}

TEST(ShermanMorrisonBackward, KalmanFilterMatchesReverseModeAndCentralDifferences) {
  Mp512 prec;
  check(true);
}

// x = A⁻¹ b by Gaussian elimination with partial pivoting (A n×n row-major, copied).
std::vector<mp> solve(std::vector<mp> A, std::vector<mp> b, int n) {
  for (int c = 0; c < n; ++c) {
    int piv = c;
    for (int r = c + 1; r < n; ++r)
      if (abs(A[r * n + c]) > abs(A[piv * n + c])) piv = r;
    for (int j = 0; j < n; ++j) std::swap(A[c * n + j], A[piv * n + j]);
    std::swap(b[c], b[piv]);
    for (int r = c + 1; r < n; ++r) {
      const mp f = A[r * n + c] / A[c * n + c];
      for (int j = c; j < n; ++j) A[r * n + j] -= f * A[c * n + j];
      b[r] -= f * b[c];
    }
  }
  std::vector<mp> x(n);
  for (int i = n - 1; i >= 0; --i) {
    mp s = b[i];
    for (int j = i + 1; j < n; ++j) s -= A[i * n + j] * x[j];
    x[i] = s / A[i * n + i];
  }
  return x;
}

TEST(ShermanMorrisonBackward, DvIsTheRidgeClosedForm) {
  Mp512 prec;
  for (const bool eta : {false, true}) {
    const Case c{2, 7, 2, 4, 3, eta, false, false, 411};
    const Problem p = make_problem(c);
    const TensorMap<mp> got = hand(p);
    const int K = static_cast<int>(c.K);
    const auto& q = p.in.at("q").data;
    const auto& k = p.in.at("k").data;
    const auto& d = p.cot.at("o").data;
    Tensor<mp> want({c.B, c.T, c.H, c.V}, mp(0));
    for (std::int64_t b = 0; b < c.B; ++b)
      for (std::int64_t h = 0; h < c.H; ++h) {
        auto tok = [&](std::int64_t t) { return (b * c.T + t) * c.H + h; };
        auto w = [&](std::int64_t s) { return eta ? p.in.at("eta").data[tok(s)] : mp(1); };
        std::vector<mp> G(K * K, mp(0));
        for (int i = 0; i < K; ++i) G[i * K + i] = mp(kLambda);
        for (std::int64_t t = 0; t < c.T; ++t) {
          for (int i = 0; i < K; ++i)
            for (int j = 0; j < K; ++j) G[i * K + j] += w(t) * k[tok(t) * K + i] * k[tok(t) * K + j];
          std::vector<mp> rhs(K);
          for (int i = 0; i < K; ++i) rhs[i] = mp(kScale) * q[tok(t) * K + i];
          const std::vector<mp> x = solve(G, rhs, K);
          for (std::int64_t s = 0; s <= t; ++s) {
            mp kx = 0;
            for (int i = 0; i < K; ++i) kx += k[tok(s) * K + i] * x[i];
            for (std::int64_t j = 0; j < c.V; ++j) want.data[tok(s) * c.V + j] += w(s) * kx * d[tok(t) * c.V + j];
          }
        }
      }
    EXPECT_LT(rel_err(got.at("v"), want), 1e-140) << (eta ? "kalman_filter" : "pdn_exact");
    EXPECT_GT(max_abs(want), 1e-6);
  }
}

}  // namespace
