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

inline std::int64_t nans(const Tensor<double>& t) {
  return std::count_if(t.data.begin(), t.data.end(), [](double x) { return std::isnan(x); });
}

}  // namespace ttr::test
