// Row-wise L2 normalisation x / sqrt(‖x‖² + eps) as FLA's `use_qk_l2norm_in_kernel`
// applies it to q and k (fla/modules/l2norm.py: eps = 1e-6 inside the sqrt).
#pragma once

#include <cmath>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

template <class T>
Tensor<T> l2normalize_rows(const Tensor<T>& x, const T& eps) {
  using std::sqrt;
  Tensor<T> y = x;
  const std::int64_t F = x.shape.back();
  for (std::int64_t r = 0; r < x.numel() / F; ++r) {
    T* row = y.data.data() + r * F;
    const T inv = from_double<T>(1.0) / sqrt(dot(row, row, static_cast<int>(F)) + eps);
    for (std::int64_t i = 0; i < F; ++i) row[i] *= inv;
  }
  return y;
}

}  // namespace ttr
