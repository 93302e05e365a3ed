// GPU test of the preconditioner's adjoint (gpu/family/atk_backward.cu), the stage
// the preconditioned layer's backward kernels run after the delta core: every
// gradient against reference/family/atk_backward.hpp (the reverse-sum route, as the
// chunk backward form) evaluated in double, a higher precision.
//
// Bound: the kernel is the same algorithm in fp32 with other summation orders (a
// warp butterfly then the warps over the channels where the reference sums the
// channels in order, fmaf where it multiplies then adds). So its error is of the
// size of the same reference run in float: per tensor, ‖gpu − ref₆₄‖∞ is reported
// as a ratio to 4‖ref₃₂ − ref₆₄‖∞ + 16u‖ref₆₄‖∞ (the factor 4 for the orders, the
// floor for the last rounding of each element). The gradients of the whole path
// through dk̃ are covered by the layer's kernels (delta_backward_gpu_test.cpp).
// Label `gpu`; skipped without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu/api.hpp"
#include "gpu/binding/device.hpp"
#include "gpu/family/atk_backward.cuh"
#include "reference/family/atk_backward.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

constexpr double kU32 = 0x1p-24;  // fp32 unit roundoff
constexpr int B = 2, T = 150, H = 3, K = 48;

struct Inputs {
  std::vector<float> k, g, beta, A0, center, dw0, dw1, dA;
};

Inputs draw(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  Inputs x;
  auto fill = [&](std::vector<float>& v, std::size_t n, auto f) {
    v.resize(n);
    for (float& e : v) e = f();
  };
  const std::size_t rows = std::size_t(B) * T * H, st = std::size_t(B) * H * K;
  fill(x.k, rows * K, [&] { return normal(rng) / std::sqrt(float(K)); });
  fill(x.g, rows, [&] { return -0.2f * uni(rng); });
  fill(x.beta, rows, [&] { return uni(rng); });
  fill(x.A0, st, [&] { return 0.05f * uni(rng); });
  x.center = {-0.2f, -1.5f, 0.7f};
  fill(x.dw0, rows * K, [&] { return normal(rng); });  // dk̃ as two column-block partials
  fill(x.dw1, rows * K, [&] { return normal(rng); });
  fill(x.dA, st, [&] { return normal(rng); });
  return x;
}

template <class S>
Tensor<S> tensor(const std::vector<float>& v, Shape shape) {
  Tensor<S> t(std::move(shape), S(0));
  for (std::size_t i = 0; i < v.size(); ++i) t.data[i] = S(v[i]);
  return t;
}

// dk_atk, dg_atk, dbeta_atk, dA0, dcenter.
using Grads = std::vector<std::vector<double>>;

// The reference gradients in S.
template <class S>
Grads reference(const Inputs& x, const std::vector<float>& dkt, float log_x, float eps) {
  const Tensor<S> k = tensor<S>(x.k, {B, T, H, K}), g = tensor<S>(x.g, {B, T, H}), beta = tensor<S>(x.beta, {B, T, H});
  const Tensor<S> A0 = tensor<S>(x.A0, {B, H, K}), dA = tensor<S>(x.dA, {B, H, K}), dk = tensor<S>(dkt, {B, T, H, K});
  const std::vector<S> center(x.center.begin(), x.center.end());
  Tensor<S> dk_atk, dg, db, dA0, dc;
  atk_write_keys_backward<S>(k, g, beta, center, &A0, S(log_x), S(eps), dk, &dA, dk_atk, dg, db, dA0, dc,
                             DgAtk::reverse_sum);
  Grads out;
  for (const Tensor<S>* t : {&dk_atk, &dg, &db, &dA0, &dc}) out.emplace_back(t->data.begin(), t->data.end());
  return out;
}

