// gka chunkwise form (reference/gka/chunk.hpp, GKA §4.2) against the sequential form
// (reference/gka/sequential.hpp), and its arithmetic policies against the MPFR oracle.
//
// Error model of the MPFR comparisons (both forms at 256 bits, u = 2^-256 ≈ 8.6e-78):
// the chunk form reorders the same sums (eq. (5) for ‖H_c‖_F, unrolled H_c ξ products,
// exp(b_c − b_j) for products of gates), so each output differs from the sequential
// one by a few u times the size of the terms summed, amplified by the conditioning of
// the solve, κ ≤ (a+1)/a = 51 (eq. (4)), and by ≤ 30 stable Chebyshev/CG steps: far
// below 1e-70 of the largest element of each output. The tests ask for 1e-60 (10^10
// margin); a wrong decay, gate, mask, index or chunk boundary changes results by
// ≳ 1e-17.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "reference/core/multiprecision.hpp"
#include "reference/core/policy.hpp"
#include "reference/gka/chunk.hpp"
#include "reference/gka/sequential.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using M = ttr::mpfr_real;
using ttr::GkaInputs;
using ttr::GkaOptions;
using ttr::GkaOutputs;
using ttr::GkaSolver;
using ttr::Matrix;
using ttr::Tensor;
using ttr::TensorMap;
using ttr::test::PrecisionGuard;
using ttr::test::rel_err;
using ttr::test::uniform;

struct Dims {
  std::int64_t B, T, H, K, V;
};

// What the random inputs contain.
struct Draw {
  bool beta = true, alpha = true, h0 = true, hkk0 = true;
  double gamma_lo = 0.8;  // γ ∈ (gamma_lo, 1)
};

// Random inputs: q, k, v ∈ [−1, 1], γ ∈ (gamma_lo, 1), β ∈ (0.05, 1), α ∈ (0, 1),
// S_0 ∈ [−0.3, 0.3], H_0 = W Wᵀ/K (symmetric positive semidefinite).
TensorMap<double> random_inputs(const Dims& d, std::uint64_t seed, const Draw& w) {
  TensorMap<double> in;
  in["q"] = uniform({d.B, d.T, d.H, d.K}, seed + 1, -1, 1);
  in["k"] = uniform({d.B, d.T, d.H, d.K}, seed + 2, -1, 1);
  in["v"] = uniform({d.B, d.T, d.H, d.V}, seed + 3, -1, 1);
  Tensor<double> g = uniform({d.B, d.T, d.H}, seed + 4, w.gamma_lo, 1.0);
  for (double& e : g.data) e = std::log(e);
  in["g"] = g;
  if (w.beta) in["beta"] = uniform({d.B, d.T, d.H}, seed + 5, 0.05, 1.0);
  if (w.alpha) in["alpha"] = uniform({d.B, d.T, d.H}, seed + 6, 0.0, 1.0);
  if (w.h0) in["h0"] = uniform({d.B, d.H, d.K, d.V}, seed + 7, -0.3, 0.3);
  if (w.hkk0) {
    const Tensor<double> m = uniform({d.B, d.H, d.K, d.K}, seed + 8, -0.5, 0.5);
    Tensor<double> p({d.B, d.H, d.K, d.K}, 0.0);
    for (std::int64_t blk = 0; blk < d.B * d.H; ++blk)
      for (std::int64_t i = 0; i < d.K; ++i)
        for (std::int64_t j = 0; j < d.K; ++j) {
          double s = 0;
          for (std::int64_t l = 0; l < d.K; ++l) s += m.data[(blk * d.K + i) * d.K + l] * m.data[(blk * d.K + j) * d.K + l];
          p.data[(blk * d.K + i) * d.K + j] = s / static_cast<double>(d.K);
        }
    in["hkk0"] = p;
  }
  return in;
}

