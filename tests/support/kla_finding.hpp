// The fuzzer's KLA-K finding (docs/fuzzing.md: T 128 → 5, p̄ = 0, ā ≈ 1.3e-5),
// built by hand on the bf16 grid: ā = 2^-17, p̄ = 0, k = λv = 1, so
// Λ_t = 2^34 Λ_{t−1} + 1 passes fp32's 2^128 at t = 4 (0-based 3) while
// μ_t ≈ 2^{-17t} v stays an ordinary number: exact o ~ 1e-26 at the last token,
// representable in fp32 and bf16. Shared by the CPU (tests/kla_kalman) and CUDA
// (tests/gpu) tests of the scaled forms.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "reference/core/tensor.hpp"

namespace ttr::test {

inline TensorMap<double> kla_overflow_finding() {
  TensorMap<double> in;
  const std::int64_t T = 5, N = 2, D = 3;
  in["q"] = Tensor<double>({1, T, 1, N}, 0.5);
  in["k"] = Tensor<double>({1, T, 1, N}, 1.0);
  in["v"] = Tensor<double>({1, T, 1, D}, 0.0);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t d = 0; d < D; ++d)
      in["v"].data[static_cast<std::size_t>(t * D + d)] = (t % 2 ? -1.0 : 1.0) * static_cast<double>(1 + d);
  in["lambda_v"] = Tensor<double>({1, T, 1, D}, 1.0);
  in["a_bar"] = Tensor<double>({1, N, D}, 0x1p-17);
  in["p_bar"] = Tensor<double>({1, N, D}, 0.0);
  return in;
}

// Backward inputs of kla_kalman (B = 1, H = 2, N = 3, D = 2, every input and
// cotangent present) with a given ā, p̄ and final-state cotangents scaled by
// `final_cotangent`. Values on a coarse dyadic grid (exact in bf16, so every tier reads the same
// inputs): q, k, v, cotangents in ±[1/8, 13/8], λv in [1/2, 2].
inline double kla_grid(std::size_t n, double phase, double lo, double hi, bool signed_) {
  const double u = 0.5 * (1.0 + std::sin(phase + 1.7 * static_cast<double>(n)));
  double x = std::round((lo + (hi - lo) * u) * 8.0) / 8.0;
  if (signed_ && (n * 7 + static_cast<std::size_t>(phase * 3)) % 3 == 0) x = -x;
  return x;
}

inline TensorMap<double> kla_backward_case(std::int64_t T, double a_bar, double p_bar, double final_cotangent) {
  const std::int64_t B = 1, H = 2, N = 3, D = 2;
  TensorMap<double> in;
  const auto fill = [&](const char* name, Shape shape, double phase, double lo, double hi, bool signed_) {
    Tensor<double>& x = in[name] = Tensor<double>(shape, 0.0);
    for (std::size_t n = 0; n < x.data.size(); ++n) x.data[n] = kla_grid(n, phase, lo, hi, signed_);
  };
  fill("q", {B, T, H, N}, 0.1, 0.125, 1.625, true);
  fill("k", {B, T, H, N}, 0.7, 0.125, 1.625, true);
  fill("v", {B, T, H, D}, 1.3, 0.125, 1.625, true);
  fill("lambda_v", {B, T, H, D}, 2.1, 0.5, 2.0, false);
  in["a_bar"] = Tensor<double>({H, N, D}, a_bar);
  in["p_bar"] = Tensor<double>({H, N, D}, p_bar);
  fill("lambda_init", {B, H, N, D}, 2.9, 0.5, 2.0, false);
  fill("eta_init", {B, H, N, D}, 3.7, 0.125, 1.625, true);
  fill("do", {B, T, H, D}, 4.3, 0.125, 1.625, true);
  fill("do_var", {B, T, H, D}, 5.1, 0.125, 1.625, true);
  fill("dlambda_T", {B, H, N, D}, 5.9, 0.125, 1.625, true);
  fill("deta_T", {B, H, N, D}, 6.7, 0.125, 1.625, true);
  for (const char* name : {"dlambda_T", "deta_T"})
    for (double& x : in[name].data) x *= final_cotangent;
  return in;
}

inline std::int64_t nans(const Tensor<double>& t) {
  return std::count_if(t.data.begin(), t.data.end(), [](double x) { return std::isnan(x); });
}

}  // namespace ttr::test
