#include "gate/policies.hpp"

#include <fmt/format.h>

#include "oracles/error.hpp"

namespace ttr {

PolicyChoice parse_policy(const std::string& s) {
  if (s == "fp32") return {Tier::fp32, Policy::native};
  if (s == "tf32") return {Tier::fp32, Policy::tf32};
  if (s == "fp16") return {Tier::fp16, Policy::native};
  if (s == "bf16-storage") return {Tier::fp32, Policy::bf16_storage};
  if (s == "bf16") return {Tier::bf16, Policy::native};
  if (s == "fp64") return {Tier::fp64, Policy::native};
  throw InputError(fmt::format("--policy: unknown arithmetic policy '{}' (fp32|tf32|fp16|bf16-storage|bf16|fp64)", s));
}

std::string policy_name(Tier dtype, Policy policy) {
  switch (policy) {
    case Policy::tf32: return "tf32";
    case Policy::bf16_storage: return "bf16-storage";
    case Policy::native: break;
  }
  return tier_name(dtype);
}

Tier concrete_tier(const PolicyChoice& p) {
  switch (p.policy) {
    case Policy::tf32: return Tier::tf32;
    case Policy::bf16_storage: return Tier::bf16;
    case Policy::native: break;
  }
  return p.dtype;
}

const std::vector<std::string>& explain_order() {
  // u of the narrowed values: none, 2^-10 (fp32 outputs, fp32's range), 2^-11 (fp16
  // outputs, fp16's range and subnormal floor 2^-24: neither of tf32 and fp16 holds the
  // other, and a kernel with fp32 outputs is explained by the fp32-output policy first),
  // 2^-8 (fp32 outputs), 2^-8 (bf16 outputs). fp64 is no explanation of a fp32-or-
  // narrower kernel's error and is left out.
  static const std::vector<std::string> order = {"fp32", "tf32", "fp16", "bf16-storage", "bf16"};
  return order;
}

}  // namespace ttr
