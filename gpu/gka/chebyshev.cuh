// One Chebyshev step of GKA Alg. 1 for one coordinate, shared by every kernel
// that runs the solve (gpu/gka/chunk.cu's WMMA and fragment paths), written with
// explicit round-to-nearest intrinsics so that the compiler cannot contract the
// expressions differently in different kernels: the same inputs give the same
// bits in each (tests/gpu/gka_gpu_test.cpp compares the two solve paths bit for
// bit). Each intrinsic is one fp32 operation (fma: one rounding), inside the
// fp32 per-operation error the chunk form's model assumes for the solver's
// scalars and vectors (reference/gka/chunk.hpp keeps them in acc).
#pragma once

namespace ttr::gpu::gka {

// The weight schedule ω_i = 4/(4 − ρ²ω_{i−1}).
__device__ __forceinline__ float chebyshev_weight(float rho2, float omega_prev) {
  return __fdiv_rn(4.0f, __fmaf_rn(-rho2, omega_prev, 4.0f));
}

// The step size c_i = 2ω_i/(L + μ).
__device__ __forceinline__ float chebyshev_step_size(float w, float l_plus_mu) {
  return __fdiv_rn(__fmul_rn(2.0f, w), l_plus_mu);
}

// ξ_{i+1} = ξ_i − c_i ((H_c + λ_c I) ξ_i − q̂) + (ω_i − 1)(ξ_i − ξ_{i−1}) at one
// coordinate, from y = (H_c ξ_i) there (λ_c ξ_i added here, as the CPU form adds it).
__device__ __forceinline__ float chebyshev_step(float x, float x_prev, float y, float lam, float ci, float w,
                                                float sq) {
  const float ax = __fmaf_rn(lam, x, y);
  const float stepped = __fmaf_rn(-ci, __fsub_rn(ax, sq), x);
  return __fmaf_rn(__fsub_rn(w, 1.0f), __fsub_rn(x, x_prev), stepped);
}

}  // namespace ttr::gpu::gka