// Adversarial landmarks on random inputs, at positions that fall inside chunks and on
// their boundaries for every chunk size tested: near-duplicate keys (k_t = k_{t-1} +
// 1e-9·noise, so G and H_c are nearly rank-deficient), γ = 1 exactly (g = 0), γ ≈ 1e-13
// (g = −30: the state is all but reset), β = 0 (no write) and β = 1.
TensorMap<double> adversarial_inputs(const Dims& d, std::uint64_t seed) {
  TensorMap<double> in = random_inputs(d, seed, {});
  const Tensor<double> noise = uniform({d.B, d.T, d.H, d.K}, seed + 9, -1, 1);
  auto& k = in["k"];
  auto& g = in["g"];
  auto& beta = in["beta"];
  for (std::int64_t b = 0; b < d.B; ++b)
    for (std::int64_t t = 0; t < d.T; ++t)
      for (std::int64_t h = 0; h < d.H; ++h) {
        const std::size_t bt = ttr::test::i3(g.shape, b, t, h);
        if (t % 5 == 1)
          for (std::int64_t i = 0; i < d.K; ++i)
            k.data[ttr::test::i4(k.shape, b, t, h, i)] =
                k.data[ttr::test::i4(k.shape, b, t - 1, h, i)] + 1e-9 * noise.data[ttr::test::i4(k.shape, b, t, h, i)];
        if (t % 7 == 2) g.data[bt] = 0.0;
        if (t % 11 == 5) g.data[bt] = -30.0;
        if (t % 6 == 3) beta.data[bt] = 0.0;
        if (t % 6 == 4) beta.data[bt] = 1.0;
      }
  return in;
}

// H_t = 0 for the first 4 tokens (H_0 = 0, β = 0): under adaptive λ these tokens are
// degenerate (λ = 0, x = 0), while S_t = γ S_0 ≠ 0 still reads out (1 − α)·scale·q.
TensorMap<double> degenerate_prefix_inputs(const Dims& d, std::uint64_t seed) {
  Draw w;
  w.hkk0 = false;
  TensorMap<double> in = random_inputs(d, seed, w);
  auto& beta = in["beta"];
  for (std::int64_t b = 0; b < d.B; ++b)
    for (std::int64_t t = 0; t < std::min<std::int64_t>(4, d.T); ++t)
      for (std::int64_t h = 0; h < d.H; ++h) beta.data[ttr::test::i3(beta.shape, b, t, h)] = 0.0;
  return in;
}

// Inputs converted to a scalar type T (exactly for MPFR and double, rounded to nearest
// for float) and bound as GkaInputs.
template <class T>
struct Bound {
  TensorMap<T> t;
  explicit Bound(const TensorMap<double>& in) {
    for (const auto& [name, x] : in) {
      Tensor<T>& y = t[name];
      y.shape = x.shape;
      for (double e : x.data) y.data.push_back(ttr::from_double<T>(e));
    }
  }
  const Tensor<T>* opt(const char* name) const { return t.count(name) ? &t.at(name) : nullptr; }
  GkaInputs<T> view() const {
    return {t.at("q"), t.at("k"), t.at("v"), t.at("g"), opt("beta"), opt("alpha"), opt("h0"), opt("hkk0")};
  }
  T scale() const {
    using std::sqrt;
    return ttr::from_double<T>(1.0) / sqrt(ttr::from_double<T>(static_cast<double>(t.at("q").shape.back())));
  }
};

template <class T>
Tensor<M> to_mp(const Tensor<T>& x) {
  Tensor<M> y;
  y.shape = x.shape;
  for (const T& e : x.data) y.data.emplace_back(e);
  return y;
}

double max_abs_diff(const Tensor<M>& got, const Tensor<M>& want) {
  M m = 0;
  for (std::size_t i = 0; i < want.data.size(); ++i) m = std::max(m, M(abs(got.data[i] - want.data[i])));
  return m.convert_to<double>();
}

GkaOptions options(GkaSolver solver, int iters, bool fixed_lambda) {
  GkaOptions o;
  o.solver = solver;
  o.iters = iters;
  o.fixed_lambda = fixed_lambda;
  o.lambda = 0.3;
  return o;
}

