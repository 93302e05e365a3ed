#include "oracles/arith.hpp"

#include <fmt/format.h>

#include "oracles/error.hpp"

namespace ttr {

const char* tier_name(Tier t) {
  switch (t) {
#define TTR_TIER(name) \
  case Tier::name: return #name;
#include "oracles/tiers.def"
#undef TTR_TIER
  }
  return "?";
}

Arith parse_arith(const std::string& s) {
  for (Tier t : {Tier::fp32, Tier::fp64, Tier::bf16, Tier::fp16, Tier::dd, Tier::tf32})
    if (s == tier_name(t)) return {t, 0};
  for (Tier t : {Tier::mpfr, Tier::mpfi}) {
    const std::string prefix = std::string(tier_name(t)) + ":";
    if (s == tier_name(t)) return {t, 256};
    if (s.rfind(prefix, 0) == 0) {
      const std::string n = s.substr(prefix.size());
      if (!n.empty() && n.size() < 7 && n.find_first_not_of("0123456789") == std::string::npos) {
        const unsigned bits = static_cast<unsigned>(std::stoul(n));
        if (bits >= 24 && bits <= 100000) return {t, bits};
      }
      throw InputError(fmt::format("arithmetic '{}': bits must be an integer in [24, 100000]", s));
    }
  }
  throw InputError(fmt::format("unknown arithmetic '{}' (bf16|fp16|fp32|tf32|fp64|dd|mpfr:N|mpfi:N)", s));
}

std::string arith_name(const Arith& a) {
  if (a.tier == Tier::mpfr || a.tier == Tier::mpfi) return fmt::format("{}:{}", tier_name(a.tier), a.bits);
  return tier_name(a.tier);
}

std::string policy_description(const Arith& a, bool parallel_form) {
  const bool narrow16 = a.tier == Tier::bf16 || a.tier == Tier::fp16;
  if (!parallel_form)
    return fmt::format("every operation rounded to {}", arith_name(a));
  if (narrow16)
    return fmt::format("{} inputs, matrix operands and stored intermediates; fp32 compute and accumulation",
                       tier_name(a.tier));
  if (a.tier == Tier::tf32)
    return "tf32 (round to nearest even) inputs, matrix operands and stored intermediates; fp32 compute and "
           "accumulation";
  return fmt::format("every operation in {}", arith_name(a));
}

}  // namespace ttr
