// kla_kalman (KLA-K), sequential information form (reference/kla_kalman/sequential.hpp
// through the adapter oracles/layers/kla_kalman.hpp) against:
//  * the moment form of KLA-K Cor. 2.2, eq. (20) (reference/kla_kalman/moment.hpp), a
//    second formulation that never forms η;
//  * KLA-K Thm 3's convolution form, implemented here from the paper (MPFR-512) for
//    p̄ = 0 and time-invariant ā and k;
//  * the bound Λ_t ≤ 1/p̄ + φ_t derived below from eq. (18);
//  * itself at 512 bits (precision agreement).
//
// Error model. At 256 bits (u = 2^-256 ≈ 8.6e-78) every per-slot recursion step
// (eq. (18)/(19)) is a handful of roundings, and both recursions are stable (each step
// multiplies the previous relative error by a factor ≤ 1 — the Möbius map has
// derivative ρ_t²·ā² ≤ 1 in relative terms — and adds a few u), so after T tokens
// Λ_t, η_t and μ_t = η_t/Λ_t carry relative error ≲ 4·T·u ≈ 1e-74 for T ≤ 40.
// Outputs are Σ_n of N ≤ 4 such terms; comparing them element by element with
// relative tolerance 1e-60 leaves a margin of 10^14, which only an element whose
// terms cancel by 14 digits could exhaust (these deterministic random data do not).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "oracles/config.hpp"
#include "oracles/layers/kla_kalman.hpp"
#include "oracles/registry.hpp"
#include "reference/core/multiprecision.hpp"
#include "reference/kla_kalman/moment.hpp"
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
  std::int64_t B, T, H, N, D;
};

struct Opts {
  double p_lo = 0.01, p_hi = 0.5;  // p̄ range; p_hi = 0: p̄ = 0
  double a_lo = 0.5;               // ā ∈ (a_lo, 1]
  bool init = false;               // lambda_init, eta_init present
  bool k_time_invariant = false;   // k[b, t, h, n] = k[b, 0, h, n]
  bool lv_time_invariant = false;  // λv[b, t, h, d] = λv[b, 0, h, d]
};

TensorMap<double> make_inputs(const Dims& d, std::uint64_t seed, const Opts& o) {
  TensorMap<double> in;
  in["q"] = uniform({d.B, d.T, d.H, d.N}, seed + 1, -1, 1);
  in["k"] = uniform({d.B, d.T, d.H, d.N}, seed + 2, -1, 1);
  in["v"] = uniform({d.B, d.T, d.H, d.D}, seed + 3, -1, 1);
  in["lambda_v"] = uniform({d.B, d.T, d.H, d.D}, seed + 4, 0.2, 3.0);
  in["a_bar"] = uniform({d.H, d.N, d.D}, seed + 5, o.a_lo, 1.0);
  in["p_bar"] = o.p_hi > 0 ? uniform({d.H, d.N, d.D}, seed + 6, o.p_lo, o.p_hi) : Tensor<double>({d.H, d.N, d.D}, 0.0);
  if (o.init) {
    in["lambda_init"] = uniform({d.B, d.H, d.N, d.D}, seed + 7, 0.1, 5.0);
    in["eta_init"] = uniform({d.B, d.H, d.N, d.D}, seed + 8, -2.0, 2.0);
  }
  auto freeze = [&](Tensor<double>& x) {  // copy token 0 to every token
    const std::int64_t F = x.shape[3];
    for (std::int64_t b = 0; b < d.B; ++b)
      for (std::int64_t t = 1; t < d.T; ++t)
        for (std::int64_t h = 0; h < d.H; ++h)
          for (std::int64_t f = 0; f < F; ++f)
            x.data[static_cast<std::size_t>(((b * d.T + t) * d.H + h) * F + f)] =
                x.data[static_cast<std::size_t>(((b * d.T + 0) * d.H + h) * F + f)];
  };
  if (o.k_time_invariant) freeze(in["k"]);
  if (o.lv_time_invariant) freeze(in["lambda_v"]);
  return in;
}

const ttr::LayerSpec& spec() { return ttr::find_layer("kla_kalman").spec; }

TensorMap<M> to_mpfr(const TensorMap<double>& in) {  // exact, at the current precision
  TensorMap<M> out;
  for (const auto& [name, x] : in) {
    Tensor<M>& y = out[name];
    y.shape = x.shape;
    for (double e : x.data) y.data.emplace_back(e);
  }
  return out;
}

TensorMap<M> run_layer_mpfr(const TensorMap<double>& in, const Sets& sets, unsigned bits) {
  ttr::precision_control<M>::set_bits(bits);
  const TensorMap<M> tin = to_mpfr(in);
  TensorMap<M> out;
  ttr::layers::kla_kalman::sequential<M>(tin, ttr::Config::make(spec(), sets), ttr::FormOptions{}, out);
  return out;
}