// ------------------------------------------------------------ chunk == sequential (MPFR)

TEST(GkaChunk, MatchesSequentialInMpfr256) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const Dims d{1, 37, 2, 5, 3};  // T = 37 is prime: no chunk size below it divides it
  struct Case {
    const char* name;
    TensorMap<double> in;
  };
  const Case cases[] = {{"random", random_inputs(d, 1000, {})},
                        {"adversarial", adversarial_inputs(d, 2000)},
                        {"degenerate_prefix", degenerate_prefix_inputs(d, 3000)}};
  struct Solver {
    const char* name;
    GkaSolver solver;
    int iters;
  };
  // CG with 3 < K steps has not converged: its iterate depends on every per-token scalar.
  const Solver solvers[] = {{"chebyshev", GkaSolver::chebyshev, 30},
                            {"cg", GkaSolver::cg, 30},
                            {"cg3", GkaSolver::cg, 3},
                            {"exact", GkaSolver::exact, 0}};
  const int chunk_sizes[] = {1, 2, 3, 16, 64, static_cast<int>(d.T), static_cast<int>(d.T) + 5};
  const double tol = 1e-60;
  double worst = 0, worst_kappa = 0, worst_resid = 0;
  for (const Case& cs : cases)
    for (const Solver& sv : solvers)
      for (bool fixed : {false, true}) {
        const Bound<M> in(cs.in);
        const GkaOptions opt = options(sv.solver, sv.iters, fixed);
        GkaOutputs<M> seq;
        ttr::gka_sequential(in.view(), opt, in.scale(), seq);
        if (std::string(cs.name) == "degenerate_prefix" && !fixed) {  // the case exercises λ_c = 0
          EXPECT_EQ(std::count(seq.lambda.data.begin(), seq.lambda.data.end(), M(0)), 4 * d.B * d.H);
        }
        for (int C : chunk_sizes) {
          SCOPED_TRACE(std::string(cs.name) + " " + sv.name + (fixed ? " fixed λ" : " adaptive λ") + " C=" +
                       std::to_string(C));
          GkaOutputs<M> chk;
          ttr::gka_chunk<ttr::ExactPolicy<M>>(in.view(), opt, in.scale(), C, chk);
          const auto check = [&](const char* name, const Tensor<M>& got, const Tensor<M>& want) {
            const double e = rel_err(got, want);
            worst = std::max(worst, e);
            EXPECT_LT(e, tol) << name;
          };
          check("o", chk.o, seq.o);
          check("ht", chk.ht, seq.ht);
          check("hkk", chk.hkk, seq.hkk);
          check("lambda", chk.lambda, seq.lambda);
          check("fro", chk.fro, seq.fro);
          // κ comes from float64 eigenvalues (relative error ~K·2^-53·κ): compared at
          // float64 level, though equal H_c up to 1e-77 almost always give equal bits.
          const double ek = rel_err(chk.kappa, seq.kappa);
          worst_kappa = std::max(worst_kappa, ek);
          EXPECT_LT(ek, 1e-12) << "kappa";
          // resid is relative to ‖scale·q‖ already: compared absolutely (for exact and
          // converged CG both are rounding noise ~1e-76, for Chebyshev ~1e-4).
          const double er = max_abs_diff(chk.resid, seq.resid);
          worst_resid = std::max(worst_resid, er);
          EXPECT_LT(er, tol) << "resid";
        }
      }
  std::cout << "[ chunk vs sequential, MPFR-256 ] max normwise relative error (o, ht, hkk, lambda, fro): " << worst
            << "; kappa: " << worst_kappa << "; resid (absolute): " << worst_resid << "\n";
}

// ------------------------------------------------------------ GKA eq. (5)

