// Arithmetic policies of foreign kernels (docs/arithmetic-policies.md, "Foreign
// kernels"): how a kernel that is not ttrcheck's own may round, beyond the native
// policy of its dtype. A policy is a kernel dtype (what its outputs are stored in,
// Tier) plus where the Monte Carlo model (reference/core/mca.hpp) perturbs:
//
//   native        the dtype's own policy (docs/arithmetic-policies.md): fp32 → every
//                 operation in fp32; bf16/fp16 → fp32 compute, 16-bit inputs,
//                 matrix operands and stored intermediates.
//   tf32          fp32 outputs and compute, matrix-product operands (and the
//                 intermediates the form narrows) read as TF32, u = 2^-10 (one TF32
//                 ulp: truncated, as Triton's default fp32 tl.dot feeds the tensor
//                 cores raw fp32 bits, or rounded, as cuBLAS/torch with allow_tf32).
//   bf16_storage  fp32 outputs and compute, states and other narrowed
//                 intermediates (and matrix operands) stored in bf16, u = 2^-8:
//                 an fp32 kernel that keeps its chunk states in bf16.
//
// Spelled for --policy as fp32 | tf32 | fp16 | bf16-storage | bf16 | fp64.
// explain_order() lists them by the error they model, smallest first, so the first
// one a candidate passes is the smallest policy that explains its error.
#pragma once

#include <string>
#include <vector>

#include "oracles/arith.hpp"

namespace ttr {

enum class Policy { native, tf32, bf16_storage };

struct PolicyChoice {
  Tier dtype = Tier::fp32;
  Policy policy = Policy::native;
  bool operator==(const PolicyChoice&) const = default;
};

// "fp32", "tf32", "fp16", "bf16-storage", "bf16", "fp64"; InputError naming --policy otherwise.
PolicyChoice parse_policy(const std::string& s);
// The spelling of parse_policy; the dtype's name for the native policy.
std::string policy_name(Tier dtype, Policy policy);
// The policies `check --explain-policy` tries, smallest modelled error first.
const std::vector<std::string>& explain_order();
// The arithmetic a correct kernel of the policy runs in on the CPU (the tier of its
// chunk and scan forms): the dtype's own for a native policy; tf32 → the tf32 tier
// (fp32 compute, TF32 at every narrow point); bf16-storage → the bf16 tier (fp32
// compute, bf16 at every narrow point: exactly what the policy's model perturbs, and
// its outputs lie on the bf16 grid, which an fp32 output may). What `gate --policy`
// runs and the policy's calibration judges (docs/error-model.md).
Tier concrete_tier(const PolicyChoice& p);

}  // namespace ttr
