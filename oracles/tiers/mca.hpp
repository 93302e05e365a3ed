// Scalar tier 'mca' (see tiers.def): Monte Carlo arithmetic for the error model.
// Internal: `--arith` does not accept it; gate/error_model.cpp runs it.
#pragma once
#include "reference/core/mca.hpp"
namespace ttr::tiers { using mca = McaReal; }
