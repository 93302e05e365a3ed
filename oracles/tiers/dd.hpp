// Scalar tier 'dd' (see tiers.def): double-double (QD's dd_real, libqd-dev), the
// fast oracle tier. Sequential forms only (TTR_TIER_FORMS in tiers.def).
#pragma once
#include "reference/core/double_double.hpp"
namespace ttr::tiers { using dd = dd_real; }
