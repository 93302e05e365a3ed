// Arithmetic policies of the chunk and scan forms: what a GPU kernel computes in
// and what it stores in.
//
// A tensor-core kernel does not run in one precision. Its matrix-product
// operands are 16-bit (bf16/fp16), the products accumulate in fp32, elementwise
// work (gates, exponentials, the triangular solve) runs in fp32, and a few
// intermediates are written to memory in the 16-bit type (flash-linear-attention
// stores the inverted UT matrix, W, U, the per-chunk states and v_new as
// k.dtype). A policy names the two types:
//
//   acc      — the scalar every operation is computed in (fp32 for bf16/fp16)
//   narrow() — rounds an acc value to the storage/operand format; applied to the
//              inputs, to every matrix-product operand and to each intermediate a
//              kernel stores in 16 bits. Identity when there is no narrower type.
//
// Tiers map to policies (policy_for<Tier>): fp32 → fp32/fp32, fp64 → fp64/fp64,
// bf16 → fp32 acc + bf16 storage, fp16 → fp32 acc + fp16 storage, MPFR/MPFI →
// exact-in-tier (no narrowing). Which intermediates each form narrows is stated
// in the form's header and in docs/arithmetic-policies.md.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "reference/core/scalar.hpp"

namespace ttr {

// Rounds a float to nearest-even, keeping all but its `Drop` low significand bits, by
// bit manipulation: NaN and inf stay, and a carry out of the significand moves into the
// exponent, so a value past the narrower format's largest finite one becomes ±inf, as
// RNE requires.
template <int Drop>
inline float round_float_dropping(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7F800000u) == 0x7F800000u) return x;  // inf or NaN
  u += ((1u << (Drop - 1)) - 1u) + ((u >> Drop) & 1u);
  u &= ~((1u << Drop) - 1u);
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// bfloat16 (7 explicit significand bits): the hot path of the bf16 policy; the same
// result as BF16Format::round for every float.
inline float round_float_to_bf16(float x) { return round_float_dropping<16>(x); }

// acc == storage: nothing to narrow.
template <class Acc>
struct ExactPolicy {
  using acc = Acc;
  static constexpr bool narrows = false;
  static const Acc& narrow(const Acc& x) { return x; }
  static std::string name() { return scalar_traits<Acc>::name(); }
};

// fp32 compute, 16-bit storage and matrix operands.
template <class Format>
struct Mixed16Policy {
  using acc = float;
  static constexpr bool narrows = true;
  static float narrow(float x) {
    if constexpr (std::is_same_v<Format, BF16Format>) return round_float_to_bf16(x);
    else return static_cast<float>(Format::round(x));
  }
  static std::string name() { return scalar_traits<Float16<Format>>::name() + "-fp32acc"; }
};

template <class Tier>
struct policy_for {
  using type = ExactPolicy<Tier>;
};
template <class F>
struct policy_for<Float16<F>> {
  using type = Mixed16Policy<F>;
};
template <class Tier>
using policy_for_t = typename policy_for<Tier>::type;

// TF32 (10 explicit significand bits, fp32's exponent): what a Hopper tensor core reads
// of an fp32 matrix-product operand when the product runs in TF32 (Triton's default for
// an fp32 tl.dot).
inline float round_float_to_tf32(float x) { return round_float_dropping<13>(x); }

// An fp32 operand of a tensor-core product inside a 16-bit kernel: a kernel that keeps
// its operands in fp32 "for precision" (flash-linear-attention's chunk_kda_bwd_intra,
// reference/family/delta_chunk_backward.hpp) still has them read as TF32. Identity
// where the policy does not narrow (exact tiers, fp32); TF32 rounding under the 16-bit
// policies; the Monte Carlo policy's is in mca.hpp (it also perturbs them under the
// foreign `tf32` policy of an fp32 kernel, gate/policies.hpp).
template <class P>
struct tf32_operand {
  static const typename P::acc& round(const typename P::acc& x) { return x; }
};
template <class F>
struct tf32_operand<Mixed16Policy<F>> {
  static float round(float x) { return round_float_to_tf32(x); }
};

// Rounds every element of a buffer to the policy's storage format.
template <class P, class Range>
void narrow_all(Range& xs) {
  if constexpr (P::narrows)
    for (auto& x : xs) x = P::narrow(x);
}

}  // namespace ttr
