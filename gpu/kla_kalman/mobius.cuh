// The two compositions of KLA-K's scans (KLA-K §4.2, Alg. 1), per state slot:
// Möbius matrices for the precision (Thm 1, eqs. (16)-(17); Cor. 1.1) and affine
// maps for the information mean (Thm 2, eq. (19); Cor. 2.1). Device side of
// reference/kla_kalman/scan.hpp's MobiusBlock / DiagonalAffine and of
// scaled_scan.hpp's ScaledMobiusBlock / ScaledAffine, one slot each.
//
// Generic over the number type Num of every entry:
//   float  the paper's representation (forms `chunk_unscaled`): Λ and η plain
//          floats, each composed Möbius matrix rescaled as a whole by a power of
//          two. Overflows fp32 once Λ_t itself does (p̄ = 0, small ā).
//   Sf     the scaled representation (form `chunk`, gpu/kla_kalman/scaled.cuh):
//          every entry its own exponent; cannot overflow (docs/kla-scaled.md).
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "gpu/core/numeric.cuh"
#include "gpu/kla_kalman/scaled.cuh"

namespace ttr::gpu::kla {

// [[a, b], [c, d]] acting as Λ ↦ (aΛ + b)/(cΛ + d).
template <class Num>
struct Mobius {
  Num a, b, c, d;
};

// η ↦ A η + B.
template <class Num>
struct Affine {
  Num A, B;
};

// An fp32 input or state as a Num, and a Num rounded into fp32.
template <class Num>
__device__ inline Num lift(float x) {
  if constexpr (std::is_same_v<Num, Sf>) return normalised(x);
  else return x;
}
__device__ inline float out(float x) { return x; }
__device__ inline float out(Sf x) { return value(x); }

// x·y + z and x1·y1 + x2·y2: for Sf one renormalisation each (scaled.cuh), the
// same values as the separate operations.
__device__ inline float mul_add(float x, float y, float z) { return x * y + z; }
__device__ inline float dot2(float x1, float y1, float x2, float y2) { return x1 * y1 + x2 * y2; }

// Scaling a Möbius matrix leaves its map unchanged (it is projective).
// float: a power of two that puts the largest entry in [1/2, 1) — exact, and
// keeps products of many steps finite (scan.hpp "Range"), though not Λ itself.
__device__ inline void project(Mobius<float>& m) {
  const float x = fmaxf(fmaxf(fabsf(m.a), fabsf(m.b)), fmaxf(fabsf(m.c), fabsf(m.d)));
  if (!(x > 0.0f) || !isfinite(x)) return;
  int e = 0;
  (void)frexpf(x, &e);
  m.a = ldexpf(m.a, -e), m.b = ldexpf(m.b, -e), m.c = ldexpf(m.c, -e), m.d = ldexpf(m.d, -e);
}
// Sf: the largest exponent of the non-zero entries subtracted from all of them
// (scaled_scan.hpp's drop_common_exponent; exact).
__device__ inline void project(Mobius<Sf>& m) {
  int top = 0;
  bool any = false;
  Sf* entries[4] = {&m.a, &m.b, &m.c, &m.d};
  for (Sf* x : entries)
    if (x->m != 0.0f) top = any ? max(top, x->e) : x->e, any = true;
  for (Sf* x : entries)
    if (x->m != 0.0f) x->e -= top;
}

// M_t of eq. (17): [[1 + p̄φ, ā²φ], [p̄, ā²]], φ = k_n² λv_d (eq. (18)). The
// scaled form drops its common exponent at once (scaled_scan.hpp), the paper's
// only after a composition.
template <class Num>
__device__ inline Mobius<Num> step_matrix(Num k, Num lv, Num a2, Num p) {
  const Num phi = k * k * lv;
  Mobius<Num> m{mul_add(p, phi, lift<Num>(1.0f)), a2 * phi, p, a2};
  if constexpr (std::is_same_v<Num, Sf>) project(m);
  return m;
}

// later ∘ earlier = the matrix product later · earlier (Cor. 1.1), projected.
template <class Num>
__device__ inline Mobius<Num> compose(const Mobius<Num>& earlier, const Mobius<Num>& later) {
  Mobius<Num> o{dot2(later.a, earlier.a, later.b, earlier.c), dot2(later.a, earlier.b, later.b, earlier.d),
                dot2(later.c, earlier.a, later.d, earlier.c), dot2(later.c, earlier.b, later.d, earlier.d)};
  project(o);
  return o;
}

template <class Num>
__device__ inline Num apply(const Mobius<Num>& m, Num lam) {
  return mul_add(m.a, lam, m.b) / mul_add(m.c, lam, m.d);
}

// (A2, B2) ∘ (A1, B1) = (A2 A1, A2 B1 + B2) (Cor. 2.1).
template <class Num>
__device__ inline Affine<Num> compose(const Affine<Num>& earlier, const Affine<Num>& later) {
  return {later.A * earlier.A, mul_add(later.A, earlier.B, later.B)};
}

// What the scans write to memory is narrowed (the forms' policy): all four
// entries of a Möbius matrix, the additive part of an affine map — of a scaled
// number its mantissa (a narrowed mantissa may round up to 1: still valid); the
// exponents are integers, stored exactly.
template <class E>
__device__ inline float stored(float x) {
  return narrow<E>(x);
}
template <class E>
__device__ inline Sf stored(Sf x) {
  return {narrow<E>(x.m), x.e};
}
template <class E, class Num>
__device__ inline Mobius<Num> stored(const Mobius<Num>& m) {
  return {stored<E>(m.a), stored<E>(m.b), stored<E>(m.c), stored<E>(m.d)};
}
template <class E, class Num>
__device__ inline Affine<Num> stored(const Affine<Num>& x) {
  return {x.A, stored<E>(x.B)};
}

}  // namespace ttr::gpu::kla
