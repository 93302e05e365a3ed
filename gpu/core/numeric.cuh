// Element formats of the kernels: the storage/operand format E (bf16 or fp32)
// and the fp32 compute format. `narrow` is the policy's rounding to E (round to
// nearest even, as reference/core/policy.hpp's Mixed16Policy<BF16Format>), the
// identity for fp32 (ExactPolicy<float>: nothing is narrowed).
#pragma once

#include <cuda_bf16.h>

namespace ttr::gpu {

template <class E>
struct Elem;

template <>
struct Elem<float> {
  static constexpr bool narrows = false;
  __device__ static float to_float(float x) { return x; }
  __device__ static float from_float(float x) { return x; }
};

template <>
struct Elem<__nv_bfloat16> {
  static constexpr bool narrows = true;
  __device__ static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};

// x rounded to E and read back in fp32.
template <class E>
__device__ inline float narrow(float x) {
  return Elem<E>::to_float(Elem<E>::from_float(x));
}

}  // namespace ttr::gpu
