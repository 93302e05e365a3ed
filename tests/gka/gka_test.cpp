// gka (Gated KalmaNet), sequential form (reference/gka/sequential.hpp through the
// adapter oracles/layers/gka.hpp), against an independent dense computation written
// here in MPFR-512: H_t and S_t accumulated with plain loops (GKA eq. (CH)),
// λ_t = a‖H_t‖_F (eq. (4)) or a fixed λ, (H_t + λ_t I) x = scale·q_t solved by
// Gaussian elimination with partial pivoting (not the Cholesky/LU of the code under
// test), q̃_t = scale·q_t + α_t (x_t − scale·q_t) (x_t without α), o_t = S_tᵀ q̃_t, and
// x_t = 0, o_t = 0 where H_t = 0 under adaptive λ (docs/layers.md).
//
// Error model for the comparisons (layer at 256 bits, u = 2^-256 ≈ 8.6e-78;
// reference at 512 bits, negligible):
//  * H_t, S_t: sums of O(T) products of data ≤ 1 with decays ≤ 1: error ≲ T·u relative
//    to their magnitude;
//  * x_t: a backward-stable solve of a system with κ ≤ (a+1)/a (eq. (4)): relative
//    error ≲ K·κ·u ≤ 16·1001·u ≈ 1.4e-73 for a ≥ 1e-3;
//  * o_{t,j} = Σ_i S_ij q̃_i: error ≲ (K + T + Kκ)·u·Σ_i |S_ij||q̃_i| — so o is compared
//    against the scale Σ_i |S_ij||q̃_i| computed by the reference (an element that
//    cancels to ~0 is then judged by the size of its terms, not by its own size).
// Every such error is below 1e-70 of its scale; the tests use 1e-60 (10^10 margin),
// while a wrong decay, gate, λ, α, index or solver changes results by ≳ 1e-17.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/error.hpp"
#include "oracles/layers/gka.hpp"
#include "oracles/registry.hpp"
#include "reference/core/multiprecision.hpp"
#include "tests/support/vectors_fixture.hpp"
#include "tests/support/make_inputs.hpp"
#include "tests/support/mp_compare.hpp"

