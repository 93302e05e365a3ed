// Scalar tier 'fp16' (see tiers.def).
#pragma once
#include "reference/core/scalar.hpp"
namespace ttr::tiers { using fp16 = float16; }
