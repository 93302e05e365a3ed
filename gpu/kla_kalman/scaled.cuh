// A float carried as a mantissa and a separate int32 exponent, x = m·2^e with
// m = 0 (then e = 0) or |m| ∈ [1/2, 1): the device side of
// reference/core/pow2.hpp's Scaled<float>, with the same operations rounding at
// the same points, so that the CUDA kernel computes what the CPU `chunk` form
// (reference/kla_kalman/scaled_scan.hpp) models. Why KLA-K needs it and why it
// cannot overflow: docs/kla-scaled.md.
//
// Every product, quotient and sum rounds once, in its fp32 mantissa operation;
// the powers of two are exact. Nothing overflows or underflows while the
// exponent stays in int32's range (T < 3·10^6 tokens for fp32 inputs); value()
// rounds into fp32 once (±inf beyond its range, gradual underflow below it).
#pragma once

#include <cuda_runtime.h>

namespace ttr::gpu::kla {

struct Sf {
  float m;
  int e;
};

// m·2^e with the mantissa moved into [1/2, 1) (exact). Zero: exponent 0;
// non-finite mantissas are left alone, as pow2.hpp's normalised().
__device__ inline Sf normalised(float m, int e = 0) {
  if (m == 0.0f) return {m, 0};
  if (!isfinite(m)) return {m, e};
  int k = 0;
  const float f = frexpf(m, &k);
  return {f, e + k};
}

__device__ inline Sf operator*(Sf x, Sf y) { return normalised(x.m * y.m, x.e + y.e); }
__device__ inline Sf operator/(Sf x, Sf y) { return normalised(x.m / y.m, x.e - y.e); }

// The smaller operand is shifted to the larger one's exponent (exact unless it
// falls below fp32's normal range, where it is ≤ 2^-125 of the larger and
// rounds once), then one rounding of the mantissa sum.
__device__ inline Sf operator+(Sf x, Sf y) {
  if (y.m == 0.0f) return x;
  if (x.m == 0.0f) return y;
  const int top = max(x.e, y.e);
  const float a = x.e == top ? x.m : ldexpf(x.m, x.e - top);
  const float b = y.e == top ? y.m : ldexpf(y.m, y.e - top);
  return normalised(a + b, top);
}

// The value in fp32: ±inf beyond its range, rounded once below its normal range.
__device__ inline float value(Sf x) { return ldexpf(x.m, x.e); }

}  // namespace ttr::gpu::kla