// ‖H_c‖_F by eq. (5) against the norm of H_c formed by the recurrence
// H_c = γ_c H_{c-1} + β_c k_c k_cᵀ, for every token of every chunk of a sequence whose
// chunk-initial states are the recurrence's states (nonzero: H_0 = W Wᵀ/K at the start).
TEST(GkaChunk, Eq5FrobeniusNormsMatchFormedStates) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  using P = ttr::ExactPolicy<M>;
  const Dims d{1, 40, 1, 6, 1};
  const TensorMap<double> raw = adversarial_inputs(d, 4000);
  const Bound<M> in(raw);
  const int T = static_cast<int>(d.T), K = static_cast<int>(d.K);
  const auto ks = ttr::seq(in.t.at("k"), 0, 0), gs = ttr::seq(in.t.at("g"), 0, 0), bs = ttr::seq(in.t.at("beta"), 0, 0);
  // The recurrence's states H_t (t = 0 .. T) and their norms.
  std::vector<Matrix<M>> states{Matrix<M>(K, K, M(0))};
  std::copy(in.t.at("hkk0").data.begin(), in.t.at("hkk0").data.end(), states[0].a.begin());
  for (int t = 0; t < T; ++t) {
    Matrix<M> h = states.back();
    const M gamma = exp(gs.at(t));
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < K; ++j) h(i, j) = gamma * h(i, j) + bs.at(t) * ks.row(t)[i] * ks.row(t)[j];
    states.push_back(h);
  }
  double worst = 0;
  for (int C : {1, 3, 8, 13, 40}) {
    ttr::GkaChunkScratch<M> ws;
    ttr::GkaChunkDecays<M> dec;
    for (int t0 = 0; t0 < T; t0 += C) {
      const int n = std::min(C, T - t0);
      Matrix<M> Kc(n, K, M(0));
      std::vector<M> g(n), beta(n), fro;
      for (int c = 0; c < n; ++c) {
        for (int i = 0; i < K; ++i) Kc(c, i) = ks.row(t0 + c)[i];
        g[c] = gs.at(t0 + c);
        beta[c] = bs.at(t0 + c);
      }
      ttr::gka_chunk_decays(g, &beta, n, dec);
      ttr::gka_chunk_fro_norms<P>(states[t0], Kc, dec, ws, fro);
      for (int c = 0; c < n; ++c) {
        const Matrix<M>& h = states[t0 + c + 1];
        const M direct = sqrt(ttr::dot(h.a.data(), h.a.data(), K * K));
        const double e = M(abs(fro[c] - direct) / direct).convert_to<double>();
        worst = std::max(worst, e);
        EXPECT_LT(e, 1e-60) << "C=" << C << " token " << t0 + c;
      }
    }
  }
  std::cout << "[ eq. (5) vs formed H_c, MPFR-256 ] max relative error of ‖H_c‖_F: " << worst << "\n";
}

// ------------------------------------------------------------ arithmetic policies

template <class P>
GkaOutputs<typename P::acc> run_policy(const TensorMap<double>& raw, const GkaOptions& opt, int C) {
  const Bound<typename P::acc> in(raw);
  GkaOutputs<typename P::acc> out;
  ttr::gka_chunk<P>(in.view(), opt, in.scale(), C, out);
  return out;
}

