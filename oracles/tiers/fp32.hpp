// Scalar tier 'fp32' (see tiers.def).
#pragma once
#include "reference/core/scalar.hpp"
namespace ttr::tiers { using fp32 = float; }