Grads run_gpu(const Inputs& x, float log_x, float eps) {
  const std::size_t rows = std::size_t(B) * T * H, st = std::size_t(B) * H * K;
  auto up = [](const std::vector<float>& v) {
    gpu::DeviceBuffer b(v.size() * 4);
    b.upload(v.data(), v.size() * 4);
    return b;
  };
  gpu::DeviceBuffer dk = up(x.k), dg = up(x.g), db = up(x.beta), dA0in = up(x.A0), dc = up(x.center), dA = up(x.dA);
  std::vector<float> dw(x.dw0);
  dw.insert(dw.end(), x.dw1.begin(), x.dw1.end());  // [NB = 2, rows, K]
  gpu::DeviceBuffer ddw = up(dw);
  gpu::DeviceBuffer o_dk(rows * K * 4), o_dg(rows * 4), o_db(rows * 4), o_dA0(st * 4), o_dc(H * 4);
  for (gpu::DeviceBuffer* b : {&o_dk, &o_dg, &o_db, &o_dA0, &o_dc}) b->fill_bytes(0xFF);  // NaN: every element written
  gpu::AtkBackwardArgs a;
  gpu::AtkArgs& p = a.fwd;
  p.B = B, p.T = T, p.H = H, p.K = K, p.key_dtype = gpu::DType::fp32;
  p.k = dk.get(), p.g_atk = static_cast<const float*>(dg.get()), p.beta_atk = static_cast<const float*>(db.get());
  p.A0 = static_cast<const float*>(dA0in.get()), p.center = static_cast<const float*>(dc.get());
  p.log_x = log_x, p.eps = eps;
  a.dA_final = static_cast<const float*>(dA.get());
  a.dg_atk = static_cast<float*>(o_dg.get()), a.dbeta_atk = static_cast<float*>(o_db.get());
  a.dA0 = static_cast<float*>(o_dA0.get()), a.dcenter = static_cast<float*>(o_dc.get());
  gpu::atk::backward(a, static_cast<const float*>(ddw.get()), 2, static_cast<std::int64_t>(rows), gpu::DType::fp32,
                     static_cast<float*>(o_dk.get()), nullptr);
  gpu::synchronize();
  Grads r;
  using Out = std::pair<gpu::DeviceBuffer*, std::size_t>;
  for (auto [b, n] : std::initializer_list<Out>{{&o_dk, rows * K}, {&o_dg, rows}, {&o_db, rows}, {&o_dA0, st}, {&o_dc, H}}) {
    std::vector<float> v(n);
    b->download(v.data(), n * 4);
    r.emplace_back(v.begin(), v.end());
  }
  return r;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));  // NaN: see the caller
  return m;
}

// The error allowed in tensor n (file comment): 4‖ref₃₂ − ref₆₄‖∞ + 16u‖ref₆₄‖∞.
double bound(const Grads& ref, const Grads& ref32, std::size_t n) {
  double scale = 0;
  for (double v : ref[n]) scale = std::max(scale, std::abs(v));
  return 4 * max_abs_diff(ref32[n], ref[n]) + 16 * kU32 * scale;
}

const char* const kNames[] = {"dk_atk", "dg_atk", "dbeta_atk", "dA0", "dcenter"};

// The inputs, the kernel's dk̃ (the two partials summed in fp32) and the references.
struct Case {
  float log_x = std::log(1.5f), eps = 1e-6f;
  Inputs x = draw(17);
  std::vector<float> dkt;
  Grads ref, ref32;
  Case() : dkt(x.dw0.size()) {
    for (std::size_t i = 0; i < dkt.size(); ++i) dkt[i] = x.dw0[i] + x.dw1[i];
    ref = reference<double>(x, dkt, log_x, eps), ref32 = reference<float>(x, dkt, log_x, eps);
  }
};

TEST(CudaAtkBackward, AdjointMatchesTheCpuFormInDouble) {
  TTR_REQUIRE_DEVICE();
  const Case u;
  const Grads got = run_gpu(u.x, u.log_x, u.eps);
  for (std::size_t n = 0; n < u.ref.size(); ++n) {
    ASSERT_TRUE(std::all_of(got[n].begin(), got[n].end(), [](double v) { return std::isfinite(v); })) << kNames[n];
    EXPECT_LE(max_abs_diff(got[n], u.ref[n]) / bound(u.ref, u.ref32, n), 1.0) << kNames[n] << ": error / bound";
  }
}

// The bound has teeth (no device needed): dk̃ a part in 10⁴ off (the size of a
// bf16-rounded dk̃'s error, far above fp32's) moves every gradient beyond it.
TEST(CudaAtkBackward, TheBoundTellsAWrongDkTildeApart) {
  const Case u;
  std::vector<float> off(u.dkt);
  for (float& v : off) v *= 1.0001f;
  const Grads wrong = reference<double>(u.x, off, u.log_x, u.eps);
  for (std::size_t n = 0; n < u.ref.size(); ++n) {
    ASSERT_TRUE(std::any_of(u.ref[n].begin(), u.ref[n].end(), [](double v) { return v != 0; })) << kNames[n];
    EXPECT_GT(max_abs_diff(wrong[n], u.ref[n]) / bound(u.ref, u.ref32, n), 1.0) << kNames[n] << ": a wrong dk̃ would pass";
  }
}

}  // namespace
}  // namespace ttr
