// The two compositions of KLA-K's scans (KLA-K §4.2, Alg. 1), per state slot:
// Möbius matrices for the precision (Thm 1, eqs. (16)-(17); Cor. 1.1) and affine
// maps for the information mean (Thm 2, eq. (19); Cor. 2.1). Device side of
// reference/kla_kalman/scan.hpp's MobiusBlock / DiagonalAffine, one slot each.
#pragma once

#include <cuda_runtime.h>

#include "gpu/core/numeric.cuh"

namespace ttr::gpu::kla {

// [[a, b], [c, d]] acting as Λ ↦ (aΛ + b)/(cΛ + d).
struct Mobius {
  float a, b, c, d;
};

// η ↦ A η + B.
struct Affine {
  float A, B;
};

// M_t of eq. (17): [[1 + p̄φ, ā²φ], [p̄, ā²]], φ = k_n² λv_d (eq. (18)).
__device__ inline Mobius step_matrix(float k, float lv, float a2, float p) {
  const float phi = k * k * lv;
  return {1.0f + p * phi, a2 * phi, p, a2};
}

// Scaling a Möbius matrix leaves its map unchanged; a power of two that puts the
// largest entry in [1/2, 1) is exact and keeps products of many steps finite
// (scan.hpp "Range": p̄φ = 1.5 per token overflows fp32 after ~97 tokens).
__device__ inline void rescale(Mobius& m) {
  const float x = fmaxf(fmaxf(fabsf(m.a), fabsf(m.b)), fmaxf(fabsf(m.c), fabsf(m.d)));
  if (!(x > 0.0f) || !isfinite(x)) return;
  int e = 0;
  (void)frexpf(x, &e);
  m.a = ldexpf(m.a, -e), m.b = ldexpf(m.b, -e), m.c = ldexpf(m.c, -e), m.d = ldexpf(m.d, -e);
}

// later ∘ earlier = the matrix product later · earlier (Cor. 1.1), rescaled.
__device__ inline Mobius compose(const Mobius& earlier, const Mobius& later) {
  Mobius o{later.a * earlier.a + later.b * earlier.c, later.a * earlier.b + later.b * earlier.d,
           later.c * earlier.a + later.d * earlier.c, later.c * earlier.b + later.d * earlier.d};
  rescale(o);
  return o;
}

__device__ inline float apply(const Mobius& m, float lam) { return (m.b + m.a * lam) / (m.d + m.c * lam); }

// (A2, B2) ∘ (A1, B1) = (A2 A1, A2 B1 + B2) (Cor. 2.1).
__device__ inline Affine compose(const Affine& earlier, const Affine& later) {
  return {later.A * earlier.A, later.B + later.A * earlier.B};
}

// What the scans write to memory is narrowed (scan.hpp's policy): all four
// entries of a Möbius matrix, the additive part of an affine map.
template <class E>
__device__ inline Mobius stored(Mobius m) {
  return {narrow<E>(m.a), narrow<E>(m.b), narrow<E>(m.c), narrow<E>(m.d)};
}
template <class E>
__device__ inline Affine stored(Affine x) {
  return {x.A, narrow<E>(x.B)};
}

}  // namespace ttr::gpu::kla
