// Scalar tier 'fp64' (see tiers.def).
#pragma once
#include "reference/core/scalar.hpp"
namespace ttr::tiers { using fp64 = double; }
