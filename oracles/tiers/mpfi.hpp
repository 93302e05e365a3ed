// Scalar tier 'mpfi' (see tiers.def): Boost.Multiprecision, run-time precision.
#pragma once
#include "reference/core/multiprecision.hpp"
namespace ttr::tiers { using mpfi = mpfi_real; }
