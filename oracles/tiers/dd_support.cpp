#include "oracles/tiers/dd_support.hpp"

namespace ttr {

bool dd_tier_runs_here() {
#if defined(TTR_DD_FMA) && (defined(__x86_64__) || defined(__i386__))
  static const bool fma = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") != 0;
  }();
  return fma;
#else
  return true;
#endif
}

std::string dd_tier_unavailable() {
  if (dd_tier_runs_here()) return {};
  return "the dd oracle tier of this build uses FMA instructions (built with TTR_DD_FMA=ON) and this CPU has "
         "none: use --oracle-tier mpfr, or rebuild with -DTTR_DD_FMA=OFF";
}

}  // namespace ttr