namespace {

using ttr::test::PrecisionGuard;
using ttr::test::uniform;
using M = ttr::mpfr_real;
using ttr::Shape;
using ttr::Tensor;
using ttr::TensorMap;
using Sets = std::vector<std::pair<std::string, std::string>>;

struct Dims {
  std::int64_t B, T, H, K, V;
};

struct InputOptions {
  bool beta = true, alpha = false, h0 = false, hkk0 = false;
  int beta_zero_prefix = 0;  // β = 0 for the first tokens of every sequence
  double gamma_lo = 0.8;     // γ ∈ (gamma_lo, 1)
};

TensorMap<double> make_inputs(const Dims& d, std::uint64_t seed, const InputOptions& o) {
  TensorMap<double> in;
  in["q"] = uniform({d.B, d.T, d.H, d.K}, seed + 1, -1, 1);
  in["k"] = uniform({d.B, d.T, d.H, d.K}, seed + 2, -1, 1);
  in["v"] = uniform({d.B, d.T, d.H, d.V}, seed + 3, -1, 1);
  Tensor<double> g = uniform({d.B, d.T, d.H}, seed + 4, o.gamma_lo, 1.0);
  for (auto& e : g.data) e = std::log(e);
  in["g"] = g;
  if (o.beta) {
    Tensor<double> b = uniform({d.B, d.T, d.H}, seed + 5, 0.05, 1.0);
    for (std::int64_t bb = 0; bb < d.B; ++bb)
      for (std::int64_t t = 0; t < o.beta_zero_prefix; ++t)
        for (std::int64_t h = 0; h < d.H; ++h) b.data[static_cast<std::size_t>((bb * d.T + t) * d.H + h)] = 0.0;
    in["beta"] = b;
  }
  if (o.alpha) in["alpha"] = uniform({d.B, d.T, d.H}, seed + 6, 0.0, 1.0);
  if (o.h0) in["h0"] = uniform({d.B, d.H, d.K, d.V}, seed + 7, -0.3, 0.3);
  if (o.hkk0) {  // M Mᵀ/K: symmetric (bit-identical (i,j) and (j,i)) and PSD
    const Tensor<double> m = uniform({d.B, d.H, d.K, d.K}, seed + 8, -0.5, 0.5);
    Tensor<double> p({d.B, d.H, d.K, d.K}, 0.0);
    for (std::int64_t blk = 0; blk < d.B * d.H; ++blk)
      for (std::int64_t i = 0; i < d.K; ++i)
        for (std::int64_t j = 0; j < d.K; ++j) {
          double s = 0;
          for (std::int64_t l = 0; l < d.K; ++l)
            s += m.data[static_cast<std::size_t>((blk * d.K + i) * d.K + l)] *
                 m.data[static_cast<std::size_t>((blk * d.K + j) * d.K + l)];
          p.data[static_cast<std::size_t>((blk * d.K + i) * d.K + j)] = s / static_cast<double>(d.K);
        }
    in["hkk0"] = p;
  }
  return in;
}

const ttr::LayerSpec& spec() { return ttr::find_layer("gka").spec; }

// The layer through its adapter, kept in MPFR (not rounded to double).
TensorMap<M> run_mpfr(const TensorMap<double>& in, const Sets& sets, unsigned bits) {
  ttr::precision_control<M>::set_bits(bits);
  TensorMap<M> tin, tout;
  for (const auto& [name, x] : in) {
    Tensor<M>& y = tin[name];
    y.shape = x.shape;
    for (double e : x.data) y.data.emplace_back(e);
  }
  ttr::layers::gka::sequential<M>(tin, ttr::Config::make(spec(), sets), ttr::FormOptions{}, tout);
  return tout;
}

// ------------------------------------------------------------ independent reference

struct Ref {
  Tensor<M> o, oscale, ht, hkk, lambda, fro;
  Tensor<M> scol;   // [B,T,H,V]: ‖S_t[:, j]‖₂
  Tensor<M> qn;     // [B,T,H]: ‖scale·q_t‖₂
};

// Solves A x = b (A n×n, row-major) by Gaussian elimination with partial pivoting.
std::vector<M> gauss_solve(std::vector<M> A, std::vector<M> b, int n) {
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (abs(A[r * n + c]) > abs(A[p * n + c])) p = r;
    for (int j = 0; j < n; ++j) std::swap(A[c * n + j], A[p * n + j]);
    std::swap(b[c], b[p]);
    for (int r = c + 1; r < n; ++r) {
      const M f = A[r * n + c] / A[c * n + c];
      for (int j = c; j < n; ++j) A[r * n + j] -= f * A[c * n + j];
      b[r] -= f * b[c];
    }
  }
  std::vector<M> x(n);
  for (int i = n - 1; i >= 0; --i) {
    M s = b[i];
    for (int j = i + 1; j < n; ++j) s -= A[i * n + j] * x[j];
    x[i] = s / A[i * n + i];
  }
  return x;
}

