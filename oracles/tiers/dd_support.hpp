// Whether this process can run the dd tier's runners. With TTR_DD_FMA (CMake's
// default where the build machine runs FMA code) they are compiled with -mfma
// (reference/core/double_double.hpp: exact products by fused multiply-subtract),
// and a CPU without FMA would stop on an illegal instruction; this TU is compiled
// without it and asks the CPU first. The automatic oracle then uses MPFR instead
// (oracles/oracle_tier.cpp), and an explicit `--oracle-tier dd` is refused with
// dd_tier_unavailable()'s line.
#pragma once

#include <string>

namespace ttr {

bool dd_tier_runs_here();
std::string dd_tier_unavailable();  // why not, as one line (empty when it runs)

}  // namespace ttr
