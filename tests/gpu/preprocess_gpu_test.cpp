// GPU tests of the delta family's preprocessing kernels: the row L2 norm
// (gpu/family/l2norm.cu, use_qk_l2norm_in_kernel) and PGDN's diagonal
// preconditioner (gpu/family/atk_chunk.cu), each against the CPU form of
// reference/family/ evaluated in double — a higher precision — with a bound
// from fp32 rounding; and the PGDN binding that computes k̃ on the device against
// the gate's runner. Label `gpu`; skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/binding/device.hpp"
#include "gpu/api.hpp"
#include "oracles/registry.hpp"
#include "reference/core/policy.hpp"
#include "reference/family/atk_chunk.hpp"
#include "reference/family/l2norm.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

using test::check_unit;
using test::run_kernel;

constexpr double kU32 = 0x1p-24;  // fp32 unit roundoff

std::uint16_t to_bf16_bits(float x) {  // round to nearest even (finite x)
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
float from_bf16_bits(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// y = x/sqrt(‖x‖² + eps): the fp32 result is within (F + 4)·u of the exact one per
// row (a dot product of F terms, a sqrt, a division, a product, each ≤ u relative,
// and the terms are all positive so there is no cancellation). The bf16 output is
// exactly the fp32 output rounded once.
TEST(CudaPreprocess, L2NormMatchesTheCpuFormInDouble) {
  TTR_REQUIRE_DEVICE();
  const std::int64_t rows = 1000;
  const int F = 96;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(rows * F);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % 7 == 0 ? 1e3f : 1.0f);
  for (const bool bf16 : {false, true}) {
    std::vector<float> stored = x;
    std::vector<std::uint16_t> xb(x.size());
    if (bf16)
      for (std::size_t i = 0; i < x.size(); ++i) stored[i] = from_bf16_bits(xb[i] = to_bf16_bits(x[i]));
    gpu::DeviceBuffer dx(x.size() * (bf16 ? 2 : 4)), dy(x.size() * (bf16 ? 2 : 4)), d32(x.size() * 4);
    if (bf16) dx.upload(xb.data(), xb.size() * 2);
    else dx.upload(stored.data(), stored.size() * 4);
    gpu::l2norm_rows(bf16 ? gpu::DType::bf16 : gpu::DType::fp32, dx.get(), dy.get(), static_cast<float*>(d32.get()),
                     rows, F, 1e-6f);
    std::vector<float> y32(x.size());
    d32.download(y32.data(), y32.size() * 4);
    Tensor<double> xd({rows, F}, 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) xd.data[i] = stored[i];
    const Tensor<double> ref = l2normalize_rows(xd, 1e-6);
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, std::abs(y32[i] - ref.data[i]) / ((F + 4) * kU32 * (std::abs(ref.data[i]) + 1e-30)));
    EXPECT_LE(worst, 1.0) << (bf16 ? "bf16" : "fp32") << " input: error / bound";
    if (bf16) {
      std::vector<std::uint16_t> yb(x.size());
      dy.download(yb.data(), yb.size() * 2);
      std::size_t mismatched = 0;
      for (std::size_t i = 0; i < x.size(); ++i) mismatched += yb[i] != to_bf16_bits(y32[i]);
      EXPECT_EQ(mismatched, 0u) << "bf16 output is not the fp32 result rounded once";
    }
  }
}