// Everything in the thread's current precision (the caller sets 512 bits).
// l2norm: q and k rows replaced by x/sqrt(‖x‖² + 1e-6) first (use_qk_l2norm_in_kernel;
// eps is the double nearest 1e-6, as the key's documentation and FLA use it).
Ref reference(const TensorMap<double>& in, double a, std::optional<double> fixed_lambda,
              std::optional<double> scale_opt, bool l2norm = false) {
  using std::exp;
  using std::sqrt;
  const Tensor<double>& q = in.at("q");
  const Tensor<double>& k = in.at("k");
  const Tensor<double>& v = in.at("v");
  const Tensor<double>& g = in.at("g");
  const Tensor<double>* beta = in.count("beta") ? &in.at("beta") : nullptr;
  const Tensor<double>* alpha = in.count("alpha") ? &in.at("alpha") : nullptr;
  const Tensor<double>* h0 = in.count("h0") ? &in.at("h0") : nullptr;
  const Tensor<double>* hkk0 = in.count("hkk0") ? &in.at("hkk0") : nullptr;
  const std::int64_t B = q.dim(0), T = q.dim(1), Hn = q.dim(2), K = q.dim(3), V = v.dim(3);
  const M zero(0);
  const M scale = scale_opt ? M(*scale_opt) : M(1) / sqrt(M(static_cast<double>(K)));
  Ref r;
  r.o = Tensor<M>({B, T, Hn, V}, zero);
  r.oscale = r.o;
  r.scol = r.o;
  r.ht = Tensor<M>({B, Hn, K, V}, zero);
  r.hkk = Tensor<M>({B, Hn, K, K}, zero);
  r.lambda = Tensor<M>({B, T, Hn}, zero);
  r.fro = r.lambda;
  r.qn = r.lambda;
  auto i4 = [](std::int64_t a0, std::int64_t a1, std::int64_t a2, std::int64_t a3, std::int64_t d1, std::int64_t d2,
               std::int64_t d3) { return static_cast<std::size_t>(((a0 * d1 + a1) * d2 + a2) * d3 + a3); };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hn; ++h) {
      std::vector<M> Hm(static_cast<std::size_t>(K * K), zero), S(static_cast<std::size_t>(K * V), zero);
      for (std::int64_t i = 0; i < K; ++i) {
        for (std::int64_t j = 0; j < K; ++j)
          if (hkk0) Hm[i * K + j] = M(hkk0->data[i4(b, h, i, j, Hn, K, K)]);
        for (std::int64_t j = 0; j < V; ++j)
          if (h0) S[i * V + j] = M(h0->data[i4(b, h, i, j, Hn, K, V)]);
      }
      for (std::int64_t t = 0; t < T; ++t) {
        const std::size_t bt = static_cast<std::size_t>((b * T + t) * Hn + h);
        const M gamma = exp(M(g.data[bt]));
        const M w = beta ? M(beta->data[bt]) : M(1);
        std::vector<M> kt(K), vt(V), sq(K);
        for (std::int64_t i = 0; i < K; ++i) {
          kt[i] = M(k.data[i4(b, t, h, i, T, Hn, K)]);
          sq[i] = M(q.data[i4(b, t, h, i, T, Hn, K)]);
        }
        if (l2norm)
          for (std::vector<M>* row : {&kt, &sq}) {
            M n2(0);
            for (const M& e : *row) n2 += e * e;
            const M inv = 1 / sqrt(n2 + M(1e-6));
            for (M& e : *row) e *= inv;
          }
        for (M& e : sq) e *= scale;
        for (std::int64_t j = 0; j < V; ++j) vt[j] = M(v.data[i4(b, t, h, j, T, Hn, V)]);
        for (std::int64_t i = 0; i < K; ++i) {
          for (std::int64_t j = 0; j < K; ++j) Hm[i * K + j] = gamma * Hm[i * K + j] + w * kt[i] * kt[j];
          for (std::int64_t j = 0; j < V; ++j) S[i * V + j] = gamma * S[i * V + j] + w * kt[i] * vt[j];
        }
        M f2 = zero;
        for (const M& e : Hm) f2 += e * e;
        const M fro = sqrt(f2);
        const M lam = fixed_lambda ? M(*fixed_lambda) : M(a) * fro;
        std::vector<M> x(K, zero);
        if (lam != 0) {
          std::vector<M> A = Hm;
          for (std::int64_t i = 0; i < K; ++i) A[i * K + i] += lam;
          x = gauss_solve(A, sq, static_cast<int>(K));
        }
        std::vector<M> qt(K);
        for (std::int64_t i = 0; i < K; ++i) qt[i] = alpha ? sq[i] + M(alpha->data[bt]) * (x[i] - sq[i]) : x[i];
        M qq = zero;
        for (const M& e : sq) qq += e * e;
        r.qn.data[bt] = sqrt(qq);
        r.lambda.data[bt] = lam;
        r.fro.data[bt] = fro;
        for (std::int64_t j = 0; j < V; ++j) {
          M o = zero, s = zero, c = zero;
          for (std::int64_t i = 0; i < K; ++i) {
            o += S[i * V + j] * qt[i];
            s += abs(S[i * V + j]) * abs(qt[i]);
            c += S[i * V + j] * S[i * V + j];
          }
          const std::size_t oj = i4(b, t, h, j, T, Hn, V);
          r.o.data[oj] = o;
          r.oscale.data[oj] = s;
          r.scol.data[oj] = sqrt(c);
        }
      }
      for (std::int64_t i = 0; i < K; ++i) {
        for (std::int64_t j = 0; j < K; ++j) r.hkk.data[i4(b, h, i, j, Hn, K, K)] = Hm[i * K + j];
        for (std::int64_t j = 0; j < V; ++j) r.ht.data[i4(b, h, i, j, Hn, K, V)] = S[i * V + j];
      }
    }
  return r;
}