TensorMap<M> run_moment_mpfr(const TensorMap<double>& in, double lambda0, double scale, unsigned bits) {
  ttr::precision_control<M>::set_bits(bits);
  const TensorMap<M> t = to_mpfr(in);
  auto opt = [&](const char* n) { return t.count(n) ? &t.at(n) : nullptr; };
  const ttr::KlaInputs<M> ki{t.at("q"),     t.at("k"),     t.at("v"),         t.at("lambda_v"),
                             t.at("a_bar"), t.at("p_bar"), opt("lambda_init"), opt("eta_init")};
  ttr::KlaOutputs<M> r;
  ttr::kla_kalman_moment(ki, M(lambda0), M(scale), r);
  return {{"o", r.o}, {"o_var", r.o_var}, {"lambda_T", r.lambda_T}, {"eta_T", r.eta_T}};
}

void expect_rel(const Tensor<M>& got, const Tensor<M>& ref, const M& tol, const std::string& what) {
  ASSERT_EQ(got.shape, ref.shape) << what;
  int bad = 0;
  for (std::size_t i = 0; i < ref.data.size(); ++i) {
    const M err = abs(got.data[i] - ref.data[i]);
    if (!(err <= tol * abs(ref.data[i]))) {
      if (++bad <= 3)
        ADD_FAILURE() << what << "[" << i << "]: got " << got.data[i].str(25) << ", expected " << ref.data[i].str(25)
                      << " (relative error " << M(err / abs(ref.data[i])).str(4) << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

void expect_normwise(const Tensor<M>& got, const Tensor<M>& ref, const M& tol, const std::string& what) {
  ASSERT_EQ(got.shape, ref.shape) << what;
  M mx(0), err(0);
  for (std::size_t i = 0; i < ref.data.size(); ++i) {
    mx = std::max(mx, M(abs(ref.data[i])));
    err = std::max(err, M(abs(got.data[i] - ref.data[i])));
  }
  EXPECT_LE(err, tol * mx) << what << ": max error " << err.str(6) << " vs max " << mx.str(6);
}

// ------------------------------------------------------------ information vs moment form

TEST(KlaKalman, InformationFormEqualsMomentForm) {
  PrecisionGuard guard;
  const Dims d{2, 40, 2, 3, 4};
  struct C {
    const char* name;
    Opts o;
    Sets sets;
    double lambda0, scale;
  };
  Opts zero_noise;
  zero_noise.p_hi = 0;
  Opts init;
  init.init = true;
  Opts zero_init = zero_noise;
  zero_init.init = true;
  const std::vector<C> cases = {{"p>0", {}, {}, 1.0, 1.0},
                                {"p>0 init scale lambda0", init, {{"scale", "0.375"}, {"lambda0", "2.5"}}, 2.5, 0.375},
                                {"p=0", zero_noise, {}, 1.0, 1.0},
                                {"p=0 init", zero_init, {{"lambda0", "0.125"}}, 0.125, 1.0}};
  for (const C& c : cases) {
    SCOPED_TRACE(c.name);
    const TensorMap<double> in = make_inputs(d, 10, c.o);
    const TensorMap<M> info = run_layer_mpfr(in, c.sets, 256);
    const TensorMap<M> mom = run_moment_mpfr(in, c.lambda0, c.scale, 256);
    for (const char* n : {"o", "o_var", "lambda_T", "eta_T"}) expect_rel(info.at(n), mom.at(n), M(1e-60), n);
  }
}

// ------------------------------------------------------------ KLA-K Thm 3

// KLA-K Thm 3 (and its proof, App. D): with p̄ = 0 eq. (18) reads Λ_t = ā^{-2}Λ_{t-1} + φ_t
// and eq. (19) has f_t = ā/ā² = ā^{-1}, so for time-invariant ā and k they unroll into
// convolutions with kernels ā^{-2m}k² and ā^{-m}k:
//     Λ_t = ā^{-2t} Λ_0 + k² Σ_{s=1}^{t} ā^{-2(t-s)} λv_s,
//     η_t = ā^{-t}  η_0 + k  Σ_{s=1}^{t} ā^{-(t-s)}  λv_s v_s,      μ_t = η_t / Λ_t
// (tokens numbered from 1; the paper's statement sums from s = 0 with Λ_0 = η_0 = 0 and
// its proof keeps the ā^{-2t}λ_0 term: here Λ_0 = lambda0 or lambda_init > 0 and
// η_0 = 0 or eta_init, so the initial terms are kept). The sums are evaluated directly,
// O(T²) terms per slot, with ā^{-m} from MPFR's pow at 512 bits; then
// o_{t,d} = scale Σ_n q_{t,n} μ_{t,n,d} and o_var_{t,d} = scale² Σ_n q_{t,n}²/Λ_{t,n,d}.
TensorMap<M> thm3_convolution(const TensorMap<double>& in, double lambda0, double scale_d) {
  using std::pow;
  const Tensor<double>& q = in.at("q");
  const Tensor<double>& k = in.at("k");
  const Tensor<double>& v = in.at("v");
  const Tensor<double>& lv = in.at("lambda_v");
  const Tensor<double>& abar = in.at("a_bar");
  const Tensor<double>* l0 = in.count("lambda_init") ? &in.at("lambda_init") : nullptr;
  const Tensor<double>* e0 = in.count("eta_init") ? &in.at("eta_init") : nullptr;
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), N = q.dim(3), D = v.dim(3);
  const M scale(scale_d);
  TensorMap<M> out;
  out["o"] = Tensor<M>({B, T, H, D}, M(0));
  out["o_var"] = Tensor<M>({B, T, H, D}, M(0));
  out["lambda_T"] = Tensor<M>({B, H, N, D}, M(0));
  out["eta_T"] = Tensor<M>({B, H, N, D}, M(0));
  auto x4 = [](const Tensor<double>& x, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t e) {
    return M(x.data[static_cast<std::size_t>(((a * x.shape[1] + b) * x.shape[2] + c) * x.shape[3] + e)]);
  };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t d = 0; d < D; ++d) {
          const M a(abar.data[static_cast<std::size_t>((h * N + n) * D + d)]);
          const M kn = x4(k, b, 0, h, n);  // time-invariant key (checked by the caller)
          const M lam0 = l0 ? x4(*l0, b, h, n, d) : M(lambda0);
          const M eta0 = e0 ? x4(*e0, b, h, n, d) : M(0);
          M Lam, Eta;
          for (std::int64_t t = 1; t <= T; ++t) {
            M sl(0), se(0);
            for (std::int64_t s = 1; s <= t; ++s) {
              const M lvs = x4(lv, b, s - 1, h, d);
              sl += pow(a, -2 * (t - s)) * lvs;
              se += pow(a, -(t - s)) * lvs * x4(v, b, s - 1, h, d);
            }
            Lam = pow(a, -2 * t) * lam0 + kn * kn * sl;
            Eta = pow(a, -t) * eta0 + kn * se;
            const M qn = x4(q, b, t - 1, h, n);
            const std::size_t od = static_cast<std::size_t>(((b * T + (t - 1)) * H + h) * D + d);
            out["o"].data[od] += scale * qn * (Eta / Lam);
            out["o_var"].data[od] += scale * scale * qn * qn / Lam;
          }
          const std::size_t sd = static_cast<std::size_t>(((b * H + h) * N + n) * D + d);
          out["lambda_T"].data[sd] = Lam;
          out["eta_T"].data[sd] = Eta;
        }
  return out;
}

TEST(KlaKalman, EqualsThm3ConvolutionFormWhenDeterministicLti) {
  PrecisionGuard guard;
  const Dims d{2, 30, 2, 3, 2};
  struct C {
    const char* name;
    Opts o;
    Sets sets;
    double lambda0, scale;
  };
  Opts base;
  base.p_hi = 0;
  base.k_time_invariant = true;
  Opts lti = base;
  lti.lv_time_invariant = true;
  Opts with_init = base;
  with_init.init = true;
  const std::vector<C> cases = {{"lti", lti, {}, 1.0, 1.0},
                                {"lambda_v varying", base, {{"lambda0", "0.25"}, {"scale", "0.5"}}, 0.25, 0.5},
                                {"init", with_init, {}, 1.0, 1.0}};
  for (const C& c : cases) {
    SCOPED_TRACE(c.name);
    const TensorMap<double> in = make_inputs(d, 20, c.o);
    const TensorMap<M> got = run_layer_mpfr(in, c.sets, 256);
    ASSERT_GE(ttr::precision_control<M>::set_bits(512), 512u);
    const TensorMap<M> ref = thm3_convolution(in, c.lambda0, c.scale);
    for (const char* n : {"o", "o_var", "lambda_T", "eta_T"}) expect_rel(got.at(n), ref.at(n), M(1e-60), n);
  }
}

// ------------------------------------------------------------ precision bound with p̄ > 0

// From eq. (18): Λ_t = Λ_{t-1}/(ā² + p̄Λ_{t-1}) + φ_t. With Λ_{t-1} > 0 and ā² ≥ 0 the first
// term is < Λ_{t-1}/(p̄Λ_{t-1}) = 1/p̄, so Λ_t < 1/p̄ + φ_t whatever Λ_{t-1}, ā and λv are
// (process noise caps the precision). The computed Λ_t has at most four roundings on top
// (denominator product and sum, division, final sum) applied to a quantity < 1/p̄ + φ_t,
// so the computed value is ≤ (1/p̄ + φ_t)(1 + 4u): allowed 1 + 1e-70 at 256 bits and
// 1 + 4·2^-53 in float64. As ā → 0 the bound is attained: the first term equals
// (1/p̄)/(1 + ā²/(p̄Λ_{t-1})) ≥ (1/p̄)(1 − ā²/(p̄Λ_{t-1})); at t = 1 this makes
// p̄Λ_1 ≥ 1 − ā²/(p̄Λ_0) ≈ 1, so for t ≥ 2 the deficit is ≲ ā²: equality to ~1e-60 at
// ā = 1e-30 (checked with 1e-50).
// Every token is observed through prefix runs (lambda_T of the first t tokens is Λ_t).
TEST(KlaKalman, PrecisionBoundedByInverseProcessNoise) {
  PrecisionGuard guard;
  const Dims d{1, 12, 1, 3, 4};
  Opts o;
  TensorMap<double> in = make_inputs(d, 30, o);
  // Adversarial slots: ā from 1 down to 1e-150, p̄ from 1e-3 to 10, λv up to 1e30.
  const double abar[] = {1.0, 0.5, 1e-3, 1e-30, 1e-150, 1e-30};
  const double pbar[] = {1e-3, 0.1, 10.0, 0.2, 1.0, 1e-3};
  for (std::size_t i = 0; i < in["a_bar"].data.size(); ++i) {
    in["a_bar"].data[i] = abar[i % 6];
    in["p_bar"].data[i] = pbar[(i / 2) % 6];
  }
  for (std::size_t i = 0; i < in["lambda_v"].data.size(); ++i)
    in["lambda_v"].data[i] = i % 3 == 0 ? 1e30 : i % 3 == 1 ? 1e-3 : 2.0;
  const std::int64_t S = d.N * d.D;
  int tight_checked = 0;
  for (std::int64_t t = 1; t <= d.T; ++t) {
    TensorMap<double> pre = in;
    for (const char* n : {"q", "k", "v", "lambda_v"}) {
      Tensor<double>& x = pre[n];
      x.shape[1] = t;
      x.data.resize(static_cast<std::size_t>(x.numel()));  // B = H = 1: the first t tokens
    }
    const TensorMap<M> got = run_layer_mpfr(pre, {}, 256);
    const ttr::LayerResult f64 = ttr::run_layer(ttr::find_layer("kla_kalman"), ttr::Form::sequential,
                                                {ttr::Tier::fp64, 53}, pre, ttr::Config::make(spec(), {}));
    for (std::int64_t s = 0; s < S; ++s) {
      const std::int64_t n = s / d.D, dd = s % d.D;
      const double kn = in["k"].data[static_cast<std::size_t>((t - 1) * d.N + n)];
      const double lv = in["lambda_v"].data[static_cast<std::size_t>((t - 1) * d.D + dd)];
      const M phi = M(kn) * M(kn) * M(lv);
      const M cap = 1 / M(in["p_bar"].data[s]) + phi;
      const M& lam = got.at("lambda_T").data[s];
      EXPECT_LE(lam, cap * (1 + M(1e-70))) << "t = " << t << ", slot " << s;
      EXPECT_GT(lam, M(0));
      const double lam64 = f64.values.at("lambda_T").data[s];
      EXPECT_LE(lam64, ttr::to_double(cap) * (1 + 4 * 0x1.0p-53) * (1 + 0x1.0p-53)) << "fp64, t = " << t;
      if (in["a_bar"].data[s] <= 1e-30 && t >= 2) {
        ++tight_checked;
        EXPECT_GE(lam, cap * (1 - M(1e-50))) << "bound not attained as ā → 0, t = " << t;
      }
    }
  }
  EXPECT_GT(tight_checked, 0);
}

// ------------------------------------------------------------ 256 vs 512 bits

// Relative errors ≲ 4·T·u_256 ≈ 2e-75 on the tiny suite (T ≤ 7): 70 significant digits
// per element for the per-slot quantities; o (a signed sum over n) normwise.
TEST(KlaKalmanPrecision, Mpfr256And512Agree) {
  PrecisionGuard guard;
  for (const char* c : {"basic", "with_state"}) {
    SCOPED_TRACE(c);
    const ttr::test::CaseInputs ci = ttr::test::case_inputs("kla_kalman", "tiny", c);
    const TensorMap<M> lo = run_layer_mpfr(ci.tensors, {}, 256);
    const TensorMap<M> hi = run_layer_mpfr(ci.tensors, {}, 512);
    for (const char* n : {"o_var", "lambda_T", "eta_T"}) expect_rel(lo.at(n), hi.at(n), M(1e-70), n);
    expect_normwise(lo.at("o"), hi.at("o"), M(1e-70), "o");
  }
}

}  // namespace