// The chunk form under the fp64, fp32, fp16-operand and bf16-operand policies against
// the MPFR-256 sequential oracle (Chebyshev, 30 steps, as GKA runs it: the truncation
// error is the oracle's too, so only rounding is measured), at a = 0.1 (κ ≤ 11, well
// conditioned) and at GKA's default a = 0.02 (κ ≤ 51).
//
// Error model for o (normwise relative, first order). u = unit roundoff of the storage
// format: 2^-8 (bf16), 2^-11 (fp16), 2^-24 (fp32), 2^-53 (fp64); u32 = 2^-24.
//  * Rounding H_c by u relative (the 16-bit state H_[t], keys and decayed keys, the
//    operands of eq. (5) through λ) or scale·q moves x by ≤ κ·u, κ ≤ (a+1)/a (eq. (4)):
//    the bound is reached only where the errors line up with the extreme eigenvectors,
//    so these sources together stay ≈ κ_max·u. Rounding the iterate Ξ is not amplified:
//    it enters as H δξ and the solve applies (H + λI)⁻¹H, of norm ≤ 1.
//  * Rounding v and o: ≈ 2u.
//  * fp32 accumulation of the K- and C-term products and fp32 exp/log of the gates:
//    ≲ (K + C)·u32.
// Bound: (κ_max + 2)·u + (K + C)·u32. a = 0.1: bf16 5.1e-2, fp32 2.7e-6; a = 0.02:
// bf16 0.21, fp32 5.1e-6. Observed over 10 seeds: ≤ 1.4u (bf16) and ≤ 6u (fp32) at
// a = 0.1, ≤ 15u and ≤ 24u at a = 0.02. For the final state ht (sums of decayed k vᵀ, no
// solve): 4u + T·u32. Every error must be nonzero (the policy rounds what it should)
// and they must order as their u: fp64 < fp32 < fp16 < bf16.
TEST(GkaChunk, LowPrecisionPoliciesRound) {
  PrecisionGuard guard;
  ASSERT_GE(ttr::precision_control<M>::set_bits(256), 256u);
  const Dims d{1, 64, 2, 16, 16};
  const int C = 16;
  const TensorMap<double> raw = random_inputs(d, 5000, {});
  const Bound<M> in(raw);
  const double u32 = 0x1p-24, ubf = 0x1p-8, u16 = 0x1p-11, u64 = 0x1p-53;
  for (double a : {0.1, 0.02}) {
    SCOPED_TRACE(a);
    GkaOptions opt = options(GkaSolver::chebyshev, 30, false);
    opt.a = a;
    GkaOutputs<M> oracle;
    ttr::gka_sequential(in.view(), opt, in.scale(), oracle);
    const auto o64 = run_policy<ttr::ExactPolicy<double>>(raw, opt, C);
    const auto o32 = run_policy<ttr::ExactPolicy<float>>(raw, opt, C);
    const auto o16 = run_policy<ttr::Mixed16Policy<ttr::FP16Format>>(raw, opt, C);
    const auto obf = run_policy<ttr::Mixed16Policy<ttr::BF16Format>>(raw, opt, C);
    const double e64 = rel_err(to_mp(o64.o), oracle.o), e32 = rel_err(to_mp(o32.o), oracle.o),
                 e16 = rel_err(to_mp(o16.o), oracle.o), ebf = rel_err(to_mp(obf.o), oracle.o);
    const double s32 = rel_err(to_mp(o32.ht), oracle.ht), sbf = rel_err(to_mp(obf.ht), oracle.ht);
    std::cout << "[ policies vs MPFR oracle, a = " << a << " ] normwise relative error of o: fp64 " << e64
              << ", fp32 " << e32 << " (" << e32 / u32 << "u), fp16 " << e16 << " (" << e16 / u16 << "u), bf16 "
              << ebf << " (" << ebf / ubf << "u); of ht: fp32 " << s32 << ", bf16 " << sbf << "\n";
    const double kappa_max = (a + 1) / a;
    const auto bound = [&](double u) { return (kappa_max + 2) * u + static_cast<double>(d.K + C) * u32; };
    EXPECT_GT(e64, 0.0);
    EXPECT_LT(e64, (kappa_max + 2 + static_cast<double>(d.K + C)) * u64);
    EXPECT_GT(e32, 0.0);
    EXPECT_LT(e32, bound(u32));
    EXPECT_GT(e16, 0.0);
    EXPECT_LT(e16, bound(u16));
    EXPECT_GT(ebf, 0.0);
    EXPECT_LT(ebf, bound(ubf));
    EXPECT_LT(e64, e32);
    EXPECT_LT(e32, e16);
    EXPECT_LT(e16, ebf);
    EXPECT_GT(s32, 0.0);
    EXPECT_LT(s32, 4 * u32 + static_cast<double>(d.T) * u32);
    EXPECT_GT(sbf, s32);
    EXPECT_LT(sbf, 4 * ubf + static_cast<double>(d.T) * u32);
    EXPECT_NE(o32.o.data, obf.o.data);  // the two policies compute different things
    // The 16-bit policies store o in their format, and round intermediates, not only the
    // inputs: their o is ≳ u away from the exact result on the rounded inputs (measured
    // ≈ 1u at a = 0.1), where rounding only q, k and v would leave it ≲ (K + C)·u32 away.
    for (float e : obf.o.data) EXPECT_EQ(e, ttr::round_float_to_bf16(e));
    for (float e : o16.o.data) EXPECT_EQ(e, static_cast<float>(ttr::FP16Format::round(e)));
    TensorMap<double> rounded = raw;
    for (const char* name : {"q", "k", "v"})
      for (double& e : rounded[name].data) e = ttr::BF16Format::round(e);
    const Bound<M> in_bf(rounded);
    GkaOutputs<M> oracle_bf;
    ttr::gka_sequential(in_bf.view(), opt, in_bf.scale(), oracle_bf);
    const double ebf_intermediates = rel_err(to_mp(obf.o), oracle_bf.o);
    std::cout << "  bf16 o vs the exact result on bf16-rounded q, k, v: " << ebf_intermediates << " ("
              << ebf_intermediates / ubf << "u)\n";
    EXPECT_GT(ebf_intermediates, 0.1 * ubf);
  }
}

