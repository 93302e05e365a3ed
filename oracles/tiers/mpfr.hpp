// Scalar tier 'mpfr' (see tiers.def): Boost.Multiprecision, run-time precision.
#pragma once
#include "reference/core/multiprecision.hpp"
namespace ttr::tiers { using mpfr = mpfr_real; }
