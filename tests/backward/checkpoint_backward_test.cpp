// Checkpointing in the sequential backward passes (family/delta_backward.hpp,
// gka/backward.hpp): the adjoint sweep re-steps each segment of C tokens from a
// stored state instead of keeping all T states. Every state is recomputed by the
// same code from the same values, so the gradients must be bit for bit those of
// C = T (every state kept): checked in float64, float32 and MPFR-256 for
// C ∈ {1, 2, 3, T} and the default ⌈√T⌉ on T = 7 (a multiple of none but 1 and 7),
// with h0 and dht, for the delta core (scalar and per-key decay) and GKA (every
// solver).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "reference/family/delta_backward.hpp"
#include "reference/gka/backward.hpp"
#include "tests/support/grad_check.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using namespace ttr::test::grad;
using ttr::Tensor;

constexpr std::int64_t B = 2, T = 7, H = 1, K = 3, V = 4;

template <class S>
Tensor<S> rand_t(ttr::Shape shape, std::uint64_t seed, double lo, double hi) {
  return ttr::test::uniform_as<S>(std::move(shape), seed, lo, hi);
}

template <class S>
bool same_bits(const Tensor<S>& a, const Tensor<S>& b) {
  if (a.shape != b.shape) return false;
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    if constexpr (std::is_same_v<S, mp>) {
      if (a.data[i] != b.data[i]) return false;  // MPFR: equal values at equal precision
    } else if (std::memcmp(&a.data[i], &b.data[i], sizeof(S)) != 0) {
      return false;
    }
  }
  return true;
}

const std::int64_t kSpacings[] = {1, 2, 3, 0 /* ⌈√T⌉ = 3 */, T};

template <class S>
void delta_case(ttr::Decay decay) {
  const Tensor<S> q = rand_t<S>({B, T, H, K}, 71, -1, 1), k = rand_t<S>({B, T, H, K}, 72, -1, 1),
                  v = rand_t<S>({B, T, H, V}, 73, -1, 1), beta = rand_t<S>({B, T, H}, 74, 0, 1),
                  g = decay == ttr::Decay::per_key ? rand_t<S>({B, T, H, K}, 75, -0.5, 0) : rand_t<S>({B, T, H}, 75, -0.5, 0),
                  h0 = rand_t<S>({B, H, K, V}, 76, -1, 1), dout = rand_t<S>({B, T, H, V}, 77, -1, 1),
                  dht = rand_t<S>({B, H, K, V}, 78, -1, 1);
  const S scale = ttr::from_double<S>(0.5);
  ttr::DeltaGrads<S> all;
  ttr::delta_backward<S>(decay, q, k, k, v, beta, &g, &h0, scale, dout, &dht, all, T);
  for (const std::int64_t C : kSpacings) {
    SCOPED_TRACE("C = " + std::to_string(C));
    ttr::DeltaGrads<S> got;
    ttr::delta_backward<S>(decay, q, k, k, v, beta, &g, &h0, scale, dout, &dht, got, C);
    EXPECT_TRUE(same_bits(got.dq, all.dq));
    EXPECT_TRUE(same_bits(got.dk, all.dk));
    EXPECT_TRUE(same_bits(got.dw, all.dw));
    EXPECT_TRUE(same_bits(got.dv, all.dv));
    EXPECT_TRUE(same_bits(got.dbeta, all.dbeta));
    EXPECT_TRUE(same_bits(got.dg, all.dg));
    EXPECT_TRUE(same_bits(got.dh0, all.dh0));
  }
}

template <class S>
void gka_case(ttr::GkaSolver solver, ttr::GkaChebyshevBackward route = ttr::GkaChebyshevBackward::unrolled) {
  const Tensor<S> q = rand_t<S>({B, T, H, K}, 81, -1, 1), k = rand_t<S>({B, T, H, K}, 82, -1, 1),
                  v = rand_t<S>({B, T, H, V}, 83, -1, 1), g = rand_t<S>({B, T, H}, 84, -0.5, 0),
                  beta = rand_t<S>({B, T, H}, 85, 0.25, 1), alpha = rand_t<S>({B, T, H}, 86, 0.2, 1),
                  h0 = rand_t<S>({B, H, K, V}, 87, -1, 1), dout = rand_t<S>({B, T, H, V}, 88, -1, 1),
                  dht = rand_t<S>({B, H, K, V}, 89, -1, 1), dhkk = rand_t<S>({B, H, K, K}, 90, -1, 1);
  ttr::GkaOptions o;
  o.solver = solver;
  o.a = 0.1;
  o.iters = solver == ttr::GkaSolver::cg ? 2 : 5;
  const ttr::GkaInputs<S> in{q, k, v, g, &beta, &alpha, &h0, nullptr};
  const S scale = ttr::from_double<S>(0.5);
  auto run = [&](std::int64_t C) {
    ttr::GkaGrads<S> gr;
    ttr::GkaBackwardOptions bo;
    bo.chebyshev = route;
    bo.checkpoint_every = C;
    ttr::gka_backward(in, o, scale, {dout, &dht, &dhkk}, gr, bo);
    return gr;
  };
  const ttr::GkaGrads<S> all = run(T);
  for (const std::int64_t C : kSpacings) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const ttr::GkaGrads<S> got = run(C);
    for (auto [a, b] : {std::pair{&got.dq, &all.dq}, {&got.dk, &all.dk}, {&got.dv, &all.dv}, {&got.dg, &all.dg},
                        {&got.dbeta, &all.dbeta}, {&got.dalpha, &all.dalpha}, {&got.dh0, &all.dh0},
                        {&got.dhkk0, &all.dhkk0}})
      EXPECT_TRUE(same_bits(*a, *b));
  }
}

TEST(CheckpointBackward, DeltaCoreIsBitIdenticalForEverySegmentLength) {
  delta_case<double>(ttr::Decay::scalar);
  delta_case<float>(ttr::Decay::per_key);
  ttr::test::PrecisionGuard guard;
  ttr::precision_control<mp>::set_bits(256);
  delta_case<mp>(ttr::Decay::scalar);
  delta_case<mp>(ttr::Decay::per_key);
}

TEST(CheckpointBackward, GkaIsBitIdenticalForEverySegmentLength) {
  for (const auto s : {ttr::GkaSolver::exact, ttr::GkaSolver::chebyshev, ttr::GkaSolver::cg}) {
    SCOPED_TRACE(static_cast<int>(s));
    gka_case<double>(s);
    gka_case<float>(s);
  }
  gka_case<double>(ttr::GkaSolver::chebyshev, ttr::GkaChebyshevBackward::alg2);
  ttr::test::PrecisionGuard guard;
  ttr::precision_control<mp>::set_bits(256);
  gka_case<mp>(ttr::GkaSolver::chebyshev);
}

}  // namespace