// |got − ref| ≤ tol·scale element by element (scale 0 demands exact equality).
void expect_scaled(const Tensor<M>& got, const Tensor<M>& ref, const Tensor<M>& scale, const M& tol,
                   const std::string& what) {
  ASSERT_EQ(got.shape, ref.shape) << what;
  int bad = 0;
  for (std::size_t i = 0; i < ref.data.size(); ++i) {
    const M err = abs(got.data[i] - ref.data[i]);
    if (err > tol * scale.data[i]) {
      if (++bad <= 3)
        ADD_FAILURE() << what << "[" << i << "]: got " << got.data[i].str(25) << ", expected "
                      << ref.data[i].str(25) << " (error " << err.str(6) << ", allowed " << (tol * scale.data[i]).str(6)
                      << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of tolerance";
}

// Relative to the largest magnitude of the tensor (for final states).
void expect_normwise(const Tensor<M>& got, const Tensor<M>& ref, const M& tol, const std::string& what) {
  Tensor<M> scale = ref;
  M mx(0);
  for (const M& e : ref.data) mx = std::max(mx, M(abs(e)));
  for (auto& e : scale.data) e = mx;
  expect_scaled(got, ref, scale, tol, what);
}

// Relative element by element (positive quantities: λ, ‖H‖_F).
void expect_relative(const Tensor<M>& got, const Tensor<M>& ref, const M& tol, const std::string& what) {
  Tensor<M> scale = ref;
  for (auto& e : scale.data) e = abs(e);
  expect_scaled(got, ref, scale, tol, what);
}

struct Case {
  std::string name;
  TensorMap<double> in;
  Sets sets;
  double a = 0.02;
  std::optional<double> lambda, scale;
  bool l2norm = false;
};

std::vector<Case> exact_cases() {
  std::vector<Case> cs;
  const Dims d{2, 9, 2, 5, 3};
  cs.push_back({"beta", make_inputs(d, 100, {}), {}, 0.02, {}, {}});
  InputOptions all;
  all.alpha = all.h0 = all.hkk0 = true;
  cs.push_back({"alpha_h0_hkk0", make_inputs(d, 200, all), {}, 0.02, {}, {}});
  InputOptions nobeta;
  nobeta.beta = false;
  nobeta.alpha = true;
  cs.push_back({"no_beta_alpha", make_inputs(d, 300, nobeta), {}, 0.02, {}, {}});
  cs.push_back({"fixed_lambda", make_inputs(d, 400, all), {{"lambda", "0.3"}}, 0.02, 0.3, {}});
  cs.push_back({"small_a_scale", make_inputs({1, 12, 1, 8, 4}, 500, all), {{"a", "0.001"}, {"scale", "0.7"}}, 0.001,
                {}, 0.7});
  cs.push_back({"l2norm", make_inputs(d, 600, all), {{"use_qk_l2norm_in_kernel", "true"}}, 0.02, {}, {}, true});
  // H_t = 0 for the first tokens while S_t = γ h0 ≠ 0: x_t = 0 by convention, and the
  // formula gives q̃_t = (1 − α_t)·scale·q_t, o_t = S_tᵀ q̃_t (nonzero; o_t = 0 needs h0 = 0).
  InputOptions zero_h = all;
  zero_h.hkk0 = false;
  zero_h.beta_zero_prefix = 2;
  cs.push_back({"h0_with_zero_H", make_inputs(d, 700, zero_h), {}, 0.02, {}, {}});
  for (const char* c : {"basic", "with_state"}) {
    ttr::test::CaseInputs ci = ttr::test::case_inputs("gka", "tiny", c);
    cs.push_back({std::string("tiny/") + c, ci.tensors, {}, 0.02, {}, {}});
  }
  return cs;
}

// ------------------------------------------------------------ tests

TEST(Gka, ExactSolverMatchesIndependentDenseSolve) {
  PrecisionGuard guard;
  for (Case& c : exact_cases()) {
    SCOPED_TRACE(c.name);
    Sets sets = c.sets;
    sets.push_back({"solver", "exact"});
    const TensorMap<M> got = run_mpfr(c.in, sets, 256);
    ASSERT_GE(ttr::precision_control<M>::set_bits(512), 512u);
    const Ref ref = reference(c.in, c.a, c.lambda, c.scale, c.l2norm);
    const M tol(1e-60);
    expect_scaled(got.at("o"), ref.o, ref.oscale, tol, "o");
    expect_normwise(got.at("ht"), ref.ht, tol, "ht");
    expect_normwise(got.at("hkk"), ref.hkk, tol, "hkk");
    expect_relative(got.at("lambda"), ref.lambda, tol, "lambda");
    expect_relative(got.at("fro"), ref.fro, tol, "fro");
    // Residual of a backward-stable solve at 256 bits: ≲ K·u·κ ≤ 16·8.6e-78·1001 ≈ 1.4e-73.
    for (std::size_t i = 0; i < ref.lambda.data.size(); ++i)
      if (ref.lambda.data[i] != 0) {
        EXPECT_LT(got.at("resid").data[i], M(1e-70)) << "token " << i;
      }
  }
}

// Chebyshev with r iterations: L = ‖H‖_F + λ and μ = λ enclose the spectrum of
// H + λI (eq. (4)), so the relative residual is at most the degree-(r+1) minimax
// value 2R^{r+1}/(1 + R^{2(r+1)}), R = (√κ−1)/(√κ+1), κ = (a+1)/a (computed here,
// not by chebyshev_minimax_bound). Then ‖x − x*‖ ≤ ‖(H+λI)⁻¹‖·‖res‖ ≤ bound·‖sq‖/λ and
// |o_j − o*_j| ≤ ‖S[:, j]‖·bound·‖sq‖/λ (α absent). Rounding at 256 bits is ≲ 1e-70 of
// the scales and is allowed for separately.
TEST(Gka, ChebyshevResidualWithinMinimaxBound) {
  PrecisionGuard guard;
  using std::pow;
  using std::sqrt;
  const TensorMap<double> in = make_inputs({1, 14, 2, 6, 3}, 600, {});
  for (int iters : {0, 1, 4, 10, 30}) {
    SCOPED_TRACE(iters);
    const TensorMap<M> got = run_mpfr(in, {{"solver", "chebyshev"}, {"iters", std::to_string(iters)}}, 256);
    ASSERT_GE(ttr::precision_control<M>::set_bits(512), 512u);
    const Ref ref = reference(in, 0.02, {}, {});
    const M kappa = M(1.02) / M(0.02);
    const M R = (sqrt(kappa) - 1) / (sqrt(kappa) + 1);
    const M Rd = pow(R, iters + 1);
    const M bound = 2 * Rd / (1 + Rd * Rd);
    const Tensor<M>& resid = got.at("resid");
    for (std::size_t i = 0; i < resid.data.size(); ++i)
      EXPECT_LE(resid.data[i], bound * (1 + M(1e-60))) << "token " << i;
    Tensor<M> allowed = ref.o;
    const std::int64_t V = ref.o.dim(3);
    for (std::size_t e = 0; e < allowed.data.size(); ++e) {
      const std::size_t bt = e / static_cast<std::size_t>(V);
      allowed.data[e] = ref.scol.data[e] * bound * ref.qn.data[bt] / ref.lambda.data[bt] + M(1e-60) * ref.oscale.data[e];
    }
    expect_scaled(got.at("o"), ref.o, allowed, M(1), "o (chebyshev vs exact)");
  }
}

// Enough iterations to reach the exact answer to 1e-40: with a = 0.1 (κ ≤ 11,
// R ≈ 0.537) the bound above at r = 200 is 2·R^201 ≈ 1e-54, times ‖sq‖/λ ≤ 11‖x‖
// relative to the size of x: far below 1e-40 of Σ|S||x| on these data.
TEST(Gka, ChebyshevManyItersMatchesExact) {
  PrecisionGuard guard;
  InputOptions o;
  o.alpha = o.h0 = true;
  const TensorMap<double> in = make_inputs({1, 10, 2, 6, 3}, 700, o);
  const TensorMap<M> got = run_mpfr(in, {{"solver", "chebyshev"}, {"iters", "200"}, {"a", "0.1"}}, 256);
  ASSERT_GE(ttr::precision_control<M>::set_bits(512), 512u);
  const Ref ref = reference(in, 0.1, {}, {});
  expect_scaled(got.at("o"), ref.o, ref.oscale, M(1e-40), "o");
  for (const M& r : got.at("resid").data) EXPECT_LT(r, M(1e-50));
}

// CG from 0 with K iterations terminates (exact arithmetic) at the solution: the
// Krylov space of H + λI has dimension ≤ K. At 256 bits the K-step result is exact to
// ≲ K·κ^2·u ≈ 1e-72 (loss of orthogonality bounded by κ for κ ≤ 51); allow 1e-50.
TEST(Gka, CgKItersMatchesExact) {
  PrecisionGuard guard;
  InputOptions o;
  o.alpha = o.hkk0 = true;
  const TensorMap<double> in = make_inputs({1, 10, 2, 8, 3}, 800, o);
  const TensorMap<M> got = run_mpfr(in, {{"solver", "cg"}, {"iters", "8"}}, 256);
  ASSERT_GE(ttr::precision_control<M>::set_bits(512), 512u);
  const Ref ref = reference(in, 0.02, {}, {});
  expect_scaled(got.at("o"), ref.o, ref.oscale, M(1e-50), "o");
  for (const M& r : got.at("resid").data) EXPECT_LT(r, M(1e-50));
}

// Where H_t = 0 (every β = 0 so far, no hkk0) the adaptive λ_t is 0: the spec gives
// x_t = 0 and o_t = 0 exactly (S_t = 0 too), λ = ‖H‖_F = 0, kappa = 1 and
// resid = ‖0 − q‖/‖q‖ = 1. Checked in float64 and MPFR, for every solver.
TEST(Gka, ZeroHGivesExactlyZeroOutput) {
  PrecisionGuard guard;
  InputOptions o;
  o.alpha = true;
  o.beta_zero_prefix = 3;
  const Dims d{2, 7, 2, 4, 3};
  const TensorMap<double> in = make_inputs(d, 900, o);
  for (const char* solver : {"exact", "chebyshev", "cg"}) {
    SCOPED_TRACE(solver);
    const Sets sets = {{"solver", solver}};
    for (ttr::Tier tier : {ttr::Tier::fp64, ttr::Tier::mpfr}) {
      const ttr::LayerResult r = ttr::run_layer(ttr::find_layer("gka"), ttr::Form::sequential, {tier, 256}, in,
                                                ttr::Config::make(spec(), sets));
      const auto& out = r.values.at("o");
      for (std::int64_t b = 0; b < d.B; ++b)
        for (std::int64_t t = 0; t < d.T; ++t)
          for (std::int64_t h = 0; h < d.H; ++h) {
            const std::size_t bt = static_cast<std::size_t>((b * d.T + t) * d.H + h);
            double mx = 0;
            for (std::int64_t j = 0; j < d.V; ++j) mx = std::max(mx, std::abs(out.data[bt * d.V + j]));
            if (t < o.beta_zero_prefix) {
              EXPECT_EQ(mx, 0.0) << "o not exactly 0 at t = " << t;
              EXPECT_EQ(r.values.at("lambda").data[bt], 0.0);
              EXPECT_EQ(r.values.at("fro").data[bt], 0.0);
              EXPECT_EQ(r.values.at("kappa").data[bt], 1.0);
              EXPECT_EQ(r.values.at("resid").data[bt], 1.0);
            } else {
              EXPECT_GT(mx, 0.0) << "t = " << t;
              EXPECT_TRUE(std::isfinite(mx));
            }
          }
    }
  }
}

// GKA eq. (4): κ_t = (λmax(H) + λ)/(λmin(H) + λ) ≤ (‖H‖_F + λ)/λ = (a+1)/a. The
// diagnostic takes the extreme eigenvalues of H_t in float64 (Eigen's symmetric
// solver, backward stable): each carries an absolute error δ ≲ K·u·‖H_t‖_F
// (u = 2^-53; the tier's own H_t differs from the exact one by a similar amount).
// Then κ ≤ (‖H‖_F + λ + δ)/(λ − δ) ≈ (a+1)/a·(1 + δ/(‖H‖_F+λ) + δ/λ) and
// δ/λ = K·u/a ≤ K·u·(a+1)/a, so the allowance (a+1)/a·(1 + 4·K·u·(a+1)/a) covers
// both terms with a factor ≥ 2 to spare.
TEST(Gka, KappaWithinEq4BoundOnStressInputs) {
  const double u = 0x1.0p-53;
  for (const char* name : {"near_duplicate_keys", "decay_beta_edges", "small_a_collinear", "key_norms"}) {
    const ttr::test::CaseInputs ci = ttr::test::case_inputs("gka", "stress", name);
    const std::int64_t K = ci.tensors.at("q").dim(3);
    for (const auto& [a, a_text] : {std::pair<double, const char*>{0.02, "0.02"}, {1e-3, "0.001"}}) {
      SCOPED_TRACE(testing::Message() << name << ", a = " << a);
      const double ka = (a + 1) / a;
      const double allowed = ka * (1 + 4 * static_cast<double>(K) * u * ka);
      const ttr::LayerResult r =
          ttr::run_layer(ttr::find_layer("gka"), ttr::Form::sequential, {ttr::Tier::fp64, 53}, ci.tensors,
                         ttr::Config::make(spec(), {{"a", a_text}}));
      int bad = 0;
      double worst = 0;
      for (double kappa : r.values.at("kappa").data) {
        worst = std::max(worst, kappa);
        if (!(kappa >= 1.0 && kappa <= allowed)) ++bad;
      }
      EXPECT_EQ(bad, 0) << "largest kappa " << worst << " > " << allowed;
    }
  }
}

// The same bound in MPFR-256 (H_t accurate to ~1e-75, then rounded to double for the
// eigenvalues: the same δ as above) on the edge case with decays exactly 1 and 1e-30
// and β exactly 0 and 1, at a = 1e-3.
TEST(Gka, KappaWithinEq4BoundMpfr) {
  PrecisionGuard guard;
  const double u = 0x1.0p-53, a = 1e-3, ka = (a + 1) / a;
  const ttr::test::CaseInputs ci = ttr::test::case_inputs("gka", "stress", "decay_beta_edges");
  const double allowed = ka * (1 + 4 * 16.0 * u * ka);
  ASSERT_EQ(ci.tensors.at("q").dim(3), 16);
  const ttr::LayerResult r = ttr::run_layer(ttr::find_layer("gka"), ttr::Form::sequential, {ttr::Tier::mpfr, 256},
                                            ci.tensors, ttr::Config::make(spec(), {{"a", "0.001"}}));
  double worst = 0;
  for (double kappa : r.values.at("kappa").data) {
    worst = std::max(worst, kappa);
    EXPECT_GE(kappa, 1.0);
    EXPECT_LE(kappa, allowed);
  }
  EXPECT_GT(worst, 1.0);  // not vacuous: some H_t is nonzero
}

// Config::make rejects every out-of-range value with an InputError naming the key.
TEST(GkaConfig, BadValuesNameTheKey) {
  const std::vector<std::pair<Sets, std::string>> bad = {
      {{{"a", "0"}}, "'a'"},           {{{"a", "-0.5"}}, "'a'"},       {{{"solver", "foo"}}, "'solver'"},
      {{{"iters", "-1"}}, "'iters'"},  {{{"iters", "2.5"}}, "'iters'"}, {{{"lambda", "0"}}, "'lambda'"},
      {{{"lambda", "-1"}}, "'lambda'"}, {{{"omega0", "3"}}, "'omega0'"}, {{{"bogus", "1"}}, "'bogus'"},
  };
  for (const auto& [sets, key] : bad) {
    SCOPED_TRACE(sets.front().first + "=" + sets.front().second);
    try {
      (void)ttr::Config::make(spec(), sets);
      ADD_FAILURE() << "accepted";
    } catch (const ttr::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  // The boundary values that are valid.
  EXPECT_NO_THROW((void)ttr::Config::make(spec(), {{"iters", "0"}, {"omega0", "0"}, {"a", "1e-9"}}));
}

// 256 and 512 bits agree to ≥ 70 significant digits (normwise per tensor) on the
// tiny suite: every output's rounding error at 256 bits is ≲ (T + K·κ)·u ≈ 1e-74
// of its magnitude (see the header). resid is itself a rounding-level quantity for
// the exact solver (≲ 1e-73 at both precisions), and kappa comes from float64
// eigenvalues of H_t rounded to double (identical at both precisions except when an
// entry of H_t sits at a rounding boundary: then ≲ 2·K·u·κ ≈ 2e-12 relative).
TEST(GkaPrecision, Mpfr256And512Agree) {
  PrecisionGuard guard;
  for (const char* c : {"basic", "with_state"}) {
    SCOPED_TRACE(c);
    const ttr::test::CaseInputs ci = ttr::test::case_inputs("gka", "tiny", c);
    const TensorMap<M> lo = run_mpfr(ci.tensors, {}, 256);
    const TensorMap<M> hi = run_mpfr(ci.tensors, {}, 512);
    for (const char* name : {"o", "ht", "hkk", "lambda", "fro"}) expect_normwise(lo.at(name), hi.at(name), M(1e-70), name);
    for (std::size_t i = 0; i < hi.at("resid").data.size(); ++i) {
      if (hi.at("lambda").data[i] == 0) continue;
      EXPECT_LT(lo.at("resid").data[i], M(1e-70));
      EXPECT_LT(hi.at("resid").data[i], M(1e-70));
    }
    expect_relative(lo.at("kappa"), hi.at("kappa"), M(1e-10), "kappa");
  }
}

// Decays of 1e-30 (the stress suite's own edge value, g = log 1e-30) with β = 0 shrink
// H_t and S_t together below float64's range while MPFR carries them: after one write
// H_t = c_t·k kᵀ and S_t = c_t·k vᵀ with c_t = Π γ, λ_t = a·c_t‖k‖², so x_t scales like
// 1/c_t and o_t = S_tᵀ x_t does not depend on c_t at all (GKA's output is invariant
// under a common scaling of H and S). The MPFR oracle must therefore give the same
// finite o_t (checked against the reference at 512 bits) and a finite kappa within
// eq. (4) — for a rank-one H, κ_t = (‖H‖_F + λ_t)/λ_t = (a+1)/a exactly — at every
// token, also where c_t is below double's smallest normal (2.2e-308) or subnormal
// (4.9e-324) number. The float64 eigenvalue allowance is the one derived above.
TEST(Gka, TinyDecayedStateKeepsFiniteDiagnosticsMpfr) {
  PrecisionGuard guard;
  const Dims d{1, 16, 1, 4, 3};
  InputOptions o;
  TensorMap<double> in = make_inputs(d, 1000, o);
  // token 0: write (β = 1, γ = 1); tokens 1-10: γ = 1e-30 (c = 1e-300); 11, 12: γ = 1e-6
  // (c = 1e-306, 1e-312: subnormal in double); 13: γ = 1e-30 (c = 1e-342: below double);
  // 14: a new write on top (β = 1, γ = 1); 15: γ = 1e-30 again.
  const double g_tiny = std::log(1e-30), g_small = std::log(1e-6);
  for (std::int64_t t = 0; t < d.T; ++t) {
    const bool write = t == 0 || t == 14;
    in["beta"].data[t] = write ? 1.0 : 0.0;
    in["g"].data[t] = write ? 0.0 : (t == 11 || t == 12) ? g_small : g_tiny;
  }
  const TensorMap<M> got = run_mpfr(in, {{"solver", "exact"}}, 256);
  const double a = 0.02, ka = (a + 1) / a, allowed = ka * (1 + 4 * 4.0 * 0x1.0p-53 * ka);
  for (std::int64_t t = 0; t < d.T; ++t) {
    const double kappa = ttr::to_double(got.at("kappa").data[t]);
    EXPECT_TRUE(std::isfinite(kappa) && kappa >= 1.0 && kappa <= allowed)
        << "t = " << t << ": kappa = " << kappa << ", ‖H_t‖_F = " << got.at("fro").data[t].str(6);
  }
  ASSERT_GE(ttr::precision_control<M>::set_bits(512), 512u);
  const Ref ref = reference(in, a, {}, {});
  expect_scaled(got.at("o"), ref.o, ref.oscale, M(1e-60), "o");
}

}  // namespace