TEST(GkaChunk, RejectsChunkSizeBelowOne) {
  const Bound<double> in(random_inputs({1, 4, 1, 2, 2}, 6000, {}));
  GkaOutputs<double> out;
  EXPECT_THROW(ttr::gka_chunk<ttr::ExactPolicy<double>>(in.view(), GkaOptions{}, in.scale(), 0, out),
               std::invalid_argument);
}

// Any T ≥ 1 and C ≥ 1 (C = 1, C ≥ T, C not dividing T), any solver and λ mode, with and
// without the optional inputs: in fp64 the chunk form agrees with the sequential one to
// rounding (κ ≤ 51 and 30 stable steps: ≲ 1e-12 normwise, bounded by 1e-10).
RC_GTEST_PROP(GkaChunk, Fp64AgreesWithSequentialForAnyShape, ()) {
  const auto T = *rc::gen::inRange<std::int64_t>(1, 30);
  const auto C = *rc::gen::inRange(1, 40);
  const auto K = *rc::gen::inRange<std::int64_t>(1, 7);
  const auto V = *rc::gen::inRange<std::int64_t>(1, 4);
  const auto solver = *rc::gen::element(GkaSolver::exact, GkaSolver::chebyshev, GkaSolver::cg);
  const bool fixed = *rc::gen::arbitrary<bool>();
  Draw w;
  w.beta = *rc::gen::arbitrary<bool>();
  w.alpha = *rc::gen::arbitrary<bool>();
  w.h0 = *rc::gen::arbitrary<bool>();
  w.hkk0 = *rc::gen::arbitrary<bool>();
  const auto seed = *rc::gen::inRange<std::uint64_t>(0, 1u << 30);
  const Bound<double> in(random_inputs({1, T, 1, K, V}, seed, w));
  const GkaOptions opt = options(solver, 12, fixed);
  GkaOutputs<double> seq, chk;
  ttr::gka_sequential(in.view(), opt, in.scale(), seq);
  ttr::gka_chunk<ttr::ExactPolicy<double>>(in.view(), opt, in.scale(), C, chk);
  for (const auto& [a, b] : {std::pair{&chk.o, &seq.o}, std::pair{&chk.ht, &seq.ht}, std::pair{&chk.hkk, &seq.hkk},
                             std::pair{&chk.fro, &seq.fro}}) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < b->data.size(); ++i) {
      num = std::max(num, std::abs(a->data[i] - b->data[i]));
      den = std::max(den, std::abs(b->data[i]));
    }
    RC_ASSERT(num <= 1e-10 * den);
  }
}

}  // namespace