// The preconditioner's k̃ and final A against the same chunkwise form in double.
// Error budget, relative to the exact values: A_t is a sum of ≤ 64 nonnegative
// terms plus a decayed carry that has passed through ≤ T/64 such sums, each term a
// product of ≤ 3 rounded factors with an expf (≤ 2 ulp): ≤ (64 + T/64 + 8)·u
// relative; log(A + eps) then carries that as an absolute error, the squash and
// exp(−log x · s) scale it by ≤ log x ≤ 1, plus ≤ 8u for the elementwise steps.
TEST(CudaPreprocess, PreconditionerMatchesTheCpuFormInDouble) {
  TTR_REQUIRE_DEVICE();
  const int B = 2, T = 150, H = 3, K = 48;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  Tensor<double> k({B, T, H, K}, 0.0), g({B, T, H}, 0.0), beta({B, T, H}, 0.0), A0({B, H, K}, 0.0);
  std::vector<float> kf(k.data.size()), gf(g.data.size()), bf(beta.data.size()), a0f(A0.data.size());
  for (std::size_t i = 0; i < kf.size(); ++i) k.data[i] = kf[i] = normal(rng) / std::sqrt(float(K));
  for (std::size_t i = 0; i < gf.size(); ++i) g.data[i] = gf[i] = -0.2f * uni(rng);
  for (std::size_t i = 0; i < bf.size(); ++i) beta.data[i] = bf[i] = uni(rng);
  for (std::size_t i = 0; i < a0f.size(); ++i) A0.data[i] = a0f[i] = 0.05f * uni(rng);
  const std::vector<float> center = {-0.2f, -1.5f, 0.7f};
  const float x = 1.5f, eps = 1e-6f;
  Tensor<double> kt_ref, A_ref;
  atk_write_keys_chunk<ExactPolicy<double>>(k, g, beta, std::vector<double>(center.begin(), center.end()), &A0,
                                            std::log(double(x)), double(eps), 64, kt_ref, A_ref);
  gpu::DeviceBuffer dk(kf.size() * 4), dg(gf.size() * 4), db(bf.size() * 4), da0(a0f.size() * 4), dc(H * 4),
      dkt(kf.size() * 4), dA(a0f.size() * 4);
  dk.upload(kf.data(), kf.size() * 4), dg.upload(gf.data(), gf.size() * 4), db.upload(bf.data(), bf.size() * 4);
  da0.upload(a0f.data(), a0f.size() * 4), dc.upload(center.data(), H * 4);
  dkt.fill_bytes(0xFF), dA.fill_bytes(0xFF);
  gpu::AtkArgs a;
  a.B = B, a.T = T, a.H = H, a.K = K, a.key_dtype = gpu::DType::fp32, a.dtype = gpu::DType::fp32;
  a.k = dk.get(), a.g_atk = static_cast<const float*>(dg.get()), a.beta_atk = static_cast<const float*>(db.get());
  a.A0 = static_cast<const float*>(da0.get()), a.center = static_cast<const float*>(dc.get());
  a.log_x = std::log(x), a.eps = eps, a.k_tilde = dkt.get(), a.A_final = static_cast<float*>(dA.get());
  gpu::atk_write_keys(a);
  std::vector<float> kt(kf.size()), Af(a0f.size());
  dkt.download(kt.data(), kt.size() * 4);
  dA.download(Af.data(), Af.size() * 4);
  const double bound = (64.0 + T / 64.0 + 16.0) * kU32;
  double worst_k = 0, worst_A = 0;
  for (std::size_t i = 0; i < kt.size(); ++i)
    worst_k = std::max(worst_k, std::abs(kt[i] - kt_ref.data[i]) / (bound * std::abs(kt_ref.data[i]) + 1e-30));
  for (std::size_t i = 0; i < Af.size(); ++i)
    worst_A = std::max(worst_A, std::abs(Af[i] - A_ref.data[i]) / (bound * std::abs(A_ref.data[i]) + 1e-30));
  EXPECT_LE(worst_k, 1.0) << "k̃: error / bound";
  EXPECT_LE(worst_A, 1.0) << "final A: error / bound";
  // The preconditioner is not the identity here (B_t spans [1/x, x]): a kernel
  // that wrote k itself would fail the comparison above.
  double moved = 0;
  for (std::size_t i = 0; i < kt.size(); ++i) moved = std::max(moved, std::abs(kt_ref.data[i] / (kf[i] + 1e-30) - 1));
  EXPECT_GT(moved, 0.2);
}

// gpu::precond_delta_chunk_forward(DeltaArgs, AtkArgs) (k̃ on the device from
// the stored key) gives the gate runner's output bit for bit (the runner calls
// the same kernels with use_qk_l2norm_in_kernel off).
TEST(CudaPreprocess, PrecondBindingEqualsTheRunner) {
  TTR_REQUIRE_DEVICE();
  const LayerEntry& e = find_layer("precond_gated_delta_rule");
  Regime opt;
  opt.optional_inputs = false;
  const VectorCase c{"binding", "", test::dims(2, 100, 2, 32, 32), opt, {{"use_qk_l2norm_in_kernel", "false"}}};
  const TensorMap<double> in = generate_inputs(e.spec, c, 3);
  const Config cfg = Config::make(e.spec, c.config);
  const auto via_runner = run_kernel(e.spec.name, Form::chunk, Tier::fp32, in, cfg);
  auto up = [](const Tensor<double>& t) {
    std::vector<float> f(t.data.begin(), t.data.end());
    gpu::DeviceBuffer b(f.size() * 4);
    b.upload(f.data(), f.size() * 4);
    return b;
  };
  gpu::DeviceBuffer dq = up(in.at("q")), dk = up(in.at("k")), dv = up(in.at("v")), db = up(in.at("beta")),
                    dg = up(in.at("g")), dga = up(in.at("g_atk")), dba = up(in.at("beta_atk"));
  const std::vector<float> center(2, static_cast<float>(cfg.number("log_atk_scale")));
  gpu::DeviceBuffer dc(8), dout(in.at("v").data.size() * 4);
  dc.upload(center.data(), 8);
  gpu::DeltaArgs a;
  a.B = 2, a.T = 100, a.H = 2, a.K = 32, a.V = 32, a.dtype = gpu::DType::fp32;
  a.q = dq.get(), a.k = dk.get(), a.v = dv.get(), a.beta = db.get(), a.g = static_cast<const float*>(dg.get());
  a.o = dout.get(), a.scale = 1.0f / std::sqrt(32.0f);
  gpu::AtkArgs p;
  p.g_atk = static_cast<const float*>(dga.get()), p.beta_atk = static_cast<const float*>(dba.get());
  p.center = static_cast<const float*>(dc.get()), p.log_x = std::log(static_cast<float>(cfg.number("x")));
  p.eps = static_cast<float>(cfg.number("eps"));
  gpu::precond_delta_chunk_forward(a, p);
  gpu::synchronize();
  std::vector<float> o(in.at("v").data.size());
  dout.download(o.data(), o.size() * 4);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < o.size(); ++i) differ += static_cast<double>(o[i]) != via_runner.at("o").data[i];
  EXPECT_EQ(differ, 0u);
}

}  // namespace
}  // namespace ttr
