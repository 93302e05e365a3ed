// Scalar tier 'tf32' (see tiers.def): an fp32 kernel whose tensor-core products read
// TF32 (reference/core/tf32_policy.hpp, Tf32Policy: rounded to nearest first). Not a scalar type: a tag whose policy the chunk and scan forms run (fp32
// compute, TF32 at every narrow point), so the tier
// serves those forms only; the sequential forms narrow nothing and are fp32's.
#pragma once
#include "reference/core/tf32_policy.hpp"
namespace ttr {
namespace tiers {
struct tf32 {};
}  // namespace tiers
template <>
struct policy_for<tiers::tf32> {
  using type = Tf32Policy;
};
}  // namespace ttr
