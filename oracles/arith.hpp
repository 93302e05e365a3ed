// Which arithmetic a layer form runs in: a scalar tier and, for MPFR/MPFI, bits.
#pragma once

#include <string>

namespace ttr {

enum class Tier {
#define TTR_TIER(name) name,
#include "oracles/tiers.def"
#undef TTR_TIER
};

struct Arith {
  Tier tier = Tier::mpfr;
  unsigned bits = 256;  // requested significand bits (mpfr, mpfi only)
};

const char* tier_name(Tier);
// "bf16", "fp16", "fp32", "fp64", "dd" (double-double, sequential forms only), "tf32"
// (fp32 with TF32 at the narrow points: chunk and scan forms only),
// "mpfr:N", "mpfi:N" (N >= 24); InputError otherwise.
Arith parse_arith(const std::string& s);
std::string arith_name(const Arith&);
// What the arithmetic means for a form (docs/arithmetic-policies.md): the
// sequential definition rounds every operation to the tier; the chunk and scan
// forms (parallel_form) run the tier's policy — bf16/fp16 storage and operands
// with fp32 compute. Recorded in the `policy` metadata of files we write.
std::string policy_description(const Arith&, bool parallel_form);

}  // namespace ttr
