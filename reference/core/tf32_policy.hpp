// The arithmetic of an fp32 kernel whose matrix products run on tensor cores in TF32
// (fp32's exponent, 10 explicit significand bits), rounding each operand to nearest
// first, ties to even (as cuBLAS with torch's allow_tf32 does on an H100,
// scripts/probe-tf32-rounding; CUTLASS's cvt.rna.tf32.f32 takes ties away from zero:
// they differ only on exact halves). The concrete
// arithmetic of the foreign `tf32` policy (gate/policies.hpp): what `--arith tf32` runs
// and the gate's calibration of that policy judges (docs/arithmetic-policies.md).
//
// A tensor core handed fp32 bits unconverted ignores the low 13 — truncation toward
// zero, twice the error and one-sided: Triton's default fp32 tl.dot on NVIDIA GPUs
// (triton-lang/triton#4574; #9295 added rounding as an option; Triton 3.6 on an H100
// by scripts/probe-tf32-rounding, docs/arithmetic-policies.md). The
// policy's model perturbs toward zero by up to one TF32 ulp so that truncation is inside
// it too where it can be; tests/gate/tf32_truncation_slow_test.cpp runs a truncating
// arithmetic against it, and docs/arithmetic-policies.md says where it holds.
//
// Narrowed, as by every policy (reference/core/policy.hpp): the inputs, every matrix-
// product operand, the stored intermediates and o — harsher than a kernel that stores
// its intermediates and outputs in fp32 and rounds only what meets a product. Only the
// tf32 tier's translation units (and tests) include this header.
#pragma once

#include <string>

#include "reference/core/policy.hpp"

namespace ttr {

struct Tf32Policy {
  using acc = float;
  static constexpr bool narrows = true;
  static float narrow(float x) { return round_float_to_tf32(x); }
  static std::string name() { return "tf32-fp32acc"; }
};
// Its fp32 operands of tensor-core products (tf32_operand, policy.hpp) read alike.
template <>
struct tf32_operand<Tf32Policy> {
  static float round(float x) { return round_float_to_tf32(x); }
};

}  // namespace ttr
