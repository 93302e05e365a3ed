// Scalar tier 'bf16' (see tiers.def).
#pragma once
#include "reference/core/scalar.hpp"
namespace ttr::tiers { using bf16 = bfloat16; }
