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
// non-finite mantissas are left alone, as pow2.hpp's normalised(). A normal
// float is renormalised on its bit pattern (the exponent field set to 126);
// frexpf — several times slower, and called ~50 times per token and slot — only
// for subnormals.
__device__ __forceinline__ Sf normalised(float m, int e = 0) {
  const unsigned u = __float_as_uint(m);
  const unsigned field = (u >> 23) & 0xffu;
  if (field - 1u < 254u) return {__uint_as_float((u & 0x807fffffu) | (126u << 23)), e + static_cast<int>(field) - 126};
  if (m == 0.0f) return {m, 0};
  if (field == 0xffu) return {m, e};
  int k = 0;
  const float f = frexpf(m, &k);
  return {f, e + k};
}

// x·2^-s, s ≥ 0, for |x| ∈ [1/2, 1): one exact multiplication while the result
// stays normal (s ≤ 125), else ldexpf (rounded once, as std::ldexp).
__device__ __forceinline__ float shifted_down(float x, int s) {
  if (s == 0) return x;
  if (s <= 125) return x * __uint_as_float(static_cast<unsigned>(127 - s) << 23);
  return ldexpf(x, -s);
}

// Mantissa products lie in [1/4, 1), quotients in (1/2, 2): always normal.
__device__ __forceinline__ Sf operator*(Sf x, Sf y) { return normalised(x.m * y.m, x.e + y.e); }
__device__ __forceinline__ Sf operator/(Sf x, Sf y) { return normalised(x.m / y.m, x.e - y.e); }

// The smaller operand is shifted to the larger one's exponent (exact unless it
// falls below fp32's normal range, where it is ≤ 2^-125 of the larger and
// rounds once), then one rounding of the mantissa sum.
__device__ __forceinline__ Sf operator+(Sf x, Sf y) {
  if (y.m == 0.0f) return x;
  if (x.m == 0.0f) return y;
  const int top = max(x.e, y.e);
  return normalised(shifted_down(x.m, top - x.e) + shifted_down(y.m, top - y.e), top);
}

// x·y + z and x1·y1 + x2·y2 with the products left unnormalised (their
// mantissas lie in [1/4, 1)): the same roundings as the separate operations —
// renormalising a product is exact — with one renormalisation instead of three.
// The shift bound 123 keeps a shifted [1/4, 1) mantissa normal, as above.
__device__ __forceinline__ Sf sum_aligned(float a, int ea, float b, int eb) {
  if (b == 0.0f) return normalised(a, ea);
  if (a == 0.0f) return normalised(b, eb);
  const int top = max(ea, eb);
  const auto down = [](float x, int s) { return s == 0 ? x : s <= 123 ? shifted_down(x, s) : ldexpf(x, -s); };
  return normalised(down(a, top - ea) + down(b, top - eb), top);
}
__device__ __forceinline__ Sf mul_add(Sf x, Sf y, Sf z) { return sum_aligned(x.m * y.m, x.e + y.e, z.m, z.e); }
__device__ __forceinline__ Sf dot2(Sf x1, Sf y1, Sf x2, Sf y2) {
  return sum_aligned(x1.m * y1.m, x1.e + y1.e, x2.m * y2.m, x2.e + y2.e);
}

// The value in fp32: ±inf beyond its range, rounded once below its normal range.
__device__ __forceinline__ float value(Sf x) {
  if (x.e >= -125 && x.e <= 127) return x.m * __uint_as_float(static_cast<unsigned>(127 + x.e) << 23);
  return ldexpf(x.m, x.e);
}

}  // namespace ttr::gpu::kla
