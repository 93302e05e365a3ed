// Backward of the row-wise L2 normalisation of l2norm.hpp (FLA's
// `use_qk_l2norm_in_kernel`): y = x r with r = (‖x‖² + eps)^{-1/2}, so
// ∂r/∂x_j = −r³ x_j and
//   dx = r (dy − y ⟨y, dy⟩)
// (the component of dy along y is removed, then scaled by r; with eps > 0 the
// removal is exact for y = x r as computed, ‖y‖ < 1). Recomputes r and y per row.
#pragma once

#include <cmath>
#include <vector>

#include "reference/core/scalar.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

// dx for x and the cotangent dy of l2normalize_rows(x, eps) (same shapes).
template <class T>
Tensor<T> l2normalize_rows_backward(const Tensor<T>& x, const Tensor<T>& dy, const T& eps) {
  using std::sqrt;
  Tensor<T> dx = dy;
  const std::int64_t F = x.shape.back();
  const int n = static_cast<int>(F);
  std::vector<T> y(static_cast<std::size_t>(F));
  for (std::int64_t r = 0; r < x.numel() / F; ++r) {
    const T* xr = x.data.data() + r * F;
    const T* dyr = dy.data.data() + r * F;
    const T inv = from_double<T>(1.0) / sqrt(dot(xr, xr, n) + eps);
    for (int i = 0; i < n; ++i) y[i] = xr[i] * inv;
    const T c = dot(y.data(), dyr, n);
    T* dxr = dx.data.data() + r * F;
    for (int i = 0; i < n; ++i) dxr[i] = inv * (dyr[i] - y[i] * c);
  }
  return dx;
}

}  // namespace ttr
