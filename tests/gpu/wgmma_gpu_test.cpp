// The warpgroup-MMA layer (gpu/core/wgmma.cuh) alone, through gpu::hopper_mma_probe:
// each operand layout the Hopper state passes read (K-major and M-major A with the
// 128-byte swizzle, N-major B with the 64-byte swizzle, A negated) against the product
// of the same bf16 values in double. A wrong swizzle, descriptor stride or fragment
// layout moves whole 16-byte chunks or rows: errors of the size of the entries, where
// fp32 accumulation of K ≤ 128 products is within γ_K Σ|a||b|, γ_K = K·2⁻²³ (the
// standard bound with the unit roundoff of a truncating fp32 sum; 1.5e-5 at K = 128).
// Label `gpu`; skipped without a device or off compute capability 9.0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpu/api.hpp"
#include "reference/core/float16.hpp"
#include "tests/gpu/gpu_checks.hpp"

namespace ttr {
namespace {

std::vector<std::uint16_t> random_bf16(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = bf16_bits(BF16Format::round(d(rng)));
  return v;
}

// got[i][j] against Σ_k a(i, k) b(k, j) in double, within γ_K Σ_k |a(i, k) b(k, j)|.
template <class FA, class FB>
void expect_product(const std::vector<float>& got, int rows, int cols, int K, FA a, FB b, double sign,
                    const std::string& what) {
  const double gamma = K * std::ldexp(1.0, -23);
  int bad = 0;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      double exact = 0.0, mag = 0.0;
      for (int k = 0; k < K; ++k) exact += a(i, k) * b(k, j), mag += std::abs(a(i, k) * b(k, j));
      exact *= sign;
      const double g = got[static_cast<std::size_t>(i) * cols + j];
      if (!(std::abs(g - exact) <= gamma * mag) && bad++ < 5)
        ADD_FAILURE() << what << " (" << i << ", " << j << "): " << g << " against " << exact << " (bound "
                      << gamma * mag << ")";
    }
  EXPECT_EQ(bad, 0) << what << ": elements outside the bound";
}

TEST(CudaWgmma, OperandLayoutsGiveTheProducts) {
  TTR_REQUIRE_DEVICE();
  if (!gpu::hopper_state_pass_available()) GTEST_SKIP() << "warpgroup MMA needs compute capability 9.0";
  std::mt19937 rng(20261207);
  const auto A = random_bf16(64 * 128, rng), B = random_bf16(128 * 32, rng), C = random_bf16(64 * 32, rng),
             G = random_bf16(64 * 64, rng);
  std::vector<float> P1(64 * 32), P2(128 * 32), P3(128 * 32), P4(64 * 32);
  gpu::hopper_mma_probe(A.data(), B.data(), C.data(), G.data(), P1.data(), P2.data(), P3.data(), P4.data());
  auto a = [&](int i, int k) { return bf16_value(A[i * 128 + k]); };
  auto at = [&](int i, int k) { return bf16_value(A[k * 128 + i]); };  // Aᵀ: 128 × 64
  auto b = [&](int k, int j) { return bf16_value(B[k * 32 + j]); };
  auto c = [&](int k, int j) { return bf16_value(C[k * 32 + j]); };
  auto gt = [&](int i, int k) { return bf16_value(G[k * 64 + i]); };
  expect_product(P1, 64, 32, 128, a, b, 1.0, "A B (K-major A, N-major B)");
  expect_product(P2, 128, 32, 64, at, c, 1.0, "A^T C (M-major A)");
  expect_product(P3, 128, 32, 64, at, c, -1.0, "-A^T C (A scaled by -1)");
  expect_product(P4, 64, 32, 64, gt, c, 1.0, "G^T C (M-major 64 x 64)");
}

}  // namespace
}  // namespace ttr
